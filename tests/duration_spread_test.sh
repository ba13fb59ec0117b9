#!/bin/bash
# Runs duration_spread_test.py against tools/duration_spread.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/duration_spread_test.py")"
