#!/bin/bash
# Checkpoints through the training CLI on 4 real processes (ZeroPP pp2 x zero2): a run killed
# (SIGKILL) in the middle of a save (during the shard writes, before the manifest's rename, after
# the step directory's rename but before `latest`) leaves the previous checkpoint loadable, and
# `--resume auto` continues to the same losses as the uninterrupted run; a write refused (file-size
# limit) and a really full filesystem (a small tmpfs) fail the save with one line and leave the
# previous checkpoint intact; restarts resume to the same final loss.
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
# A disk that refuses the write (a file-size limit, as a full disk would: EFBIG instead of ENOSPC)
# during the step-6 save: one clear error line naming the file, and the step-3 checkpoint intact.
dir="$WORK/full"
timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --steps 3 --save-dir "$dir" --save-every 3 >/dev/null 2>&1
out="$( (ulimit -f 16; timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --steps 6 --save-dir "$dir" \
  --save-every 3 --resume auto) 2>&1)"; rc=$?
err=$(grep -m1 'error:' <<<"$out")
if [[ $rc -ne 0 && "$err" == *"checkpoint save $dir: $dir/.tmp-step-000006/shard-"*".safetensors: write failed: File too large; the previous checkpoint is intact"* \
      && "$(cat "$dir/latest")" == "step-000003" && ! -d "$dir/step-000006" && ! -d "$dir/.tmp-step-000006" ]]; then
  out2="$(timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --save-dir "$dir" --resume auto 2>&1)"
  if [[ "$out2" == *"RESUME step=3 from $dir/step-000003"* && "$(losses "$out2")" == "$want" ]]; then
    pass "write refused during a save: '$err'; step 3 still loads and resumes exactly"
  else
    fail "after a refused write: $out2"
  fi
else
  fail "refused write: rc=$rc latest=$(cat "$dir/latest" 2>/dev/null): $out"
fi
# A really full filesystem: a 800 KiB tmpfs (in a private mount namespace, so it vanishes with the
# subshell on every exit path) holds the step-3 checkpoint (about 540 KB) but not a second one.
dir="$WORK/tmpfs/ckpt"; mkdir -p "$WORK/tmpfs"
enospc() {
  mount -t tmpfs -o size=800k tmpfs "$WORK/tmpfs" || exit 3
  timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --steps 3 --save-dir "$dir" --save-every 3 >/dev/null 2>&1
  out="$(timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --steps 6 --save-dir "$dir" --save-every 3 \
    --resume auto 2>&1)"; rc=$?
  err=$(grep -m1 'No space left' <<<"$out")  # the rank(s) whose write failed; the others say so
  if [[ $rc -ne 0 && "$err" == *"checkpoint save $dir: $dir/.tmp-step-000006/"*"No space left on device; the previous checkpoint is intact"* \
        && "$(cat "$dir/latest")" == "step-000003" && ! -d "$dir/step-000006" && ! -d "$dir/.tmp-step-000006" ]]; then
    out2="$(timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --save-dir "$dir" --resume auto 2>&1)"
    [[ "$out2" == *"RESUME step=3 from $dir/step-000003"* && "$(losses "$out2")" == "$want" ]] && { echo "$err"; exit 0; }
    echo "after ENOSPC: $out2"; exit 1
  fi
  echo "ENOSPC: rc=$rc latest=$(cat "$dir/latest" 2>/dev/null): $out"; exit 1
}
export -f enospc losses; export dir WORK LAUNCHER TRAIN want; export A_STR="${A[*]}"
msg="$(unshare -m --propagation private bash -c 'A=($A_STR); enospc' 2>&1)"; rc=$?
if [[ $rc -eq 0 ]]; then
  pass "full filesystem (tmpfs) during a save: '$msg'; step 3 still loads and resumes exactly"
elif [[ $rc -eq 3 || $rc -eq 1 && "$msg" == *"unshare failed"* ]]; then
  echo "SKIP: cannot mount a small tmpfs here (needs root and mount namespaces): $msg"
else
  fail "$msg"
fi
# Restarts: rank 1 is killed before step 12 of 15; the launcher stops every rank and starts them
# again (--max-restarts 1); they resume from the step-10 checkpoint and end with the same loss.
B=(--steps 15 --width 32 --depth 2 --heads 2 --context 16 --micro-batch 2 --log-every 1 --pp 2 --lr 0.01)
ref="$(timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${B[@]}" 2>&1)"
want=$(grep -oP '(?<=last_loss=)[0-9.]+' <<<"$ref")
dir="$WORK/restart"
out="$(ZEROPP_TEST_KILL=1:12 timeout 300 "$LAUNCHER" --nproc-per-node 4 --max-restarts 1 -- "$TRAIN" "${B[@]}" \
  --save-dir "$dir" --save-every 5 --resume auto 2>&1)"; rc=$?
got=$(grep -oP '(?<=last_loss=)[0-9.]+' <<<"$out")
if [[ $rc -eq 0 && "$out" == *"rank 1 (pid "*"killed by signal 9 (SIGKILL); stopped the other 3 local rank(s); restarting all 4 local ranks (restart 1 of 1)"* \
      && "$out" == *"RESUME step=10 from $dir/step-000010"* && -n "$want" && "$got" == "$want" ]]; then
  pass "rank 1 killed at step 12, restarted, resumed from step 10: last_loss $got = uninterrupted $want"
else
  fail "restart: rc=$rc got '$got' want '$want': $out"
fi
# Without restarts left, the launcher exits non-zero naming the rank.
out="$(ZEROPP_TEST_KILL=2:3 timeout 300 "$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${B[@]}" 2>&1)"; rc=$?
if [[ $rc -ne 0 && "$out" == *"zpp run: rank 2 (pid "*"killed by signal 9 (SIGKILL); stopped the other 3 local rank(s)"* && "$out" != *restarting* ]]; then
  pass "no restarts: the launcher names the killed rank and exits $rc"
else
  fail "no restarts: rc=$rc: $out"
fi
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
