#!/usr/bin/env bash
# ./zpp bench offload-step: an optimizer step with master, gradient and moments on NVMe, pipelined,
# vs max(I/O alone, compute alone) measured in the same run. Target: at most 1.2x.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${ZPP_OFFLOAD_DIR:-$HOME/.cache/zeropp-offload-bench}"
mkdir -p "$DIR"
bazel build -q //benchmarks:offload_step_bench 2>/dev/null || bazel build //benchmarks:offload_step_bench
bazel-bin/benchmarks/offload_step_bench "$DIR" "${ZPP_UNITS:-16}" "${ZPP_UNIT_PARAMS:-16777216}"
