#!/usr/bin/env bash
# ./zpp bench zero3-vs-fsdp2: the same GPT on 2 and 4 local CPU ranks, zeropp ZeRO-3 vs PyTorch
# FSDP2 (fully_shard, gloo), back to back in one invocation. PyTorch (with its CUDA dependency
# wheels, as PyPI ships it) is installed into a private virtual environment, never into the
# product's. Prints one RESULT line per measure.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${ZEROPP_BENCH_VENV:-$HOME/.cache/zeropp-bench-venv}"
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.11.0') else 1)" 2>/dev/null; then
  echo "bench: installing torch==2.11.0 into $VENV (peer only)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q torch==2.11.0 numpy
fi
bazel build -q //tools:launcher //tools:train 2>/dev/null || bazel build //tools:launcher //tools:train
MODEL=(--vocab 256 --context 128 --width 768 --depth 8 --heads 12 --micro-batch 2)
STEPS=(--steps "${ZPP_BENCH_STEPS:-8}" --bench-warmup 2)
OUT="$(mktemp -d)"
field() { grep -E "$3" "$1" | grep -oP "(?<=$2=)[0-9.]+" | tail -1; }  # FILE KEY LINE-PATTERN
verdict() { awk -v r="$1" -v t="$2" -v d="$3" 'BEGIN { ok = (d == "ge") ? (r >= t) : (r <= t); print ok ? "MET" : "MISSED" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }'; }
echo "# model: GPT vocab 256, context 128, width 768, depth 8, heads 12 (~57M parameters), fp32, micro-batch 2 per rank"
for n in 2 4; do
  bazel-bin/tools/launcher --nproc-per-node "$n" -- bazel-bin/tools/train "${MODEL[@]}" "${STEPS[@]}" --log-every 1000 \
    | tee "$OUT/zeropp$n.txt" | grep -E "BENCH|DONE"
  OMP_NUM_THREADS=1 bazel-bin/tools/launcher --nproc-per-node "$n" -- "$VENV/bin/python" benchmarks/fsdp2_gpt.py "${MODEL[@]}" "${STEPS[@]}" \
    2>&1 | tee "$OUT/fsdp2$n.txt" | grep -E "BENCH|DONE"
done
for n in 2 4; do
  z="$OUT/zeropp$n.txt"; f="$OUT/fsdp2$n.txt"
  zt=$(field "$z" tokens_per_s BENCH); ft=$(field "$f" tokens_per_s BENCH)
  zr=$(field "$z" peak_rss_mb DONE); fr=$(field "$f" peak_rss_mb DONE)
  zw=$(field "$z" wire_bytes_per_rank_step BENCH); fw=$(field "$f" wire_bytes_per_rank_step BENCH)
  zh=$(field "$z" allgather_hidden BENCH)
  r=$(ratio "$zt" "$ft"); echo "RESULT zero3-vs-fsdp2 tokens_per_s_n$n=$zt tok/s reference=$ft ratio=$r target=1.10 $(verdict "$r" 1.10 ge)"
  r=$(ratio "$zr" "$fr"); echo "RESULT zero3-vs-fsdp2 peak_rss_mb_n$n=$zr MB reference=$fr ratio=$r target=1.00 $(verdict "$r" 1.00 le)"
  r=$(ratio "$zw" "$fw"); echo "RESULT zero3-vs-fsdp2 wire_bytes_per_rank_step_n$n=$zw B reference=$fw ratio=$r target=1.00 $(verdict "$r" 1.00 le)"
  echo "RESULT zero3-vs-fsdp2 allgather_hidden_n$n=$zh fraction reference=1.0 ratio=$zh target=0.70 $(verdict "$zh" 0.70 ge)"
done
