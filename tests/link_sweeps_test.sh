#!/bin/bash
# Runs link_sweeps_test.py against tools/link_sweeps.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/link_sweeps_test.py")"
