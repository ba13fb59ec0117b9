#!/bin/bash
# Runs the Python test named by its first argument (a path in the workspace) from this test's runfiles.
exec python3 "${TEST_SRCDIR:-$PWD/..}/zeropp/$1"
