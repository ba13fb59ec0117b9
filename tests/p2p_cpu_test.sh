#!/bin/bash
# Runs p2p_cpu_test.py against tools/p2p_cpu.py in the runfiles.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/p2p_cpu_test.py")"
