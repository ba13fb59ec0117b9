#!/usr/bin/env bash
# reference_runs.sh N DIR CONTEXT MICRO_BATCH [--speed NAME]: N concurrent 1-rank training runs of the
# calibration's GPT (width 256, depth 4, 4 heads, 8 micro-batches of MICRO_BATCH x CONTEXT tokens,
# 8 steps, the last 5 timed, --profile), each's output in DIR/runK.txt. ./zpp calibrate fits the
# planner's compute costs to them (tools/calibrate.sh). With --speed NAME, also prints one line,
#   speed_reference NAME fb_s=S
# S: the runs' mean forward + backward seconds per step: how fast the box computes now, for
# ./zpp bench planner-local to compare with the calibration's own run of the same shape.
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 4)) || { echo "reference_runs: usage: reference_runs.sh N DIR CONTEXT MICRO_BATCH [--speed NAME]" >&2; exit 2; }
n="$1" dir="$2" ctx="$3" mb="$4"
mkdir -p "$dir"
for ((i = 0; i < n; i++)); do
  bazel-bin/tools/launcher --nproc-per-node 1 --master-port $((29650 + i)) -- bazel-bin/tools/train --width 256 \
    --depth 4 --heads 4 --context "$ctx" --microbatches 8 --micro-batch "$mb" --steps 8 --bench-warmup 3 \
    --log-every 1000 --profile >"$dir/run$i.txt" 2>&1 &
done
wait
if [[ "${5:-}" == --speed ]]; then
  cat "$dir"/run*.txt | grep -oP '(?<=PROFILE ).*' | python3 -c "
import re, sys
runs = [{k: float(v) for k, v in re.findall(r'(\w+)=([0-9.]+)%?', l)} for l in sys.stdin if l.strip()]
if not runs:
    sys.exit('reference_runs: no PROFILE line in $dir (did the runs fail?)')
parts = ('forward', 'backward', 'backward_input', 'backward_weight', 'recompute')
fb = sum(r['step_s'] * sum(r[k] for k in parts) / 100 for r in runs) / len(runs)
print('speed_reference ${6:?--speed needs a NAME} fb_s=%.4f' % fb)"
fi
