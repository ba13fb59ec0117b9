#!/usr/bin/env bash
# ./zpp bench tp-wait-coupled: the 3D baseline's TP waits where its tp=2 pairs are coupled, at a shape
# no validated layout runs (GPT width 256, 4 heads, context 96, micro-batches of 4, 8 a step), at
# depth 4 and 8, on this box's 4 ranks in two network namespaces as ./zpp bench zeropp-vs-3d runs them:
#   pair: two independent tp=2 jobs at once on one node (what tools/calibrate_pairs.sh fits
#         intra_node_oversubscribed on);
#   dp:   tp2 x dp2 (the pairs coupled by the step-end reduction of replicated gradients);
#   pp:   tp2 x pp2, 1F1B (the pairs coupled by the pipeline: every micro-batch enters each stage
#         twice, forward and backward, through a receive on each of the pair's ranks).
# Each ran REPS times in turn (the kinds interleaved). Per row: the ranks' wall time in TP collectives
# per step (train_3d's tp_wait_s_per_step) beside the planner's tp_collectives_s for the same layout,
# and the step (not for pair: the planner prices one job alone, where two share the cores). The
# planner prices a TP collective alike in the three; the doubling of the depth doubles the
# collectives at a fixed number of stage entries, which tells a wait per collective from one per
# entry (the pp rows' excess over the planner, at depth 4 and 8).
#   ./zpp bench tp-wait-coupled [--hardware FILE]   (default scheduler/planner/hardware/cpu-local.json)
# RESULT lines: per layout and depth, predicted over measured wait (target 0.9-1.1).
set -euo pipefail
cd "$(dirname "$0")/.."
ARGS="$*"
source benchmarks/hardware_option.bash
hardware_option tp-wait-coupled "$@"
bazel build //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d
probe="zpptwc$$"
ip netns add "$probe" 2>/dev/null && ip netns del "$probe" ||
  { echo "tp-wait-coupled: network namespaces unavailable (needs root): the dp and pp rows run on two of them" >&2; exit 2; }
T3D=bazel-bin/benchmarks/baseline_3d/train_3d
W=256 HEADS=4 CTX=96 MB=4 M=8 REPS=${REPS:-3}
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-tp-coupled.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "# command: ./zpp bench tp-wait-coupled $ARGS  ($(date -u +%Y-%m-%d)); hardware description $HW; $REPS runs of each, in turn"
# The unshaped veth link between the namespaces, as planner_local.py gives the zeropp-vs-3d rows.
VETH=($(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import json, planner_local; \
print(' '.join(planner_local.unshaped_link_flags(json.load(open('$HW')))))"))
run_one() {  # KIND DEPTH REP: the run's output in $WORK/KIND-DEPTH-REP*.txt
  local kind=$1 d=$2 r=$3 f="$WORK/$1-$2-$3"
  local model=(--width $W --depth "$d" --heads $HEADS --context $CTX --micro-batch $MB --microbatches $M --steps 8
               --bench-warmup 2 --log-every 1000 --lr 3e-3)
  case $kind in
    pair)
      timeout 900 bazel-bin/tools/launcher --nproc-per-node 2 --master-port 29751 -- $T3D --tp 2 "${model[@]}" >"$f-a.txt" 2>&1 &
      local a=$!
      timeout 900 bazel-bin/tools/launcher --nproc-per-node 2 --master-port 29752 -- $T3D --tp 2 "${model[@]}" >"$f-b.txt" 2>&1 &
      local b=$!
      wait $a && wait $b ;;
    dp) tools/two_nodes.sh --nproc-per-node 2 --timeout 900 -- $T3D --tp 2 --dp 2 "${model[@]}" >"$f.txt" 2>&1 ;;
    pp) tools/two_nodes.sh --nproc-per-node 2 --timeout 900 -- $T3D --tp 2 --pp 2 --schedule 1f1b "${model[@]}" >"$f.txt" 2>&1 ;;
  esac || { echo "tp-wait-coupled: the $kind run at depth $d failed:"; tail -5 "$f"*.txt; exit 1; }
}
for ((r = 0; r < REPS; r++)); do
  for d in 4 8; do
    for kind in pair dp pp; do run_one $kind $d $r; done
  done
