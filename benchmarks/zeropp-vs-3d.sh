#!/usr/bin/env bash
# ./zpp bench zeropp-vs-3d: ZeroPP against a Megatron-style 3D baseline on the same GPT, the same
# global batch and the same data (identical initial weights: every layout starts at the same loss),
# on 4 ranks as 2 nodes x 2 (tools/two_nodes.sh: network namespaces joined by veth; one node with
# 4 ranks where namespaces cannot be made), once with the inter-node link unshaped and once shaped
# to RATE (default 1gbit). Per layout: tokens/s, peak RSS net of the idle process (max over ranks),
# the most tensor bytes live at once in training (max over ranks; zeropp/host_allocator.h),
# bytes per rank per step (the zero group's gathers and reductions, the TP group's collectives,
# counted) beside the formulas, bytes per step on the inter-node link (veth counters) and on
# node 0's loopback. Then the crossover sweep (sequence length x U at fixed width: counted bytes
# of both designs against the paper's condition 2*s*U*b > 9*h), a plot, and RESULT lines.
#   ./zpp bench zeropp-vs-3d [--rate 1gbit] [--steps 10] [--rounds 1] [--model llama] [--no-crossover] [--plot PNG]
# --rounds N: every layout N times, the rounds in alternating order; tok/s and TP wait the median.
# --no-crossover: the layout table and its RESULT lines only; --plot: where the table's plot goes
# (default benchmarks/results/zeropp-vs-3d-DATE.png). ./zpp bench planner-local --fresh uses both.
# --model llama: the Llama-style decoder (RMSNorm, rotary, SwiGLU, 2 key/value heads for 4 query
# heads) instead of the GPT, every layout but sequence parallelism (the Llama's TP form has none)
# and the plain PP hybrids, no crossover sweep; files get a -llama suffix.
# 2 cores run 4 ranks here: every rank shares a core with another (oversubscribed), so tokens/s
# compare the designs on this machine only; the byte counts are exact anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=1gbit STEPS=10 ROUNDS=1 MODEL_KIND=gpt CROSSOVER=1 PLOT=""
while (($#)); do
  case "$1" in
    --rate) RATE="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --rounds) ROUNDS="${2:-}"; shift $(($# > 1 ? 2 : 1)) ;;
    --model) MODEL_KIND="$2"; shift 2 ;;
    --no-crossover) CROSSOVER=0; shift ;;
    --plot) PLOT="$2"; shift 2 ;;
    *) echo "zeropp-vs-3d: unknown option '$1' (expected --rate R, --steps N, --rounds N, --model gpt|llama," \
         "--no-crossover, --plot PNG)" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] ||
  { echo "zeropp-vs-3d: --rounds: got '$ROUNDS', expected a positive integer" >&2; exit 2; }
bazel build //tools:launcher //tools:train //benchmarks/baseline_3d:train_3d //benchmarks:matmul_bench
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib
TRAIN=bazel-bin/tools/train T3D=bazel-bin/benchmarks/baseline_3d/train_3d
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-vs-3d.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
H=256 D=4 HEADS=4 CTX=128 M=8 G=32 WARM=3
MODEL=(--width $H --depth $D --heads $HEADS --context $CTX --microbatches $M --steps "$STEPS" --bench-warmup $WARM
       --log-every 1000 --lr 3e-3)
SUFFIX=""
case "$MODEL_KIND" in
  gpt) ;;
  llama) MODEL+=(--model llama --kv-heads 2); SUFFIX="-llama" ;;
  *) echo "zeropp-vs-3d: --model: got '$MODEL_KIND', expected gpt or llama" >&2; exit 2 ;;
