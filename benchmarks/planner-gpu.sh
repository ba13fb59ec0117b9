#!/usr/bin/env bash
# ./zpp bench planner-gpu [DESCRIPTION]: the planner against every single-GPU training step that
# gpu_checks.sh measured on a lent GPU (the committed logs benchmarks/results/gpu-*.txt), predicted
# from DESCRIPTION (default auto: the datasheet description of the GPU each log's header names);
# runs here, no GPU needed.
# Ends with RESULT lines (steps within 10%, mean absolute error): benchmarks/planner_gpu.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //tools:plan >/dev/null 2>&1 || bazel build //tools:plan
hw="${1:-auto}"
echo "# command: ./zpp bench planner-gpu $hw   ($(date -u +%Y-%m-%d))"
exec python3 benchmarks/planner_gpu.py --plan bazel-bin/tools/plan --hardware "$hw" benchmarks/results/gpu-*.txt
