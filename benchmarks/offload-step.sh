#!/usr/bin/env bash
# ./zpp bench offload-step: an optimizer step with master, gradient and moments on NVMe, pipelined,
# vs max(I/O alone, compute alone), all three measured alternately in the same run, means over 10
# repetitions with their spread. Target: at most 1.2x. The files are removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="$(mktemp -d "${ZPP_OFFLOAD_DIR:-$HOME/.cache}/zeropp-offload-bench.XXXXXX")"
trap 'rm -rf "$DIR"' EXIT
bazel build //benchmarks:offload_step_bench
bazel-bin/benchmarks/offload_step_bench "$DIR" "${ZPP_UNITS:-16}" "${ZPP_UNIT_PARAMS:-16777216}" "${ZPP_REPS:-10}"
