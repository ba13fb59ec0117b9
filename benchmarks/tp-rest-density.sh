#!/usr/bin/env bash
# ./zpp bench tp-rest-density: where the 3D baseline's tp2 x dp2 step goes beyond the planner when the
# same tokens pass in more, smaller micro-batches. The zeropp-vs-3d bench's GPT (width 256, depth 4,
# 4 heads, context 128) on this box's 4 ranks in two network namespaces (unshaped veth) as that bench
# runs them, 32 sequences a step in 8, 4 or 2 micro-batches:
#   tp2dp2_mbB: benchmarks/baseline_3d/train_3d --tp 2 --dp 2 at micro-batch B (2, 4, 8): 168, 84 and
#               42 TP collectives a rank a step (21 a micro-batch), the same FLOPs;
#   pp2dp2_mbB: tools/train --pp 2 --dp 2 (no tensor parallelism) at micro-batch 2 and 4: the control,
#               as many micro-batches and stage calls, no TP collective;
#   pair_mbB:   two independent tp=2 jobs at once on one node (the kind of job tools/calibrate_pairs.sh
#               fits intra_node_oversubscribed on), 16 sequences each at micro-batch 2 and 8 (168 and 42
#               TP collectives a rank a step). The planner prices one such job alone, where two share
#               the cores: no prediction is printed for these rows; their rest per collective is the
#               difference of the two rows beyond the planner's difference for one job alone, doubled.
# Each ran REPS times (default 3), the rows in turn. Per row, the means over the runs of the step and
# of the ranks' wall time in TP collectives (train_3d's tp_wait_s_per_step), and the rest of the step
# (step less that wait) beside the planner's step, tp_collectives_s and rest, from the same
# description. The rest's excess over the planner, against the TP collectives a step, says how much
# CPU outside its wait a collective takes on this box while its cores are oversubscribed, which the
# planner charges as Hardware::comm_cpu_messages_per_tp_collective (./zpp calibrate measures it from r158
# on, tools/calibrate_tp_cpu.sh, on a job like these rows' at context 96; this bench prices with it).
#   ./zpp bench tp-rest-density [--hardware FILE]   (default scheduler/planner/hardware/cpu-local.json)
#   CONTEXT=96 ./zpp bench tp-rest-density           the same at another context (default 128, the bench's),
#                                                    a shape no validated row runs; REPS=N runs of each (default 3)
# RESULT lines: per row, predicted over measured rest of the step (target 0.9-1.1).
set -euo pipefail
cd "$(dirname "$0")/.."
ARGS="$*"
source benchmarks/hardware_option.bash
hardware_option tp-rest-density "$@"
bazel build //tools:launcher //tools:plan //tools:train //benchmarks/baseline_3d:train_3d
probe="zpptrd$$"
ip netns add "$probe" 2>/dev/null && ip netns del "$probe" ||
  { echo "tp-rest-density: network namespaces unavailable (needs root): its rows run on two of them" >&2; exit 2; }
