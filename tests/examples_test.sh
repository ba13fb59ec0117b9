#!/bin/bash
# The examples (a Llama-style decoder and an MLP, wrapped through zeropp.h only) train on 2 real
# processes with ZeRO-3 (pp=1, zero=2) and with a 2-stage pipeline (pp=2): each run ends with its
# DONE line, names the schedule it ran, and its loss falls by at least a third.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
FAILS=0; PASSES=0
for ex in llama mlp; do
  for layout in "" "--pp 2"; do
    want=$([[ -z "$layout" ]] && echo zero3 || echo zeropp)
    out="$(timeout 300 "$LAUNCHER" --nproc-per-node 2 -- "$RUNFILES/examples/$ex" $layout 2>&1)"; rc=$?
    done_line="$(grep -oP 'DONE steps=\S+ first_loss=\S+ last_loss=\S+ schedule=\S+$' <<<"$out")"
    first=$(grep -oP '(?<=first_loss=)[0-9.]+' <<<"$done_line"); last=$(grep -oP '(?<=last_loss=)[0-9.]+' <<<"$done_line")
    if [[ $rc -eq 0 && "$done_line" == *"schedule=$want" ]] && awk -v f="$first" -v l="$last" 'BEGIN{exit !(l < f * 0.67)}'; then
      echo "PASS: $ex ${layout:-pp=1}: $done_line"; PASSES=$((PASSES + 1))
    else
      echo "FAIL: $ex ${layout:-pp=1} rc=$rc: $out"; FAILS=$((FAILS + 1))
    fi
  done
done
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
