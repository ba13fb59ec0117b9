#!/bin/bash
# Runs compute_fit_test.py against tools/compute_fit.py and tools/plan in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/compute_fit_test.py")" "$RUNFILES"