H=256 D=4 HEADS=4 CTX=${CONTEXT:-128} G=32 REPS=${REPS:-3}
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "tp-rest-density: REPS: got '$REPS', expected a positive integer" >&2; exit 2; }
[[ "$CTX" =~ ^[1-9][0-9]*$ ]] || { echo "tp-rest-density: CONTEXT: got '$CTX', expected a positive integer" >&2; exit 2; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-tp-rest.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "# command: CONTEXT=$CTX REPS=$REPS ./zpp bench tp-rest-density $ARGS  ($(date -u +%Y-%m-%d)); hardware description $HW; $REPS runs of each, in turn"
MODEL=(--width $H --depth $D --heads $HEADS --context $CTX --steps 10 --bench-warmup 3 --log-every 1000 --lr 3e-3)
VETH=($(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import json, planner_local; \
print(' '.join(planner_local.unshaped_link_flags(json.load(open('$HW')))))"))
# name | program | its flags | the planner's layout flags (as planner_local.py maps the bench's rows)
ROWS=()
for mb in 2 4 8; do
  ROWS+=("tp2dp2_mb$mb|benchmarks/baseline_3d/train_3d|--tp 2 --dp 2 --micro-batch $mb --microbatches $((G / 2 / mb))|--design 3d --tp 2 --dp 2 --micro-batch $mb --grad-accumulation sink")
done
for mb in 2 4; do
  ROWS+=("pp2dp2_mb$mb|tools/train|--pp 2 --dp 2 --zero 1 --schedule 1f1b --micro-batch $mb --microbatches $((G / 2 / mb))|--design 3d --pp 2 --dp 2 --dp-outer --micro-batch $mb --grad-accumulation sink")
done
for mb in 2 8; do
  ROWS+=("pair_mb$mb|benchmarks/baseline_3d/train_3d|--tp 2 --micro-batch $mb --microbatches $((G / 2 / mb))|-")
done
run_row() {  # NAME PROG FLAGS REP: the run's output in $WORK/NAME-REP*.txt
  local name=$1 prog=$2 flags=$3 r=$4
  if [[ $name == pair_* ]]; then
    # shellcheck disable=SC2086
    timeout 900 bazel-bin/tools/launcher --nproc-per-node 2 --master-port 29761 -- "bazel-bin/$prog" "${MODEL[@]}" $flags \
      >"$WORK/$name-$r-a.txt" 2>&1 &
    local a=$!
    # shellcheck disable=SC2086
    timeout 900 bazel-bin/tools/launcher --nproc-per-node 2 --master-port 29762 -- "bazel-bin/$prog" "${MODEL[@]}" $flags \
      >"$WORK/$name-$r-b.txt" 2>&1 &
    local b=$!
    wait $a && wait $b
  else
    # shellcheck disable=SC2086
    tools/two_nodes.sh --nproc-per-node 2 --timeout 900 -- "bazel-bin/$prog" "${MODEL[@]}" $flags >"$WORK/$name-$r.txt" 2>&1
  fi || { echo "tp-rest-density: the $name run failed:"; tail -5 "$WORK/$name-$r"*.txt; exit 1; }
}
for ((r = 0; r < REPS; r++)); do
  for row in "${ROWS[@]}"; do
    IFS='|' read -r name prog flags plan <<<"$row"
    run_row "$name" "$prog" "$flags" "$r"
  done
done
printf '%-11s %8s %8s %8s %8s %8s %8s %9s %11s\n' row step_s tp_s rest_s pstep_s ptp_s prest_s pred/meas collectives
RESULTS=() FIT=()
for row in "${ROWS[@]}"; do
  IFS='|' read -r name prog flags plan <<<"$row"
  # tokens_per_s counts every replica's tokens: a step is G x CTX of them (a pair job's, half that).
  tokens=$((G * CTX)); [[ $name == pair_* ]] && tokens=$((G * CTX / 2))
  read -r step_s wait_s < <(cat "$WORK/$name-"*.txt | grep -oP 'BENCH .*' | awk -v n=$tokens '{
    w = 0; if (match($0, /tp_wait_s_per_step=[0-9.]+/)) w = substr($0, RSTART + 19, RLENGTH - 19); tw += w
    match($0, /tokens_per_s=[0-9.]+/); s += n / substr($0, RSTART + 13, RLENGTH - 13); k++ }
    END { if (k) printf "%.4f %.4f\n", s / k, tw / k }')
  [[ -n "${step_s:-}" ]] || { echo "tp-rest-density: $name printed no BENCH line"; exit 1; }
  mb=${name##*_mb}
  if [[ $name == pair_* ]]; then
    rest=$(awk -v s="$step_s" -v w="$wait_s" 'BEGIN { printf "%.4f", s - w }')
    # One such job alone on the box, as the planner prices it: its rest (step less TP collectives).
    alone="$(bazel-bin/tools/plan --predict --hardware "$HW" --hidden $H --layers $D --heads $HEADS --seq $CTX --vocab 256 \
      --cpu-attention --gpus 2 --design 3d --tp 2 --global-batch $((G / 2)) --micro-batch "$mb" --grad-accumulation sink 2>&1 |
      grep '^PREDICT ')" || { echo "tp-rest-density: tools/plan printed no PREDICT line for $name"; exit 1; }
    printf '%-11s %8s %8s %8s %8s %8s %8s %9s %11s\n' "$name" "$step_s" "$wait_s" "$rest" - - - - $((21 * G / 2 / mb))
    eval "pair_rest_$mb=$rest pair_alone_$mb=$(awk -v p="$alone" 'BEGIN { match(p, / step_s=[0-9.]+/); s = substr(p, RSTART + 8, RLENGTH - 8)
      match(p, /tp_collectives_s=[0-9.]+/); printf "%.4f", s - substr(p, RSTART + 17, RLENGTH - 17) }')"
    continue
  fi
  # shellcheck disable=SC2086
  pred="$(bazel-bin/tools/plan --predict --hardware "$HW" --hidden $H --layers $D --heads $HEADS --seq $CTX --vocab 256 \
    --cpu-attention --gpus 4 --global-batch $G $plan "${VETH[@]}" 2>&1 | grep '^PREDICT ')" ||
    { echo "tp-rest-density: tools/plan printed no PREDICT line for $name"; exit 1; }
  read -r pstep ptp < <(awk -v p="$pred" 'BEGIN { match(p, / step_s=[0-9.]+/); s = substr(p, RSTART + 8, RLENGTH - 8)
    match(p, /tp_collectives_s=[0-9.]+/); printf "%.4f %.4f\n", s, substr(p, RSTART + 17, RLENGTH - 17) }')
  calls=0
  [[ $name == tp2dp2_* ]] && calls=$((21 * G / 2 / mb))
  read -r rest prest ratio < <(awk -v s="$step_s" -v w="$wait_s" -v ps="$pstep" -v pw="$ptp" \
    'BEGIN { printf "%.4f %.4f %.3f\n", s - w, ps - pw, (ps - pw) / (s - w) }')
  printf '%-11s %8s %8s %8s %8s %8s %8s %9s %11s\n' "$name" "$step_s" "$wait_s" "$rest" "$pstep" "$ptp" "$prest" "$ratio" "$calls"
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.9 && r <= 1.1) ? "MET" : "MISSED" }')
  RESULTS+=("RESULT tp-rest-density rest_$name=$prest s reference=$rest ratio=$ratio target=0.9-1.1 $verdict")
  [[ $calls == 0 ]] || FIT+=("$calls $rest $prest")
