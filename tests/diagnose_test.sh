#!/bin/bash
# Hangs that explain themselves: rank 1 skips an all-reduce; rank 0 times out and dumps its flight
# record, rank 1 dumps when the launcher stops it; ./zpp diagnose names the operation (#3 of the
# world group: ProcessGroups' own set-up uses #1 and #2 ... whichever it is, the same number on
# both ranks), the rank that never arrived and its last operation.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
DIR="$(mktemp -d "${TEST_TMPDIR:-/tmp}/flight.XXXXXX")"
out="$(ZEROPP_FLIGHT_DIR="$DIR" timeout 120 "$RUNFILES/tools/launcher" --nproc-per-node 2 -- \
  "$RUNFILES/tests/skip_collective_program" 2>&1)"; rc=$?
FAILS=0; PASSES=0
if [[ $rc -ne 0 && -f "$DIR/rank0.json" && -f "$DIR/rank1.json" && "$out" == *"flight record in $DIR/rank0.json"* ]]; then
  echo "PASS: both ranks dumped their flight records (rc=$rc)"; PASSES=$((PASSES + 1))
else
  echo "FAIL: dumps: rc=$rc $(ls "$DIR"): $out"; FAILS=$((FAILS + 1))
fi
d="$("$RUNFILES/tools/diagnose" "$DIR" 2>&1)"
world=$(grep "group 'world'" <<<"$d")
if [[ "$world" =~ the\ first\ operation\ where\ the\ ranks\ diverge\ is\ \#([0-9]+)\ all_reduce\ \(4000\ bytes ]] \
   && [[ "$world" == *"Entered by rank 0 ("* && "$world" == *"Never arrived: rank 1 (last: #$((BASH_REMATCH[1] - 1)) all_reduce (4000 bytes, done))"* ]]; then
  echo "PASS: diagnose: $world"; PASSES=$((PASSES + 1))
else
  echo "FAIL: diagnose said: $d"; FAILS=$((FAILS + 1))
fi
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
