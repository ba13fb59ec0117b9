#!/usr/bin/env bash
# ./zpp bench op-kinds: where one rank's training step goes by kind of operator, measured (train
# --profile-ops: the host operators' self time, PyTorch's profiler) beside what the planner charges
# each kind (plan --predict's PREDICT_OPS) from this machine's description, and the step itself.
# The model and per-rank micro-batch are those of ./zpp bench zeropp-vs-3d (GPT width 256, depth 4,
# 4 heads, context 128, byte vocabulary; micro-batch 4), on one rank with 8 micro-batches a step
# (ZeRO-3 over 1: no communication), one intra-op thread, predicted as ./zpp calibrate and ./zpp
# bench planner-local predict this model (--cpu-attention: the attention core's FLOPs not halved, its
# scores' element-wise passes counted). One rank alone on the box runs faster than the calibration's
# runs, which keep every core busy.
#   ./zpp bench op-kinds [--hardware FILE]   (default scheduler/planner/hardware/cpu-local.json;
#                                             calibrate first on a new machine)
#   ./zpp bench op-kinds --tp T              ZeRO-3 over T ranks, then the 3D baseline's tp T
#       (benchmarks/baseline_3d/train_3d --tp T) on the same T ranks, each rank the same 8
#       micro-batches of 4: rank 0's operators of each beside plan --predict, then what tensor
#       parallelism adds to each kind per matrix-product GFLOP, measured and charged
#       (benchmarks/op_kinds_tp.py prints the RESULT lines). TP collectives are communication,
#       which neither side's compute kinds hold; the step less their wait is compared too.
# RESULT lines: per kind predicted/measured seconds per step (target 0.9-1.1), the step, and the
# values element-wise operators moved (the planner's pass counts, cost_model.h) against the count
# from the operators' shapes (zeropp/cli/op_profile.h: every input read, one output written). The
# matrix products' FLOPs must be equal on both sides (the same work), or it exits 1. The profiler
# adds a little to every operator's time; the step line is measured without it.
set -euo pipefail
cd "$(dirname "$0")/.."
HW=scheduler/planner/hardware/cpu-local.json
ARGS="$*" TP=0
while (($#)); do
  case "$1" in
    --hardware) HW="${2:-}"; shift 2 || shift ;;
    --tp) TP="${2:-}"; shift 2 || shift ;;
    *) echo "op-kinds: unknown option '$1' (expected --hardware FILE or --tp T)" >&2; exit 2 ;;
  esac
done
[[ -f "$HW" ]] || { echo "op-kinds: --hardware: no file '$HW'" >&2; exit 2; }
[[ "$TP" =~ ^[0-9]+$ && ( "$TP" == 0 || ( "$TP" -ge 2 && $((4 % TP)) == 0 ) ) ]] ||
  { echo "op-kinds: --tp: got '$TP', expected 2 or 4 (dividing the model's 4 heads)" >&2; exit 2; }
