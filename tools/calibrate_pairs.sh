#!/usr/bin/env bash
# tools/calibrate_pairs.sh HW.json: the last step of ./zpp calibrate (tools/calibrate.sh), on its own so
# that an existing description can be re-measured. It sets the links a blocking collective sees inside
# this box while its ranks fill or outnumber its cores:
#   - intra_node_oversubscribed: tensor-parallel all-reduces (tens to hundreds of KB), from two tp=2
#     jobs of the 3D baseline at once (benchmarks/baseline_3d, no pipeline, no replicas), each
#     reporting its ranks' wall time in TP collectives per step (tp_wait_s_per_step);
#   - intra_node_tp_filled: the same all-reduces while the ranks just fill the cores, from one tp=2
#     job per two cores (on a 2-core box one job alone); over three runs such a job waited 0.63-0.91x
#     what intra_node_oversubscribed gives and 2.1-2.8x what the idle loopback's fit gives
#     (benchmarks/results/tp-wait-alone-2026-11-27.txt);
#   - intra_node_oversubscribed_gather: a ZeRO group's all-gather of a whole unit (megabytes) waited
#     on at once, from two 2-rank ZeRO-3 jobs at once without prefetch (tools/train --prefetch 0),
#     each reporting its ranks' wall time waiting on gathers (PROFILE wait_gather times step_s);
#   - intra_node_p2p: a pipeline transfer between two ranks of the box while both compute, from one
#     pipeline job of one rank per core at 1 and at 4 chunks per rank (each chunk boundary is one
#     more transfer each way per micro-batch): the latency at which the planner predicts the step's
#     growth from 1 to 4 chunks, the bandwidth intra_node's (tools/p2p_fit.py);
#   - compute_cv and comm_cv: from the gather jobs' traces (--trace, the last step of every rank),
#     how much the same computation (a chunk's forward or backward, micro-batch to micro-batch) and
#     the same collective (kind and size, on the rank's communication track) vary between runs
#     (tools/duration_spread.py): CostModel::compute_cv, comm_cv.
# Each kind but tp-filled runs 4 ranks on this box's cores (JOBS jobs of 2 ranks) at three shapes that no layout of
# ./zpp bench zeropp-vs-3d or ./zpp bench pipeline runs, each shape four times in turn (REPS), its wait
# the mean over all runs' ranks. The planner gives, for the same job, how the predicted time depends on
# the link (A * latency + B / bandwidth, A and B read off two predictions
# with unit links: tp_collectives_s, or blocking_gather_s); latency and bandwidth are fitted by least
# squares on relative error (tools/relative_fit.py), per kind.
#
# Why pairs of training jobs, not a collectives sweep: with busy threads standing in for the partners'
# compute, the fitted per-hop latency moved from 754 to 1820 us between calibrations (planner-local
# r4-r8) while the TP waits the 3D runs measured stayed within 0.20-0.35 s per step. A waiting rank's
# partner here is a rank that computes and itself waits, which a spinning thread is not. Why two
# kinds: the TP fit (messages up to 1 MiB) put a 1.4 MiB-message TP job at 0.75 s of waits against
# 1.17 s measured, and FSDP-in-1F1B's unit gathers (1.6 MiB) 0.85-0.90x under over r4-r11
# (benchmarks/results/fsdp-in-1f1b-u1-gathers-2026-11-23.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
#
# A diagnostic, writing nothing: tools/calibrate_pairs.sh HW.json --sweep tp|tp-filled|gather
# WIDTHxCONTEXTxMB... prints, per shape, "kind width context micro_batch wait_s A B" (the measured wait
# per step and the unit-link coefficients below), e.g. benchmarks/results/tp-wait-shapes-2026-11-25.txt.
# tools/calibrate_pairs.sh HW.json --only tp-filled measures and sets intra_node_tp_filled alone.
USAGE="usage: tools/calibrate_pairs.sh HW.json [--sweep tp|tp-filled|gather WIDTHxCONTEXTxMB... | --only tp-filled]"
OUT="${1:?$USAGE}"
[[ -f "$OUT" ]] || { echo "calibrate_pairs: '$OUT' does not exist (run ./zpp calibrate first)" >&2; exit 2; }
SWEEP_KIND="" SWEEP_SHAPES=() ONLY=""
if (($# == 3)) && [[ "$2" == --only ]]; then
  [[ "$3" == tp-filled ]] || { echo "calibrate_pairs: --only: got '$3', expected tp-filled" >&2; exit 2; }
  ONLY=$3
elif (($# > 1)); then
  [[ "$2" == --sweep && ("${3:-}" == tp || "${3:-}" == tp-filled || "${3:-}" == gather) && $# -gt 3 ]] ||
    { echo "calibrate_pairs: got '${*:2}' after HW.json, expected --sweep tp|tp-filled|gather WIDTHxCONTEXTxMB..." \
           "or --only tp-filled" >&2; exit 2; }
  SWEEP_KIND=$3 SWEEP_SHAPES=("${@:4}")
  for s in "${SWEEP_SHAPES[@]}"; do
    [[ "$s" =~ ^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*$ ]] ||
      { echo "calibrate_pairs: --sweep shape: got '$s', expected WIDTHxCONTEXTxMB (positive integers, e.g. 256x96x2)" >&2; exit 2; }
  done
fi
bazel build //tools:launcher //tools:plan //tools:train //benchmarks/baseline_3d:train_3d >/dev/null 2>&1 ||
  bazel build //tools:launcher //tools:plan //tools:train //benchmarks/baseline_3d:train_3d
UNITS=$(python3 -c "import json; print(int(json.load(open('$OUT')).get('shared_compute_units', 0)))" 2>/dev/null) ||
  { echo "calibrate_pairs: '$OUT' is not a JSON hardware description" >&2; exit 2; }
((UNITS > 0)) ||
  { echo "calibrate_pairs: '$OUT': shared_compute_units is ${UNITS}, expected a CPU box's cores (> 0)" >&2; exit 2; }
JOBS=$UNITS  # 2-rank jobs: twice as many ranks as cores
# Four, not two (until 2026-11-25, r80): with two, the smallest TP shape measured 0.196-0.254 s over
# r71-r80 on the same box, and in r76 and r80, whose one miss each was 3D tp2 x dp2, the fit put that
# row's TP wait at 0.77x and 0.80x of measured. Four halves the variance of the runs' own noise for
# about a minute more.
REPS=4
M=8 DEPTH=4 HEADS=4
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-pairs.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# measure KIND WIDTH CONTEXT MICRO_BATCH: runs the JOBS jobs at once (tp-filled: one per two cores),
# REPS times in turn, prints the mean over their ranks of the measured wait per step and the two
# unit-link coefficients.
measure() {
  local kind=$1 width=$2 ctx=$3 mb=$4 j p r wait_s jobs=$JOBS
  local tag="$kind-$width-$ctx-$mb" coef
  [[ $kind == tp-filled ]] && jobs=$(((UNITS + 1) / 2))
  for ((r = 0; r < REPS; r++)); do
    local pids=()
    for ((j = 0; j < jobs; j++)); do
      if [[ $kind == tp* ]]; then
        set -- bazel-bin/benchmarks/baseline_3d/train_3d --tp 2
      else
        set -- bazel-bin/tools/train --prefetch 0 --profile --trace "$WORK/$tag-$r-$j.trace"
      fi
      timeout 900 bazel-bin/tools/launcher --nproc-per-node 2 --master-port $((29750 + j)) -- "$@" --width "$width" \
        --depth $DEPTH --heads $HEADS --context "$ctx" --microbatches $M --micro-batch "$mb" --steps 6 --bench-warmup 2 \
        --log-every 1000 --lr 3e-3 >"$WORK/$tag-$r-$j.txt" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do
      wait "$p" || { echo "calibrate_pairs: a $kind job at width $width, context $ctx, micro-batch $mb failed:" >&2;
                     tail -5 "$WORK/$tag"-*.txt >&2; exit 1; }
    done
  done
  if [[ $kind == tp* ]]; then
    wait_s="$(cat "$WORK/$tag"-*.txt | grep -oP '(?<=tp_wait_s_per_step=)[0-9.]+' |
      awk '{ s += $1 } END { if (NR) print s / NR }')" || true
  else  # PROFILE ... step_s=S ... wait_gather=P% ...: the seconds per step each rank waited on gathers
    wait_s="$(cat "$WORK/$tag"-*.txt | grep -oP 'PROFILE .*' | sed -E 's/.*step_s=([0-9.]+).*wait_gather=([0-9.]+)%.*/\1 \2/' |
      awk '{ s += $1 * $2 / 100 } END { if (NR) print s / NR }')" || true
  fi
  [[ -n "$wait_s" ]] || { echo "calibrate_pairs: the $kind jobs at width $width, context $ctx printed no wait" >&2; exit 1; }
  # The planner's time for this job on two unit links (latency 1000 us alone, 1 GB/s alone: tools/unit_links.py).
  coef=($(python3 tools/unit_links.py "$OUT" "$kind" "$width" $DEPTH $HEADS "$ctx" $M "$mb")) && ((${#coef[@]} == 2)) ||
    { echo "calibrate_pairs: the planner gave no unit-link times for the $kind jobs at width $width, context $ctx" >&2; exit 1; }
  echo "$width $ctx $mb $wait_s ${coef[0]} ${coef[1]}"
}

if [[ -n "$SWEEP_KIND" ]]; then
  for s in "${SWEEP_SHAPES[@]}"; do
    IFS=x read -r width ctx mb <<<"$s"
    echo "$SWEEP_KIND $(measure "$SWEEP_KIND" "$width" "$ctx" "$mb")"
  done
  exit 0
fi

# width, context, micro-batch. TP: 192, 384 and 1024 tokens a micro-batch at width 256 (messages of
# 192 KiB to 1 MiB); the validated layouts run 256 and 512 tokens (context 128, micro-batch 2 and 4).
# Not below 192 tokens: there this box's TP wait grows as the messages shrink (32 tokens 0.43-0.50 s
# a step, 64 tokens 0.28-0.34 s, 256 tokens 0.21-0.26 s), which no latency + bytes / bandwidth fits;
# with 64 and 128 tokens among the three shapes (until 2026-11-25) the fit put the waits at 256 and
# 512 tokens 6-47% over their measurement (benchmarks/results/tp-wait-shapes-2026-11-25.txt).
# Gathers: layers of width 192, 256 and 384 (0.9, 1.6 and 3.5 MiB a unit's shard), at 64-512 tokens
# a micro-batch; the validated ZeRO-3 runs prefetch, and no validated layout runs ZeRO-3 on 2 ranks.
# TP with the cores just filled: 192, 384 and 960 tokens; ./zpp bench tp-wait-alone checks the fit at
# context 128 x 1, 4 and 8 (128, 512 and 1024 tokens), none of them.
tp_rows="" gather_rows=""
if [[ -z "$ONLY" ]]; then
  tp_rows="$(measure tp 256 96 2; measure tp 256 192 2; measure tp 256 128 8)"
  gather_rows="$(measure gather 192 128 4; measure gather 256 64 1; measure gather 384 128 1)"
fi
filled_rows="$(measure tp-filled 256 96 2; measure tp-filled 256 192 2; measure tp-filled 256 192 5)"
python3 - "$OUT" "$tp_rows" "$gather_rows" "$WORK" "$filled_rows" "$ONLY" <<'PY'
import glob, json, re, sys
sys.path.insert(0, "tools")
import duration_spread
import hardware_json
import relative_fit
out = sys.argv[1]
only = bool(sys.argv[6])  # --only tp-filled: the other fits and their notes stay as they were
hw = json.load(open(out))
if only:  # drop the earlier tp-filled note, keep the rest
    src = re.sub(r"; intra_node_tp_filled from .*?(?=; intra_node|; compute_cv|$)", "", hw.get("source", ""))
else:
    src = hw.get("source", "").split("; intra_node_oversubscribed from")[0]
notes = []
for rows, key, what in ((sys.argv[2], "intra_node_oversubscribed", "two tp=2 jobs of the 3D baseline at once, their TP wait per step"),
                        (sys.argv[5], "intra_node_tp_filled",
                         "one tp=2 job of the 3D baseline per two cores, their TP wait per step"),
                        (sys.argv[3], "intra_node_oversubscribed_gather",
                         "two 2-rank ZeRO-3 jobs without prefetch at once, their gather wait per step")):
    if not rows.strip():
        continue
    rows = [r.split() for r in rows.strip().splitlines()]
    # wait = A * latency + B / bandwidth; A: seconds per second of latency (unit run at 1000 us), B:
    # seconds times bytes per second (unit run at 1 GB/s).
    pts = [(float(a) / 1e-3, float(b) * 1e9, float(w)) for *_, w, a, b in rows]
    alpha, inv_bw = relative_fit.fit_link(pts)
    gbps, us = round(1 / inv_bw / 1e9, 4), round(alpha * 1e6, 1)
    fit = ", ".join("width %s context %s x %s: %.4f s measured / %.4f s fitted" % (wd, c, mb, w, alpha * a + inv_bw * b)
                    for (wd, c, mb, *_), (a, b, w) in zip(rows, pts))
    hw[key] = {"bandwidth_gbps": gbps, "latency_us": us, "efficiency": 1.0}
    notes.append("%s from %s fitted (tools/calibrate_pairs.sh): %.3f GB/s bus, %.0f us per hop (%s)" % (key, what, gbps, us, fit))
if not only:
    # How much one computation's, and one collective's, time varies between its runs (compute_cv,
    # comm_cv): from the gather jobs' traces (their last step, every rank).
    try:
        spread = duration_spread.spread(sorted(glob.glob(sys.argv[4] + "/gather-*.trace.rank*.json")))
    except (OSError, ValueError, KeyError) as e:  # one line, no traceback; the description is left as it was
        sys.exit("calibrate_pairs: %s" % e)
    hw["compute_cv"], hw["comm_cv"] = round(spread["compute_cv"], 3), round(spread["comm_cv"], 3)
    notes.append("compute_cv %.3f and comm_cv %.3f from the same gather jobs' traces (tools/duration_spread.py: %d "
                 "computations, %d collectives)"
                 % (hw["compute_cv"], hw["comm_cv"], spread["computations"], spread["collectives"]))
hw["source"] = "; ".join(([src] if src else []) + notes)
hardware_json.write(out, hw)
for n in notes:
    print("calibrate: " + n)
PY
[[ -z "$ONLY" ]] || exit 0

# Pipeline transfers inside the box while its ranks compute (intra_node_p2p): one job of one rank per
# core (pp = the cores; width 192, 4 layers a rank, context 96, micro-batches of 4, 4 a rank: a shape
# no validated layout runs), at 1 chunk per rank (1F1B) and at 4 (interleaved: one layer a chunk), in
# turn REPS times, after the fits above (the prediction uses the description as they left it).
P2P_SHAPE=(192 $((4 * UNITS)) 4 96 4 $((4 * UNITS)) "$UNITS")  # width depth heads context micro-batch microbatches pp
p2p_job() {  # CHUNKS REP: one run, its mean step
  local v=$1 schedule=1f1b f="$WORK/p2p-$1-$2.txt"
  ((v > 1)) && schedule=interleaved
  timeout 900 bazel-bin/tools/launcher --nproc-per-node "$UNITS" --master-port 29770 -- bazel-bin/tools/train \
    --width "${P2P_SHAPE[0]}" --depth "${P2P_SHAPE[1]}" --heads "${P2P_SHAPE[2]}" --context "${P2P_SHAPE[3]}" \
    --micro-batch "${P2P_SHAPE[4]}" --microbatches "${P2P_SHAPE[5]}" --pp "$UNITS" --chunks "$v" --schedule $schedule \
    --steps 10 --bench-warmup 3 --log-every 1000 --lr 3e-3 >"$f" 2>&1 ||
    { echo "calibrate_pairs: the pipeline job at $v chunks per rank failed:" >&2; tail -5 "$f" >&2; exit 1; }
  grep -aoP '(?<=step_s_mean=)[0-9.]+' "$f" | head -1 || true
}
p2p_v1=() p2p_v4=()
for ((r = 0; r < REPS; r++)); do
  p2p_v1+=("$(p2p_job 1 "$r")")
  p2p_v4+=("$(p2p_job 4 "$r")")
done
mean() { printf '%s\n' "$@" | awk 'NF { s += $1; n++ } END { if (n) printf "%.4f", s / n }'; }
v1="$(mean "${p2p_v1[@]}")" v4="$(mean "${p2p_v4[@]}")"
[[ -n "$v1" && -n "$v4" ]] || { echo "calibrate_pairs: the pipeline jobs printed no step (step_s_mean)" >&2; exit 1; }
p2p="$(python3 tools/p2p_fit.py "$OUT" "$v1" "$v4" "${P2P_SHAPE[@]}")"
python3 - "$OUT" "$p2p" "${p2p_v1[*]}" "${p2p_v4[*]}" "${P2P_SHAPE[@]}" <<'PY'
import json, re, sys
sys.path.insert(0, "tools")
import hardware_json
out, fit, runs1, runs4 = sys.argv[1:5]
width, depth, heads, context, mb, m, pp = sys.argv[5:12]
f = {k: float(v) for k, v in re.findall(r"(\w+)=(-?[0-9.]+)", fit)}
hw = json.load(open(out))
intra = hw["intra_node"]
hw["intra_node_p2p"] = {"bandwidth_gbps": intra["bandwidth_gbps"], "latency_us": round(f["latency_us"], 1),
                        "efficiency": intra.get("efficiency", 1.0)}
note = ("intra_node_p2p from one %s-rank pipeline job (width %s, %s layers, context %s x %s, %s micro-batches) at 1 and "
        "4 chunks per rank, %d runs each in turn: step %s and %s s measured (growth %.4f s), the planner's growth "
        "matched at %.0f us per transfer (%.4f and %.4f s predicted; tools/p2p_fit.py), bandwidth intra_node's"
        % (pp, width, depth, context, mb, m, len(runs1.split()), "/".join(runs1.split()), "/".join(runs4.split()),
           f["measured_growth_s"], f["latency_us"], f["predicted_v1_s"], f["predicted_v4_s"]))
hw["source"] = hw.get("source", "") + "; " + note
hardware_json.write(out, hw)
print("calibrate: " + note)
PY
