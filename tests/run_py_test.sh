#!/bin/bash
# Runs one tests/<name>_test.py (its runfiles path is $1) with ZEROPP_RUNFILES set to the
# workspace's runfiles directory, where the tools it checks lie. See py_script_test.bzl.
export ZEROPP_RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
exec python3 "$(readlink -f "$ZEROPP_RUNFILES/$1")"