done
# The tp2 x dp2 rows' rest beyond the planner's, fitted as a line in the collectives a step: its slope
# is what a collective costs the rank outside its wait that the planner does not charge.
printf '%s\n' "${FIT[@]}" | awk -v msg="$(python3 -c "import json; print(json.load(open('$HW')).get('comm_cpu_us_per_message', 0))")" '
  { x[NR] = $1; y[NR] = $2 - $3; sx += $1; sy += $2 - $3 }
  END { mx = sx / NR; my = sy / NR; for (i = 1; i <= NR; i++) { sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ^ 2 }
    b = sxy / sxx
    printf "# tp2 x dp2: the rest beyond the planner %.1f us a TP collective (least squares over %d rows; intercept %.4f s a step)", b * 1e6, NR, my - b * mx
    if (msg > 0) printf ", %.2f of the description'\''s %s us a message", b * 1e6 / msg, msg
    printf "\n" }'
# The pairs: their rest at 168 collectives a rank a step less at 42, beyond the planner's difference
# for one job alone doubled (two jobs share the cores, each rank computing at half speed), over the
# 126 more collectives.
awk -v a="$pair_rest_2" -v b="$pair_rest_8" -v pa="$pair_alone_2" -v pb="$pair_alone_8" 'BEGIN {
  printf "# pairs: the rest grows %.4f s a step from 42 to 168 TP collectives a rank, the planner'\''s for one job alone %.4f", a - b, pa - pb
  printf " (doubled %.4f): %.1f us a collective beyond it\n", 2 * (pa - pb), (a - b - 2 * (pa - pb)) / 126 * 1e6 }'
printf '%s\n' "${RESULTS[@]}"
