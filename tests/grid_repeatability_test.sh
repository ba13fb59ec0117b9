#!/bin/bash
# Runs grid_repeatability_test.py against tools/grid_repeatability.py and tools/plan in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/grid_repeatability_test.py")" "$RUNFILES"
