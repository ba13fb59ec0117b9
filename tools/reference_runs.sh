#!/usr/bin/env bash
# reference_runs.sh N DIR CONTEXT MICRO_BATCH [--steps S] [--speed NAME]: N concurrent 1-rank training
# runs of the calibration's GPT (width 256, depth 4, 4 heads, 8 micro-batches of MICRO_BATCH x CONTEXT
# tokens, S steps (8 unless given), --profile: every step after the first), each's output in
# DIR/runK.txt. ./zpp calibrate fits the planner's compute costs to them (tools/calibrate.sh). With
# --speed NAME, also prints one line,
#   speed_reference NAME fb_s=S
# S: the runs' mean forward + backward seconds per step: how fast the box computes now, for
# ./zpp bench planner-local to compare with the calibration's own run of the same shape.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="reference_runs: usage: reference_runs.sh N DIR CONTEXT MICRO_BATCH [--steps S] [--speed NAME]"
(($# >= 4)) || { echo "$usage" >&2; exit 2; }
n="$1" dir="$2" ctx="$3" mb="$4" steps=8 speed=""
shift 4
while (($#)); do
  case "$1:${2:-}" in
    --steps:*) [[ "$2" =~ ^[0-9]+$ && "$2" -ge 4 ]] ||
                 { echo "reference_runs: --steps: got '$2', expected a whole number of at least 4" >&2; exit 2; }
               steps="$2" ;;
    --speed:?*) speed="$2" ;;
    *) echo "$usage (got: $1 ${2:-})" >&2; exit 2 ;;
  esac
  shift 2
done
mkdir -p "$dir"
for ((i = 0; i < n; i++)); do
  bazel-bin/tools/launcher --nproc-per-node 1 --master-port $((29650 + i)) -- bazel-bin/tools/train --width 256 \
    --depth 4 --heads 4 --context "$ctx" --microbatches 8 --micro-batch "$mb" --steps "$steps" --bench-warmup 3 \
    --log-every 1000 --profile >"$dir/run$i.txt" 2>&1 &
done
wait
if [[ -n "$speed" ]]; then
  cat "$dir"/run*.txt | grep -oP '(?<=PROFILE ).*' | python3 -c "
import re, sys
runs = [{k: float(v) for k, v in re.findall(r'(\w+)=([0-9.]+)%?', l)} for l in sys.stdin if l.strip()]
if not runs:
    sys.exit('reference_runs: no PROFILE line in $dir (did the runs fail?)')
parts = ('forward', 'backward', 'backward_input', 'backward_weight', 'recompute')
fb = sum(r['step_s'] * sum(r[k] for k in parts) / 100 for r in runs) / len(runs)
print('speed_reference $speed fb_s=%.4f' % fb)"
fi
