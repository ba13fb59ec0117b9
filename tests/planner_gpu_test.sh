#!/bin/bash
# Runs planner_gpu_test.py against benchmarks/planner_gpu.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/planner_gpu_test.py")"
