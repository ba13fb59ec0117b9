#!/bin/bash
# Runs layering_test.py on the source tree this test's runfiles point back to.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$RUNFILES/tests/layering_test.py")"
