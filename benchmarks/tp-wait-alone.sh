#!/usr/bin/env bash
# ./zpp bench tp-wait-alone: one tp=2 job of the 3D baseline alone on this box (2 ranks, no pipeline,
# no replicas; GPT width 256, depth 4, 4 heads, context 128, 8 micro-batches a step) at micro-batch
# 1, 4 and 8: its ranks' wall time in TP collectives per step (train_3d's tp_wait_s_per_step, the
# steps after 2 warm-up steps) beside the planner's tp_collectives_s for the same job from this
# machine's description. The TP link the planner gives this job (scheduler/planner/predictor.cc,
# TensorParallelLinks) was fitted on one such job per two cores at other shapes (tools/calibrate_pairs.sh,
# intra_node_tp_filled; without it, intra_node_oversubscribed, fitted on two such jobs at once).
#   ./zpp bench tp-wait-alone [--hardware FILE]   (default scheduler/planner/hardware/cpu-local.json)
# RESULT lines: per micro-batch size, predicted over measured wait (target 0.9-1.1).
set -euo pipefail
cd "$(dirname "$0")/.."
ARGS="$*"
source benchmarks/hardware_option.bash
hardware_option tp-wait-alone "$@"
bazel build //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d
echo "# command: ./zpp bench tp-wait-alone $ARGS  ($(date -u +%Y-%m-%d)); hardware description $HW"
printf '%-6s %12s %12s %9s %12s %12s\n' micro measured_s predicted_s pred/meas step_meas_s step_pred_s
RESULTS=()
for mb in 1 4 8; do
  out="$(bazel-bin/tools/launcher --nproc-per-node 2 -- bazel-bin/benchmarks/baseline_3d/train_3d --tp 2 --width 256 \
    --depth 4 --heads 4 --context 128 --micro-batch $mb --microbatches 8 --steps 8 --bench-warmup 2 --log-every 1000 2>&1)"
  wait_s="$(grep -oP 'tp_wait_s_per_step=\K[0-9.]+' <<<"$out" || true)"
  tps="$(grep -oP 'BENCH .*tokens_per_s=\K[0-9.]+' <<<"$out" || true)"
  [[ -n "$wait_s" && -n "$tps" ]] || { echo "tp-wait-alone: micro-batch $mb: no BENCH line:"; tail -5 <<<"$out"; exit 1; }
  pred="$(bazel-bin/tools/plan --predict --hardware "$HW" --hidden 256 --layers 4 --heads 4 --seq 128 --vocab 256 \
    --cpu-attention --gpus 2 --design 3d --tp 2 --micro-batch $mb --global-batch $((mb * 8)) 2>&1 | grep '^PREDICT ')"
  read -r ratio step pstep ptp < <(awk -v w="$wait_s" -v t="$tps" -v n=$((mb * 8 * 128)) -v p="$pred" 'BEGIN {
    match(p, /tp_collectives_s=[0-9.]+/); tp = substr(p, RSTART + 17, RLENGTH - 17) + 0
    match(p, /step_s=[0-9.]+/); st = substr(p, RSTART + 7, RLENGTH - 7) + 0
    printf "%.3f %.4f %.4f %.4f\n", tp / w, n / t, st, tp }')
  printf '%-6s %12.4f %12.4f %9.3f %12.4f %12.4f\n' "$mb" "$wait_s" "$ptp" "$ratio" "$step" "$pstep"
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9 && r <= 1.1) ? "MET" : "MISSED" }')
  RESULTS+=("RESULT tp-wait-alone tp_wait_mb$mb=$ptp s reference=$wait_s ratio=$ratio target=0.9-1.1 $verdict")
done
printf '%s\n' "${RESULTS[@]}"
