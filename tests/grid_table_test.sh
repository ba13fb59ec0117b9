#!/bin/bash
# Runs grid_table_test.py against tools/grid_table.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/grid_table_test.py")"
