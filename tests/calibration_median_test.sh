#!/bin/bash
# Runs calibration_median_test.py against benchmarks/calibration_median.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/calibration_median_test.py")"
