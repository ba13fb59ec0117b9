#!/bin/bash
# Runs link_fit_test.py against tools/relative_fit.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/link_fit_test.py")"
