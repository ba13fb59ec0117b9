#!/usr/bin/env bash
# ./zpp bench planner-gpu-offload: the planner's offload model against every offloaded step (AdamW on
# the host; parameters on the host too) that gpu_checks.sh measured on a lent GPU (the committed logs
# benchmarks/results/gpu-*.txt), each predicted from the description its own lease measured (the
# host's AdamW rate, copy and PCIe bandwidth among it); the datasheet prediction beside it. Runs here,
# no GPU needed. Ends with RESULT lines (steps within 10%, mean absolute error):
# benchmarks/planner_gpu_offload.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //tools:plan >/dev/null 2>&1 || bazel build //tools:plan
echo "# command: ./zpp bench planner-gpu-offload   ($(date -u +%Y-%m-%d))"
exec python3 benchmarks/planner_gpu_offload.py --plan bazel-bin/tools/plan benchmarks/results/gpu-*.txt
