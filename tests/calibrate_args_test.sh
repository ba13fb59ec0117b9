#!/bin/bash
# tools/calibrate.sh refuses bad arguments with one line and exit 2 before measuring anything (a
# flag-like or second argument, an output in a missing directory or onto a directory), and writes
# nothing; so does tools/calibrate_pairs.sh (a missing description, a malformed --sweep or --only), and
# tools/reference_runs.sh, the calibration's 1-rank runs (a malformed --steps, an unknown option),
# and tools/comm_cpu_pairs.sh (a pair count that is not a whole number of at least 3).
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
CAL="$(readlink -f "$RUNFILES/tools/calibrate.sh")"
T="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
refused() {  # SCRIPT EXPECTED_LINE ARGS...: the script exits 2 printing exactly EXPECTED_LINE
  local script="$1" want="$2"; shift 2
  local out rc
  out="$(bash "$script" "$@" 2>&1)"; rc=$?
  if [[ $rc -eq 2 && "$out" == "$want" ]]; then
    echo "PASS: $(basename "$script") $*"
  else
    echo "FAIL: $(basename "$script") $* (rc=$rc): $out"; fails=$((fails + 1))
  fi
}
check() { refused "$CAL" "$@"; }
usage="expected nothing or one output file OUT.json (default scheduler/planner/hardware/cpu-local.json)"
check "calibrate: got '--bogus', $usage" --bogus
check "calibrate: got '$T/a.json $T/b.json', $usage" "$T/a.json" "$T/b.json"
check "calibrate: OUT.json: got '$T/missing/x.json', expected a file in an existing directory" "$T/missing/x.json"
check "calibrate: OUT.json: got '$T', expected a file in an existing directory" "$T"
# tools/calibrate_pairs.sh (calibrate's last step; --sweep, its diagnostic) likewise.
PAIRS="$(readlink -f "$RUNFILES/tools/calibrate_pairs.sh")"
HW="$T/hw.json"
echo '{"shared_compute_units": 2}' >"$HW"
check_pairs() { refused "$PAIRS" "$@"; }
check_pairs "calibrate_pairs: '$T/none.json' does not exist (run ./zpp calibrate first)" "$T/none.json"
sweep="expected --sweep tp|tp-filled|gather WIDTHxCONTEXTxMB... or --only tp-filled"
check_pairs "calibrate_pairs: got '--sweep tp' after HW.json, $sweep" "$HW" --sweep tp
check_pairs "calibrate_pairs: got '--sweep allreduce 256x64x1' after HW.json, $sweep" "$HW" --sweep allreduce 256x64x1
check_pairs "calibrate_pairs: got '--bogus' after HW.json, $sweep" "$HW" --bogus
check_pairs "calibrate_pairs: --sweep shape: got '256x0x1', expected WIDTHxCONTEXTxMB (positive integers, e.g. 256x96x2)" \
  "$HW" --sweep gather 256x64x1 256x0x1
check_pairs "calibrate_pairs: --only: got 'tp', expected tp-filled" "$HW" --only tp
check_pairs "calibrate_pairs: got '--only' after HW.json, $sweep" "$HW" --only
rm -f "$HW"
REFS="$(readlink -f "$RUNFILES/tools/reference_runs.sh")"
check_refs() { refused "$REFS" "$@"; }
check_refs "reference_runs: --steps: got '3', expected a whole number of at least 4" 2 "$T/r" 128 4 --steps 3
check_refs "reference_runs: --steps: got '2x', expected a whole number of at least 4" 2 "$T/r" 128 4 --steps 2x
refs_usage="reference_runs: usage: reference_runs.sh N DIR CONTEXT MICRO_BATCH [--steps S] [--speed NAME]"
check_refs "$refs_usage" 2 "$T/r" 128
check_refs "$refs_usage (got: --bogus 1)" 2 "$T/r" 128 4 --bogus 1
check_refs "$refs_usage (got: --speed )" 2 "$T/r" 128 4 --speed
CPU_PAIRS="$(readlink -f "$RUNFILES/tools/comm_cpu_pairs.sh")"
refused "$CPU_PAIRS" "comm_cpu_pairs: PAIRS: got '2', expected a whole number >= 3" 2
refused "$CPU_PAIRS" "comm_cpu_pairs: PAIRS: got '12x', expected a whole number >= 3" 12x
if [[ -n "$(ls -A "$T" 2>/dev/null)" ]]; then echo "FAIL: files written: $(ls -A "$T")"; fails=$((fails + 1)); fi
exit $((fails > 0))
