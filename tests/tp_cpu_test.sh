#!/bin/bash
# Runs tp_cpu_test.py against tools/tp_cpu.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/tp_cpu_test.py")"
