#!/bin/bash
# Runs compare_ops_test.py against tools/compare_ops.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/compare_ops_test.py")"
