#!/bin/bash
# tools/calibrate.sh refuses bad arguments with one line and exit 2 before measuring anything (a
# flag-like or second argument, an output in a missing directory or onto a directory), and writes
# nothing.
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
CAL="$(readlink -f "$RUNFILES/tools/calibrate.sh")"
T="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
check() {  # EXPECTED_LINE ARGS...
  local want="$1"; shift
  local out rc
  out="$(bash "$CAL" "$@" 2>&1)"; rc=$?
  if [[ $rc -eq 2 && "$out" == "$want" ]]; then
    echo "PASS: calibrate $*"
  else
    echo "FAIL: calibrate $* (rc=$rc): $out"; fails=$((fails + 1))
  fi
}
usage="expected nothing or one output file OUT.json (default scheduler/planner/hardware/cpu-local.json)"
check "calibrate: got '--bogus', $usage" --bogus
check "calibrate: got '$T/a.json $T/b.json', $usage" "$T/a.json" "$T/b.json"
check "calibrate: OUT.json: got '$T/missing/x.json', expected a file in an existing directory" "$T/missing/x.json"
check "calibrate: OUT.json: got '$T', expected a file in an existing directory" "$T"
if [[ -n "$(ls -A "$T" 2>/dev/null)" ]]; then echo "FAIL: files written: $(ls -A "$T")"; fails=$((fails + 1)); fi
exit $((fails > 0))