bazel build //tools:train //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d
H=256 D=4 HEADS=4 CTX=128 MB=4 M=8
echo "# command: ./zpp bench op-kinds $ARGS  ($(date -u +%Y-%m-%d)); hardware description $HW"
MODEL=(--width $H --depth $D --heads $HEADS --context $CTX --micro-batch $MB --microbatches $M --log-every 1000)
PLAN=(--hardware "$HW" --hidden $H --layers $D --heads $HEADS --seq $CTX --vocab 256 --micro-batch $MB --cpu-attention)
RANKS=$((TP > 0 ? TP : 1))
zero3() { bazel-bin/tools/launcher --nproc-per-node "$RANKS" -- bazel-bin/tools/train "${MODEL[@]}" "$@" 2>&1; }
tp3d() {
  local a=() x
  for x in "$@"; do [[ "$x" == --profile ]] || a+=("$x"); done  # train_3d has no --profile
  bazel-bin/tools/launcher --nproc-per-node "$TP" -- bazel-bin/benchmarks/baseline_3d/train_3d --tp "$TP" \
    "${MODEL[@]}" "${a[@]}" 2>&1
}
# measure RUN TOKENS PLAN_ARGS...: rank 0's step unprofiled (the steps after 2 warm-up steps), then
# profiled, beside the planner's prediction; the log of both in $LOG.
LOG=""
measure() {
  local run="$1" tokens="$2"; shift 2
  local bench step tps tpw prof pred pstep result=()
  bench="$("$run" --steps 8 --bench-warmup 2)"
  step="$(grep -oP 'step_s_mean=\K[0-9.]+' <<<"$bench" | tail -1 || true)"
  if [[ -z "$step" ]]; then  # train_3d's BENCH line: tokens/s over the timed steps
    tps="$(grep -oP 'BENCH .*tokens_per_s=\K[0-9.]+' <<<"$bench" | tail -1 || true)"
    [[ -n "$tps" ]] || { echo "op-kinds: the unprofiled run printed no BENCH line:"; tail -5 <<<"$bench"; exit 1; }
    step="$(awk -v t="$tps" -v n="$tokens" 'BEGIN { printf "%.4f", n / t }')"
  fi
  tpw="$(grep -oP 'tp_wait_s_per_step=\K[0-9.]+' <<<"$bench" | tail -1 || true)"
  prof="$("$run" --steps 5 --profile --profile-ops)"
  grep -E 'OPS|PROFILE' <<<"$prof" | sed 's/^\[rank [0-9]*\] //'
  pred="$(bazel-bin/tools/plan --predict "${PLAN[@]}" "$@" 2>&1)"
  grep -E '^PREDICT' <<<"$pred" || { echo "op-kinds: plan --predict failed: $pred"; exit 1; }
  pstep="$(grep -oP '^PREDICT .*step_s=\K[0-9.]+' <<<"$pred")"
  echo "MEASURED step_s=$step tp_wait_s=${tpw:-0}"
  LOG="$prof"$'\n'"$pred"$'\n'"MEASURED step_s=$step tp_wait_s=${tpw:-0}"
  [[ "$TP" == 0 ]] && result=(--result op-kinds)  # with --tp, op_kinds_tp.py prints the RESULT lines
  printf '%s\n' "$LOG" | python3 tools/compare_ops.py "${result[@]}" --step "$step" "$pstep"
}
if [[ "$TP" == 0 ]]; then
  echo "# GPT width $H, depth $D, $HEADS heads, context $CTX, vocabulary 256; one rank, $M micro-batches of $MB a step"
  measure zero3 $((MB * M * CTX)) --gpus 1 --design zero3 --global-batch $((MB * M))
  exit 0
fi
echo "# GPT width $H, depth $D, $HEADS heads, context $CTX, vocabulary 256; on $TP ranks (every core busy), each rank"
echo "# $M micro-batches of $MB a step: ZeRO-3 over $TP ranks (global batch $((TP * MB * M))), then the 3D baseline's"
echo "# tp $TP (no pipeline, no replicas: global batch $((MB * M))); rank 0 of each"
echo "## ZeRO-3 over $TP"
measure zero3 $((TP * MB * M * CTX)) --gpus "$TP" --design zero3 --zero "$TP" --global-batch $((TP * MB * M))
ZLOG="$LOG"
echo "## 3D tp $TP"
measure tp3d $((MB * M * CTX)) --gpus "$TP" --design 3d --tp "$TP" --pp 1 --dp 1 --global-batch $((MB * M)) \
  --grad-accumulation sink  # the 3D baseline runs on zeropp's engine: its gradients land through the sink
# Per matrix-product FLOP, what tensor parallelism adds to each kind, measured and predicted.
python3 benchmarks/op_kinds_tp.py <(printf '%s\n' "$ZLOG") <(printf '%s\n' "$LOG")
