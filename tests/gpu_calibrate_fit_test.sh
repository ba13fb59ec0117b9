#!/bin/bash
# Runs gpu_calibrate_fit_test.py against the bundle's gpu_calibrate.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/gpu_calibrate_fit_test.py")"
