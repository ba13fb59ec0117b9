#!/usr/bin/env bash
# ./zpp bench zeropp-unit-sweep: ZeroPP with scheduling units of U micro-batches, U from pp to m,
# on 4 local CPU ranks (pp=2 x zero=2, 2 chunks per rank, m=8): all-gather + reduce-scatter bytes per
# rank per step from the engine's counters beside the ZeroPP paper's 36*B*h^2/U per layer
# (B micro-batches, h hidden size; fp32 here, times (N-1)/N for N=zero), and throughput: the mean
# step over 10 steps after 2 warm-up steps with its standard deviation, model FLOP/s and MFU against
# one thread's matmul throughput measured in this run times the cores the ranks share. 4 ranks run
# on this machine's cores; where that is more ranks than cores every RESULT line says so (the byte
# counts are exact whatever the cores; the throughput is not a target here).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //tools:launcher //tools:train //benchmarks:matmul_bench
H=256; DEPTH=8; M=8; PP=2; ZERO=2; RANKS=$((PP * ZERO)); CORES=$(nproc)
USED=$((RANKS < CORES ? RANKS : CORES))
TAG=""; [[ $RANKS -gt $CORES ]] && TAG="_oversubscribed_${RANKS}ranks_${CORES}cores"
MODEL=(--width $H --depth $DEPTH --heads 8 --context 64 --micro-batch 2)
mm="$(bazel-bin/benchmarks/matmul_bench --threads 1 --width $H --tokens 128 --vocab 256 | grep MATMUL)"
echo "# $mm"
square=$(grep -oP '(?<=square_gflops=)[0-9.]+' <<<"$mm")
echo "# GPT width $H depth $DEPTH, pp=$PP x zero=$ZERO ($RANKS ranks on $CORES cores), 2 chunks per rank, m=$M micro-batches per step"
echo "# MFU: model GFLOP/s over $square GFLOP/s (one thread, 2048 square, this run) x $USED cores"
echo "# U  tokens/s  step_s(mean sd, 10 steps)  model_GFLOP/s  mfu  bytes/rank/step  paper_36Bh2/U*layers*4*(N-1)/N  ratio  bytes*U"
results=()
for U in 2 4 8; do
  line=$(bazel-bin/tools/launcher --nproc-per-node $RANKS -- bazel-bin/tools/train "${MODEL[@]}" --pp $PP --schedule zeropp \
    --chunks 2 --microbatches $M --unit-size $U --steps 12 --bench-warmup 2 --log-every 1000 | grep -oP 'BENCH.*')
  f() { grep -oP "(?<= $1=)[0-9.]+" <<<"$line"; }
  tps=$(f tokens_per_s); bytes=$(f counted_bytes_per_rank_step); gf=$(f model_gflops)
  mfu=$(awk -v g="$gf" -v s="$square" -v c=$USED 'BEGIN { printf "%.3f", g / (s * c) }')
  # Layers held by one pipeline rank: DEPTH/PP blocks of 12 h^2 parameters.
  paper=$(awk -v b=$M -v h=$H -v u=$U -v l=$((DEPTH / PP)) -v n=$ZERO 'BEGIN { printf "%.0f", 36 * b * h * h / u * l * 4 * (n - 1) / n }')
  ratio=$(awk -v a="$bytes" -v p="$paper" 'BEGIN { printf "%.3f", a / p }')
  printf "  %-2s %9s  %8s %7s%.0s %13s %5s %16s %33s %6s %9.0f\n" "$U" "$tps" "$(f step_s_mean)" "$(f step_s_sd)" "" "$gf" \
    "$mfu" "$bytes" "$paper" "$ratio" "$(awk -v a="$bytes" -v u=$U 'BEGIN{print a*u}')"
  results+=("$U $tps $bytes $paper $ratio")
done
for r in "${results[@]}"; do
  read -r U tps bytes paper ratio <<<"$r"
  verdict=$(awk -v x="$ratio" 'BEGIN { print (x <= 1.10) ? "MET" : "MISSED" }')
  echo "RESULT zeropp-unit-sweep comm_bytes_u$U$TAG=$bytes B reference=$paper ratio=$ratio target=1.10 $verdict"
done
first=(${results[0]}); last=(${results[-1]})
fall=$(awk -v a="${first[2]}" -v b="${last[2]}" 'BEGIN { printf "%.3f", a / b }')
ideal=$(awk -v a="${first[0]}" -v b="${last[0]}" 'BEGIN { printf "%.3f", b / a }')
echo "RESULT zeropp-unit-sweep bytes_fall_u${first[0]}_to_u${last[0]}$TAG=$fall x reference=$ideal ratio=$(awk -v f=$fall -v i=$ideal 'BEGIN{printf "%.3f", f/i}') target=0.50 $(awk -v f=$fall -v i=$ideal 'BEGIN{print (f/i >= 0.5) ? "MET" : "MISSED"}')"
