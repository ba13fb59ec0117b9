#!/bin/bash
# Checkpoints through the training CLI on 4 real processes (ZeroPP pp2 x zero2): a run killed
# (SIGKILL) in the middle of a save (during the shard writes, before the manifest's rename, after
# the step directory's rename but before `latest`) leaves the previous checkpoint loadable, and
# `--resume auto` continues to the same losses as the uninterrupted run.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
TRAIN="$RUNFILES/tools/train"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ckpt.XXXXXX")"
FAILS=0; PASSES=0
pass() { echo "PASS: $1"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $1"; FAILS=$((FAILS + 1)); }
A=(--steps 9 --width 32 --depth 2 --heads 2 --context 16 --micro-batch 2 --log-every 1 --pp 2 --lr 0.01)
losses() { grep -oP '(?<=step    )[789]/9 \S+ loss [0-9.]+' <<<"$1" | awk '{print $1, $4}' | tr '\n' ' '; }

ref="$(timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" 2>&1)"
want="$(losses "$ref")"
[[ -n "$want" ]] || fail "uninterrupted run printed no losses: $ref"
for point in shards manifest rename; do
  dir="$WORK/$point"
  out="$(ZEROPP_TEST_CRASH_IN_SAVE="6:$point" timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" \
    --save-dir "$dir" --save-every 3 2>&1)"; rc=$?
  if [[ $rc -eq 0 || "$(cat "$dir/latest" 2>/dev/null)" != "step-000003" ]]; then
    fail "crash at $point: rc=$rc latest=$(cat "$dir/latest" 2>/dev/null): $out"; continue
  fi
  out="$(timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --save-dir "$dir" --save-every 3 --resume auto 2>&1)"; rc=$?
  got="$(losses "$out")"
  if [[ $rc -eq 0 && "$out" == *"RESUME step=3 from $dir/step-000003"* && "$got" == "$want" ]]; then
    pass "killed at $point during the step-6 save: resumed from step 3, steps 7-9 losses $got"
  else
    fail "resume after a crash at $point: rc=$rc got '$got' want '$want': $out"
  fi
done
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
