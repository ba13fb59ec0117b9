#!/usr/bin/env bash
# ./zpp bench split-backward: Bi + W (scheduler/split_backward.h) against autograd's own whole
# backward on one pipeline chunk of the bench GPT, one thread, same run.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //benchmarks:split_backward_bench
bazel-bin/benchmarks/split_backward_bench