esac
two_nodes=1
probe="zppvs$$"
if ip netns add "$probe" 2>/dev/null; then ip netns del "$probe"; else two_nodes=0; fi
# The MFU denominator, measured in this run: one thread's fp32 matmul throughput at the model's
# GEMM shapes and a large square one (benchmarks/matmul_bench.cc), times the cores the 4 ranks use.
CORES=$(nproc); USED=$((CORES < 4 ? CORES : 4))
bazel-bin/benchmarks/matmul_bench --threads 1 --width $H --tokens $((G / M * CTX / 2)) --vocab 256 >"$WORK/mm.txt"
grep MATMUL "$WORK/mm.txt"
SQUARE=$(grep -oP '(?<=square_gflops=)[0-9.]+' "$WORK/mm.txt" | head -1)
BOUND=$(awk -v s="$SQUARE" -v u="$USED" 'BEGIN { print s * u }')
echo "# MFU: model FLOP/s (6 x matmul parameters + attention, per token) over $BOUND GFLOP/s ($USED cores x one thread's square matmul)"
echo "# $MODEL_KIND width $H, depth $D, $HEADS heads, context $CTX, byte vocabulary 256; global batch $G sequences"
echo "# ($((G * CTX)) tokens) per step in $M micro-batches; $STEPS steps, the last $((STEPS - WARM)) timed"
[[ $two_nodes == 1 ]] && echo "# 2 nodes x 2 ranks (network namespaces, veth); shaped: tc tbf $RATE each way" ||
  echo "# NOTE: network namespaces unavailable (not root?): 1 node x 4 ranks, no shaping"
# name | program | args (micro-batch per rank: global batch / (M * data-parallel ranks))
LAYOUTS=(
  "zero3_z4|$TRAIN|--pp 1 --micro-batch $((G / M / 4))"
  "fsdp_in_pp_1f1b_u1|$TRAIN|--pp 2 --schedule 1f1b --micro-batch $((G / M / 2))"
  "zeropp_pp2_z2_u2|$TRAIN|--pp 2 --schedule zeropp --unit-size 2 --micro-batch $((G / M / 2))"
  "zeropp_pp2_z2_u4|$TRAIN|--pp 2 --schedule zeropp --unit-size 4 --micro-batch $((G / M / 2))"
  "zeropp_pp2_z2_u8|$TRAIN|--pp 2 --schedule zeropp --unit-size 8 --micro-batch $((G / M / 2))"
  "pp2_dp2|$TRAIN|--pp 2 --dp 2 --zero 1 --schedule 1f1b --micro-batch $((G / M / 2))"
  "pp2_dp2_zero1|$TRAIN|--pp 2 --dp 2 --zero 1 --dp-mode zero1 --schedule 1f1b --micro-batch $((G / M / 2))"
  "3d_tp2_pp2|$T3D|--tp 2 --pp 2 --schedule 1f1b --micro-batch $((G / M))"
  "3d_tp2_pp2_sp|$T3D|--tp 2 --sp --pp 2 --schedule 1f1b --micro-batch $((G / M))"
  "3d_tp2_dp2|$T3D|--tp 2 --dp 2 --micro-batch $((G / M / 2))"
  "3d_tp2_dp2_zero1|$T3D|--tp 2 --dp 2 --dp-mode zero1 --micro-batch $((G / M / 2))"
)
run() {  # run SHAPE PROGRAM ARGS... -> the run's output in $WORK/out
  local shape="$1"; shift
  if [[ $two_nodes == 1 ]]; then
    local opts=(--nproc-per-node 2 --timeout 900)
    [[ "$shape" == shaped ]] && opts+=(--rate "$RATE")
    tools/two_nodes.sh "${opts[@]}" -- "$@" >"$WORK/out" 2>&1
  else
    bazel-bin/tools/launcher --nproc-per-node 4 -- "$@" >"$WORK/out" 2>&1
  fi
}
field() { grep -oP "(?<=$1=)[0-9.e+-]+" "${2:-$WORK/out}" | head -1 || true; }  # field NAME [FILE]
each_round() { local f; for f in "${rounds[@]}"; do field "$1" "$f"; done; }  # field NAME of every round
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }
TSV="$WORK/rows.tsv"
echo "# bytes: rank 0's per step in its sharding group (zero group; TP group for 3d), counted, and the"
echo "# formula; paper: 36*B*h^2/U-style closed form; inter_node_B: veth bytes per step (both ways, all"
echo "# steps and set-up averaged); lo_B_rank: node 0's loopback bytes per rank per timed step;"
echo "# tp_wait_s: 3D's ranks' mean wall time per step waiting in the layers', embedding's and loss's TP"
echo "# collectives (not the step-end all-reduce of replicated gradients, which plan counts in the reduction)"
JOBS=()  # shape|name|program|args, in the table's order
for shape in unshaped shaped; do
  [[ $two_nodes == 0 && $shape == shaped ]] && continue
  for entry in "${LAYOUTS[@]}"; do
    [[ $MODEL_KIND == llama && ( ${entry%%|*} == *_sp || ${entry%%|*} == pp2_dp2* ) ]] && continue
    JOBS+=("$shape|$entry")
  done
