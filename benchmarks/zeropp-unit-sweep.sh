#!/usr/bin/env bash
# ./zpp bench zeropp-unit-sweep: ZeroPP with scheduling units of U micro-batches, U from pp to m,
# on 4 local CPU ranks (pp=2 x zero=2, 2 chunks per rank, m=8): all-gather + reduce-scatter bytes per
# rank per step from the engine's counters beside the ZeroPP paper's 36*B*h^2/U per layer
# (B micro-batches, h hidden size; fp32 here, times (N-1)/N for N=zero), and throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -q //tools:launcher //tools:train 2>/dev/null || bazel build //tools:launcher //tools:train
H=256; DEPTH=8; M=8; PP=2; ZERO=2
MODEL=(--width $H --depth $DEPTH --heads 8 --context 64 --micro-batch 2)
echo "# GPT width $H depth $DEPTH, pp=$PP x zero=$ZERO, 2 chunks per rank, m=$M micro-batches per step"
echo "# U  tokens/s  bytes/rank/step  paper_36Bh2/U*layers*4*(N-1)/N  ratio  bytes*U"
results=()
for U in 2 4 8; do
  line=$(bazel-bin/tools/launcher --nproc-per-node 4 -- bazel-bin/tools/train "${MODEL[@]}" --pp $PP --schedule zeropp \
    --chunks 2 --microbatches $M --unit-size $U --steps 4 --bench-warmup 1 --log-every 1000 | grep -oP 'BENCH.*')
  tps=$(grep -oP '(?<=tokens_per_s=)[0-9.]+' <<<"$line")
  bytes=$(grep -oP '(?<=counted_bytes_per_rank_step=)[0-9.]+' <<<"$line")
  # Layers held by one pipeline rank: DEPTH/PP blocks of 12 h^2 parameters.
  paper=$(awk -v b=$M -v h=$H -v u=$U -v l=$((DEPTH / PP)) -v n=$ZERO 'BEGIN { printf "%.0f", 36 * b * h * h / u * l * 4 * (n - 1) / n }')
  ratio=$(awk -v a="$bytes" -v p="$paper" 'BEGIN { printf "%.3f", a / p }')
  printf "  %-2s %9s %16s %33s %6s %9.0f\n" "$U" "$tps" "$bytes" "$paper" "$ratio" "$(awk -v a="$bytes" -v u=$U 'BEGIN{print a*u}')"
  results+=("$U $tps $bytes $paper $ratio")
done
for r in "${results[@]}"; do
  read -r U tps bytes paper ratio <<<"$r"
  verdict=$(awk -v x="$ratio" 'BEGIN { print (x <= 1.10) ? "MET" : "MISSED" }')
  echo "RESULT zeropp-unit-sweep comm_bytes_u$U=$bytes B reference=$paper ratio=$ratio target=1.10 $verdict"
done
first=(${results[0]}); last=(${results[-1]})
fall=$(awk -v a="${first[2]}" -v b="${last[2]}" 'BEGIN { printf "%.3f", a / b }')
ideal=$(awk -v a="${first[0]}" -v b="${last[0]}" 'BEGIN { printf "%.3f", b / a }')
echo "RESULT zeropp-unit-sweep bytes_fall_u${first[0]}_to_u${last[0]}=$fall x reference=$ideal ratio=$(awk -v f=$fall -v i=$ideal 'BEGIN{printf "%.3f", f/i}') target=0.50 $(awk -v f=$fall -v i=$ideal 'BEGIN{print (f/i >= 0.5) ? "MET" : "MISSED"}')"
