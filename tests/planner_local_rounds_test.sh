#!/bin/bash
# Runs planner_local_rounds_test.py against benchmarks/planner_local.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/planner_local_rounds_test.py")"
