#!/usr/bin/env bash
# ./zpp bench deferred-w: what a cap on ZeroPP's deferred weight passes (train --max-deferred-w N)
# saves, measured by the engine and predicted by the planner. One ZeroPP job on this box's 4 ranks
# (pp 2 x zero 2, one chunk a rank, one unit of 8 micro-batches of 2 sequences; GPT width 256,
# depth 8, 4 heads, context 512, where a deferred W's saved inputs and output gradients are a
# large part of the stash) with the schedule's own deferral, at most one W pending, and none:
# the most bytes CPU tensors held at once (train's peak_tensor_mb, max over ranks), the step, the
# last loss (the same in every run: a cap reorders work, not arithmetic), beside `plan --predict`
# of the same layout on this machine's description (its memory less the reserved part).
#   ./zpp bench deferred-w [--hardware FILE]   (default scheduler/planner/hardware/cpu-local.json)
# RESULT lines: the memory each cap saves against the schedule's own, predicted over measured
# (target 0.9-1.1), and whether every run ended on the same loss.
set -euo pipefail
cd "$(dirname "$0")/.."
ARGS="$*"
source benchmarks/hardware_option.bash
hardware_option deferred-w "$@"
bazel build //tools:launcher //tools:plan //tools:train
echo "# command: ./zpp bench deferred-w $ARGS  ($(date -u +%Y-%m-%d)); hardware description $HW"
printf '%-5s %11s %11s %9s %10s %10s %9s  %s\n' cap tensor_MB pred_MB pred/meas step_s pred_s pred/meas last_loss
declare -A MEAS PRED LOSS
for cap in own 1 0; do
  flag=()
  [[ $cap == own ]] || flag=(--max-deferred-w "$cap")
  out="$(OMP_NUM_THREADS=1 bazel-bin/tools/launcher --nproc-per-node 4 -- bazel-bin/tools/train --pp 2 --zero 2 \
    --schedule zeropp --chunks 1 --microbatches 8 --unit-size 8 --micro-batch 2 --width 256 --depth 8 --heads 4 \
    --context 512 --steps 5 --bench-warmup 2 --log-every 1000 "${flag[@]}" 2>&1)"
  tensor="$(grep -oP 'peak_tensor_mb=\K[0-9.]+' <<<"$out" || true)"
  tps="$(grep -oP 'BENCH .*tokens_per_s=\K[0-9.]+' <<<"$out" || true)"
  loss="$(grep -oP 'DONE .*last_loss=\K[0-9.]+' <<<"$out" | head -1 || true)"
  [[ -n "$tensor" && -n "$tps" && -n "$loss" ]] ||
    { echo "deferred-w: cap $cap: no BENCH/DONE line:"; tail -5 <<<"$out"; exit 1; }
  pred="$(bazel-bin/tools/plan --predict --hardware "$HW" --hidden 256 --layers 8 --heads 4 --vocab 256 --seq 512 \
    --cpu-attention --gpus 4 --devices-per-node 4 --global-batch 32 --design zeropp --pp 2 --zero 2 --v 1 --u 8 \
    --micro-batch 2 --recompute "${flag[@]}" | grep '^PREDICT ')"
  read -r pmem pstep step < <(awk -v p="$pred" -v t="$tps" 'BEGIN {
    match(p, /mem_mb=[0-9.]+/); m = substr(p, RSTART + 7, RLENGTH - 7) + 0
    match(p, /reserved_mb=[0-9.]+/); r = substr(p, RSTART + 12, RLENGTH - 12) + 0
    match(p, /step_s=[0-9.]+/); s = substr(p, RSTART + 7, RLENGTH - 7) + 0
    printf "%.1f %.4f %.4f\n", m - r, s, 32 * 512 / t }')
  MEAS[$cap]=$tensor PRED[$cap]=$pmem LOSS[$cap]=$loss
  awk -v c="$cap" -v t="$tensor" -v pm="$pmem" -v s="$step" -v ps="$pstep" -v l="$loss" \
    'BEGIN { printf "%-5s %11s %11s %9.3f %10s %10s %9.3f  %s\n", c, t, pm, pm / t, s, ps, ps / s, l }'
done
for cap in 1 0; do
  read -r saved psaved ratio < <(awk -v a="${MEAS[own]}" -v b="${MEAS[$cap]}" -v c="${PRED[own]}" -v d="${PRED[$cap]}" \
    'BEGIN { m = a - b; p = c - d; printf "%.1f %.1f %.3f\n", m, p, (m > 0 ? p / m : 0) }')
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9 && r <= 1.1) ? "MET" : "MISSED" }')
  echo "RESULT deferred-w memory_saved_cap$cap=$psaved MB reference=$saved ratio=$ratio target=0.9-1.1 $verdict"
done
same=$([[ "${LOSS[own]}" == "${LOSS[1]}" && "${LOSS[own]}" == "${LOSS[0]}" ]] && echo 1 || echo 0)
verdict=$([[ $same == 1 ]] && echo MET || echo MISSED)
echo "RESULT deferred-w same_last_loss=$same reference=1 ratio=$same target=1 $verdict"