done
# Every round runs every job once: odd rounds in the table's order, even rounds backwards, so that a
# drift of the box's speed during the bench falls alike on every layout. Each run's output is kept
# as $WORK/out.JOB.ROUND; the table is printed once all rounds are done.
# With each run, the share of the box's CPU time the hypervisor gave to other guests meanwhile (steal,
# /proc/stat): a diagnostic of a slow run on a shared host.
ticks() { awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
n=${#JOBS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
  for ((i = 0; i < n; i++)); do
    k=$((r % 2 ? i : n - 1 - i))
    IFS='|' read -r shape name prog args <<<"${JOBS[$k]}"
    read -r steal0 total0 < <(ticks)
    # shellcheck disable=SC2086
    if ! run "$shape" "$prog" "${MODEL[@]}" $args; then
      echo "error: layout $name ($shape) failed in round $r:"; tail -20 "$WORK/out"; exit 1
    fi
    read -r steal1 total1 < <(ticks)
    cp "$WORK/out" "$WORK/out.$k.$r"
    echo "# round $r of $ROUNDS, run $((i + 1)) of $n: $name ($shape) $(field tokens_per_s) tok/s, steal" \
      "$(awk -v s=$((steal1 - steal0)) -v t=$((total1 - total0)) 'BEGIN { printf "%.1f", (t > 0) ? 100 * s / t : 0 }')%"
  done
done
printf "%-20s %-8s %9s %6s %8s %8s %8s %8s %12s %12s %12s %13s %11s %9s\n" layout link tok/s mfu loss0 lossN rssMB \
  tensorMB measured_B formula_B paper_B inter_node_B lo_B_rank tp_wait_s
for ((k = 0; k < n; k++)); do
  IFS='|' read -r shape name prog args <<<"${JOBS[$k]}"
  rounds=("$WORK/out.$k".*)
  cp "$WORK/out.$k.1" "$WORK/out"  # bytes, losses and counters: the first round's (the same every round)
  # tok/s and TP wait: the median over rounds; peak RSS and tensor bytes: the largest.
  tps=$(each_round tokens_per_s | median) tpw=$(each_round tp_wait_s_per_step | median)
  rss=$(each_round peak_rss_net_mb | sort -g | tail -1) tensor=$(each_round peak_tensor_mb | sort -g | tail -1)
  gflops=$(each_round model_gflops | median)
  counted=$(field counted_bytes_per_rank_step) tpb=$(field tp_bytes_per_rank_step)
  lo=$(field wire_bytes_per_rank_step) inter=$(field inter_node_bytes) l0=$(field first_loss) ln=$(field last_loss)
  mfu=$(awk -v g="$gflops" -v b="$BOUND" 'BEGIN { printf "%.3f", g / b }')
  tpb=${tpb:-0} inter=${inter:-0}
  # Formulas (rank 0, the first stage). ZeRO-3/ZeroPP: the zero group's all-gathers and
  # reduce-scatters from the schedule (every Gather of a released chunk, every ReduceGrad, the
  # tied embedding once per step), beside the paper's closed form 36*B*h^2/U per layer (3
  # collectives per unit pass). TP: 8 b s h (t-1)/t x 4 B per layer per micro-batch (10 with
  # sequence parallelism), plus the embedding, the head and the vocabulary-parallel
  # cross-entropy (benchmarks/zeropp_vs_3d_formula.py; tests/tp_parity_test.cc checks it).
  if [[ "$name" == 3d_* ]]; then
    formula=$(python3 benchmarks/zeropp_vs_3d_formula.py "$name" $H $D $CTX $M $G)
    measured=$tpb
  else  # exact, from the schedule's Gather and ReduceGrad actions (tools/train)
    formula=$(field predicted_zero_bytes_per_rank_step)
    measured=$counted
  fi
  paper=$(python3 benchmarks/zeropp_vs_3d_formula.py "$name" $H $D $CTX $M $G)
  echo -e "$name\t$shape\t$tps\t$l0\t$ln\t$rss\t$measured\t$formula\t$paper\t$inter\t$lo\t$STEPS\t$mfu\t$tensor" \
    >>"$TSV"
  printf "%-20s %-8s %9.0f %6s %8s %8s %8s %8s %12.0f %12.0f %12s %13.0f %11.0f %9s\n" "$name" "$shape" "$tps" \
    "$mfu" "$l0" "$ln" "$rss" "$tensor" "$measured" "$formula" "$paper" \
    "$(awk -v b="$inter" -v s="$STEPS" 'BEGIN { print b / s }')" "$lo" "${tpw:--}"
done
python3 benchmarks/zeropp_vs_3d_report.py "$TSV" "${PLOT:-benchmarks/results/zeropp-vs-3d$SUFFIX-$(date +%F).png}" \
  "$two_nodes"
[[ $MODEL_KIND == gpt && $CROSSOVER == 1 ]] || exit 0

# The crossover: bytes per step of rank 0's sharding group for ZeroPP (pp2 x zero2, U micro-batches
# per unit, b/2 sequences per rank's micro-batch) and for 3D tp2 x pp2 (the same global micro-batch
# of b sequences), sequence length s, U and b swept at width h = $H; counters are exact anywhere.
# Where two nodes can be made, every point runs on them with the inter-node link shaped to RATE, and
# the step time of both designs is measured too (mean over the timed steps). The paper: ZeroPP
# moves less when 2 s U b > 9 h (b: the global micro-batch).
echo
XSTEPS=6 XWARM=2
[[ $two_nodes == 1 ]] && where="2 nodes, link shaped to $RATE" || where="one node (no namespaces): bytes only"
echo "# crossover at h=$H, depth $D, M=$M micro-batches per step, b sequences per global micro-batch; $where;"
echo "# step times: mean of the last $((XSTEPS - XWARM)) of $XSTEPS steps"
printf "%6s %3s %3s %14s %14s %8s %10s %10s %8s %10s %s\n" s U b zeropp_B 3d_tp_B ratio zeropp_s 3d_s t_ratio 2sUb/9h agree
CROSS="$WORK/cross.tsv"
for B in 2 4; do
  for S in 32 64 128 256; do
    small=(--width $H --depth $D --heads $HEADS --context $S --microbatches $M --steps $XSTEPS --bench-warmup $XWARM
           --log-every 1000)
    tokens=$((M * B * S))
    run shaped "$T3D" "${small[@]}" --tp 2 --pp 2 --schedule 1f1b --micro-batch $B ||
      { echo "error: 3d at s=$S b=$B failed"; tail -5 "$WORK/out"; exit 1; }
    tpb=$(field tp_bytes_per_rank_step) tps3=$(field tokens_per_s)
    t3=$(awk -v n=$tokens -v t="$tps3" 'BEGIN { printf "%.4f", n / t }')
    for U in 2 4 8; do
      run shaped "$TRAIN" "${small[@]}" --pp 2 --schedule zeropp --unit-size $U --micro-batch $((B / 2)) ||
        { echo "error: zeropp at s=$S U=$U b=$B failed"; tail -5 "$WORK/out"; exit 1; }
      zb=$(field counted_bytes_per_rank_step) tpsz=$(field tokens_per_s)
      tz=$(awk -v n=$tokens -v t="$tpsz" 'BEGIN { printf "%.4f", n / t }')
      cond=$(awk -v s=$S -v u=$U -v b=$B -v h=$H 'BEGIN { printf "%.2f", 2 * s * u * b / (9 * h) }')
      agree=$(awk -v z="$zb" -v t="$tpb" -v c="$cond" 'BEGIN { print ((z < t) == (c > 1)) ? "yes" : "no" }')
      printf "%6s %3s %3s %14.0f %14.0f %8.3f %10s %10s %8.3f %10s %s\n" $S $U $B "$zb" "$tpb" \
        "$(awk -v z="$zb" -v t="$tpb" 'BEGIN{print z/t}')" "$tz" "$t3" "$(awk -v z="$tz" -v t="$t3" 'BEGIN{print z/t}')" "$cond" "$agree"
      echo -e "$S\t$U\t$zb\t$tpb\t$cond\t$agree\t$B\t$tz\t$t3" >>"$CROSS"
    done
  done
done
python3 - "$CROSS" "benchmarks/results/zeropp-vs-3d-crossover-$(date +%F).png" "$two_nodes" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
timed = sys.argv[3] == "1"
bs = sorted({int(r[6]) for r in rows})
fig, axes = plt.subplots(2 if timed else 1, len(bs), figsize=(6.5 * len(bs), 8.5 if timed else 4.5), squeeze=False)
for j, b in enumerate(bs):
    mine = [r for r in rows if int(r[6]) == b]
    for k, (col3d, colz, label, scale) in enumerate(((3, 2, "MB per step, rank 0's sharding group", 1e6),
                                                     (8, 7, "step time on the shaped link (s)", 1.0))[:2 if timed else 1]):
        ax = axes[k][j]
        for u in sorted({int(r[1]) for r in mine}):
            pts = [(int(r[0]), float(r[colz]) / scale) for r in mine if int(r[1]) == u]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"ZeroPP U={u}")
        tp = sorted({(int(r[0]), float(r[col3d]) / scale) for r in mine})
        ax.plot([p[0] for p in tp], [p[1] for p in tp], "ks--", label="3D tp2 x pp2")
        ax.set_xscale("log", base=2); ax.set_yscale("log")
        ax.set_xlabel("sequence length s"); ax.set_ylabel(label)
        ax.set_title(f"h=256, b={b}: " + ("bytes" if k == 0 else "time"))
        ax.legend(fontsize=8)
fig.tight_layout(); fig.savefig(sys.argv[2], dpi=110)
agree = sum(r[5] == "yes" for r in rows)
print(f"# plot: {sys.argv[2]}")
print(f"RESULT zeropp-vs-3d crossover_points_agreeing_with_2sUb_gt_9h={agree} points reference={len(rows)} "
      f"ratio={agree / len(rows):.3f} target=1.00 {'MET' if agree == len(rows) else 'MISSED'}")
if timed:
    faster = [r for r in rows if float(r[7]) < float(r[8])]
    less = [r for r in rows if float(r[2]) < float(r[3])]
    both = sum(1 for r in rows if (float(r[7]) < float(r[8])) == (float(r[2]) < float(r[3])))
    print(f"# shaped link: ZeroPP faster than 3D at {len(faster)} of {len(rows)} points, fewer bytes at {len(less)}")
    import os
    cores = os.cpu_count() or 1
    tag = f"_oversubscribed_{cores}cores" if cores < 4 else ""
    print(f"RESULT zeropp-vs-3d crossover_time_follows_bytes_shaped{tag}={both} points reference={len(rows)} "
          f"ratio={both / len(rows):.3f} target=1.00 {'MET' if both == len(rows) else 'MISSED'}")
PY
