#!/usr/bin/env bash
# ./zpp bench op-kinds: where one rank's training step goes by kind of operator, measured (train
# --profile-ops: the host operators' self time, PyTorch's profiler) beside what the planner charges
# each kind (plan --predict's PREDICT_OPS) from this machine's description, and the step itself.
# The model and per-rank micro-batch are those of ./zpp bench zeropp-vs-3d (GPT width 256, depth 4,
# 4 heads, context 128, byte vocabulary; micro-batch 4), on one rank with 8 micro-batches a step
# (ZeRO-3 over 1: no communication), one intra-op thread, predicted as ./zpp calibrate and ./zpp
# bench planner-local predict this model (--no-flash: the attention core's FLOPs not halved, its
# scores' element-wise passes counted). One rank alone on the box runs faster than the calibration's
# runs, which keep every core busy.
#   ./zpp bench op-kinds [--hardware FILE]   (default scheduler/planner/hardware/cpu-local.json;
#                                             calibrate first on a new machine)
# RESULT lines: per kind predicted/measured seconds per step (target 0.9-1.1), the step, and the
# values element-wise operators moved (the planner's pass counts, cost_model.h) against the count
# from the operators' shapes (zeropp/cli/op_profile.h: every input read, one output written). The
# matrix products' FLOPs must be equal on both sides (the same work), or it exits 1. The profiler
# adds a little to every operator's time; the step line is measured without it.
set -euo pipefail
cd "$(dirname "$0")/.."
HW=scheduler/planner/hardware/cpu-local.json
while (($#)); do
  case "$1" in
    --hardware) HW="$2"; shift 2 ;;
    *) echo "op-kinds: unknown option '$1' (expected --hardware FILE)" >&2; exit 2 ;;
  esac
done
[[ -f "$HW" ]] || { echo "op-kinds: --hardware: no file '$HW'" >&2; exit 2; }
bazel build //tools:train //tools:launcher //tools:plan
H=256 D=4 HEADS=4 CTX=128 MB=4 M=8
echo "# command: ./zpp bench op-kinds $*  ($(date -u +%Y-%m-%d)); hardware description $HW"
echo "# GPT width $H, depth $D, $HEADS heads, context $CTX, vocabulary 256; one rank, $M micro-batches of $MB a step"
train() {
  bazel-bin/tools/launcher --nproc-per-node 1 -- bazel-bin/tools/train --width $H --depth $D --heads $HEADS \
    --context $CTX --micro-batch $MB --microbatches $M --log-every 1000 "$@" 2>&1
}
# The step unprofiled (BENCH: the mean of the steps after 2 warm-up steps), then profiled.
bench="$(train --steps 8 --bench-warmup 2)"
step="$(grep -oP 'step_s_mean=\K[0-9.]+' <<<"$bench" | tail -1)"
prof="$(train --steps 5 --profile --profile-ops)"
grep -E 'OPS|PROFILE' <<<"$prof" | sed 's/^\[rank 0\] //'
pred="$(bazel-bin/tools/plan --predict --hardware "$HW" --gpus 1 --hidden $H --layers $D --heads $HEADS --seq $CTX \
  --vocab 256 --micro-batch $MB --global-batch $((MB * M)) --design zero3 --no-flash 2>&1)"
grep -E '^PREDICT' <<<"$pred"
pstep="$(grep -oP '^PREDICT .*step_s=\K[0-9.]+' <<<"$pred")"
printf '%s\n%s\n' "$prof" "$pred" | python3 tools/compare_ops.py --result op-kinds --step "$step" "$pstep"
