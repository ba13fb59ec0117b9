#!/usr/bin/env bash
# ./zpp bench published: the planner's predictor against published iteration times of large
# training runs (benchmarks/published/*.json: Megatron-LM SC21 Table 1, Korthikanti et al. 2022
# Table 4, MT-NLG 530B, MosaicML's FSDP runs of MPT, torchtitan's FSDP2 runs of Llama, BigScience's
# BLOOM-176B), calibrated only from the hardware description; ends with RESULT lines (mean absolute
# error, target 15%; worst case, target 25%).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //benchmarks:published_validation
echo "# command: ./zpp bench published   ($(date -u +%Y-%m-%d); each source's hardware description," \
  "scheduler/planner/hardware/NAME.json, in brackets)"
bazel-bin/benchmarks/published_validation benchmarks/published/*.json