done
printf '%-5s %5s %10s %10s %9s %10s %10s %9s\n' kind depth tp_meas_s tp_pred_s pred/meas step_meas step_pred pred/meas
RESULTS=()
for d in 4 8; do
  for kind in pair dp pp; do
    # The mean over the runs (pair: over both jobs of every run) of the wait and of the step.
    replicas=1; [[ $kind == dp ]] && replicas=2  # train_3d's tokens_per_s counts every replica's tokens
    read -r wait_s step_s < <(cat "$WORK/$kind-$d-"*.txt | grep -oP 'BENCH .*' | awk -v n=$((replicas * MB * M * CTX)) '{
      match($0, /tp_wait_s_per_step=[0-9.]+/); w += substr($0, RSTART + 19, RLENGTH - 19)
      match($0, /tokens_per_s=[0-9.]+/); s += n / substr($0, RSTART + 13, RLENGTH - 13); k++ }
      END { if (k) printf "%.4f %.4f\n", w / k, s / k }')
    [[ -n "${wait_s:-}" ]] || { echo "tp-wait-coupled: $kind at depth $d printed no BENCH line"; exit 1; }
    case $kind in
      pair) flags=(--gpus 2 --design 3d --tp 2 --global-batch $((MB * M))) ;;
      dp) flags=(--gpus 4 --design 3d --tp 2 --dp 2 --global-batch $((2 * MB * M)) "${VETH[@]}") ;;
      pp) flags=(--gpus 4 --design 3d --tp 2 --pp 2 --global-batch $((MB * M)) "${VETH[@]}") ;;
    esac
    hw="$HW"
    if [[ $kind == pair ]]; then  # two jobs of 2 ranks at once: the planner sees one; give it the link they share
      hw="$WORK/pair.json"
      python3 -c "import json; h = json.load(open('$HW')); h['intra_node_tp_filled'] = h['intra_node_oversubscribed']; \
json.dump(h, open('$hw', 'w'))"
    fi
    pred="$(bazel-bin/tools/plan --predict --hardware "$hw" --hidden $W --layers "$d" --heads $HEADS --seq $CTX \
      --vocab 256 --cpu-attention --micro-batch $MB --grad-accumulation sink "${flags[@]}" 2>&1 | grep '^PREDICT ')" ||
      { echo "tp-wait-coupled: tools/plan printed no PREDICT line for $kind at depth $d"; exit 1; }
    read -r ptp pstep < <(awk -v p="$pred" 'BEGIN { match(p, /tp_collectives_s=[0-9.]+/); tp = substr(p, RSTART + 17, RLENGTH - 17)
      match(p, /step_s=[0-9.]+/); printf "%.4f %.4f\n", tp, substr(p, RSTART + 7, RLENGTH - 7) }')
    ratio=$(awk -v a="$ptp" -v b="$wait_s" 'BEGIN { printf "%.3f", a / b }')
    sratio=$(awk -v a="$pstep" -v b="$step_s" 'BEGIN { printf "%.3f", a / b }')
    # The planner prices one pair job alone on the box's cores, where two shared them: no step for it.
    [[ $kind == pair ]] && pstep=- sratio=-
    printf '%-5s %5s %10s %10s %9s %10s %10s %9s\n' $kind "$d" "$wait_s" "$ptp" "$ratio" "$step_s" "$pstep" "$sratio"
    verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9 && r <= 1.1) ? "MET" : "MISSED" }')
    RESULTS+=("RESULT tp-wait-coupled tp_wait_${kind}_depth$d=$ptp s reference=$wait_s ratio=$ratio target=0.9-1.1 $verdict")
    eval "meas_${kind}_$d=$wait_s pred_${kind}_$d=$ptp smeas_${kind}_$d=$step_s spred_${kind}_$d=$pstep"
  done
done
# The pp rows' wait beyond the planner's, per stage entry (2 x 8 micro-batches a step) at each depth:
# alike at both depths if the excess comes with the entries, twice at depth 8 if with the collectives.
awk -v m4="$meas_pp_4" -v p4="$pred_pp_4" -v m8="$meas_pp_8" -v p8="$pred_pp_8" -v e=$((2 * M)) \
    -v sm4="$smeas_pp_4" -v sp4="$spred_pp_4" -v sm8="$smeas_pp_8" -v sp8="$spred_pp_8" 'BEGIN {
  printf "# pp excess over the planner: depth 4 %.4f s a step (%.2f ms an entry), depth 8 %.4f s (%.2f ms an entry); ratio 8/4 %.2f\n",
    m4 - p4, (m4 - p4) / e * 1e3, m8 - p8, (m8 - p8) / e * 1e3, (m4 - p4) != 0 ? (m8 - p8) / (m4 - p4) : 0
  printf "# pp step over the planner: depth 4 %.4f s (%.2f ms an entry), depth 8 %.4f s (%.2f ms an entry)\n",
    sm4 - sp4, (sm4 - sp4) / e * 1e3, sm8 - sp8, (sm8 - sp8) / e * 1e3 }'
printf '%s\n' "${RESULTS[@]}"
