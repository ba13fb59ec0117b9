#!/bin/bash
# Runs layer_cost_test.py against tools/layer_cost.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/layer_cost_test.py")"
