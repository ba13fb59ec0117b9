#!/usr/bin/env bash
# tools/calibrate_tp_pairs.sh HW.json: the last step of ./zpp calibrate (tools/calibrate.sh), on its own
# so that an existing description can be re-measured. It sets HW.json's intra_node_oversubscribed: the
# intra-node link as a blocking collective sees it while the box's ranks outnumber its cores.
#
# How: two tensor-parallel training jobs of the 3D baseline at once (benchmarks/baseline_3d, tp=2,
# no pipeline, no replicas: 4 ranks on this box's cores), at three shapes that no layout of
# ./zpp bench zeropp-vs-3d or ./zpp bench pipeline runs. Each job reports its ranks' wall time in TP
# collectives per step; the planner gives, for the same job, how that time depends on the link
# (tp_collectives_s = A * latency + B / bandwidth, A and B read off two predictions with unit
# links); latency and bandwidth are fitted, least squares on relative error, to the three shapes.
#
# Why not a collectives sweep: with busy threads standing in for the partners' compute, the fitted
# per-hop latency moved from 754 to 1820 us between calibrations (planner-local r4-r8), while the
# TP waits the 3D runs measured stayed within 0.20-0.35 s per step. A waiting rank's partner here is
# a rank that computes and itself waits, which a spinning thread is not.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: tools/calibrate_tp_pairs.sh HW.json}"
[[ -f "$OUT" ]] || { echo "calibrate_tp_pairs: '$OUT' does not exist (run ./zpp calibrate first)" >&2; exit 2; }
bazel build //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d >/dev/null 2>&1 ||
  bazel build //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d
UNITS=$(python3 -c "import json; print(int(json.load(open('$OUT')).get('shared_compute_units', 0)))" 2>/dev/null) ||
  { echo "calibrate_tp_pairs: '$OUT' is not a JSON hardware description" >&2; exit 2; }
((UNITS > 0)) ||
  { echo "calibrate_tp_pairs: '$OUT': shared_compute_units is ${UNITS}, expected a CPU box's cores (> 0)" >&2; exit 2; }
JOBS=$UNITS  # 2-rank jobs: twice as many ranks as cores
M=8 DEPTH=4 WIDTH=256 HEADS=4
# context, micro-batch: 64, 128 and 1024 tokens a micro-batch (TP messages of 64 KiB to 1 MiB); the
# validated layouts run 256 and 512 (context 128, micro-batch 2 and 4).
SHAPES=("64 1" "128 1" "128 8")
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-tp-pairs.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
rows=""  # per shape: context micro_batch mean_tp_wait_s A B
for k in "${!SHAPES[@]}"; do
  read -r ctx mb <<<"${SHAPES[$k]}"
  pids=()
  for ((j = 0; j < JOBS; j++)); do
    timeout 900 bazel-bin/tools/launcher --nproc-per-node 2 --master-port $((29750 + j)) -- \
      bazel-bin/benchmarks/baseline_3d/train_3d --tp 2 --width $WIDTH --depth $DEPTH --heads $HEADS --context "$ctx" \
      --microbatches $M --micro-batch "$mb" --steps 6 --bench-warmup 2 --log-every 1000 --lr 3e-3 \
      >"$WORK/job$k-$j.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { echo "calibrate_tp_pairs: a tp=2 job at context $ctx, micro-batch $mb failed:" >&2;
                   tail -5 "$WORK"/job$k-*.txt >&2; exit 1; }
  done
  wait_s="$(cat "$WORK"/job$k-*.txt | grep -oP '(?<=tp_wait_s_per_step=)[0-9.]+' | awk '{ s += $1 } END { if (NR) print s / NR }')" ||
    true
  [[ -n "$wait_s" ]] || { echo "calibrate_tp_pairs: the tp=2 jobs at context $ctx printed no tp_wait_s_per_step" >&2; exit 1; }
  # The planner's TP time for this job on two unit links: latency 1000 us alone, 1 GB/s alone.
  coef=()
  for link in '{"bandwidth_gbps": 1e6, "latency_us": 1000, "efficiency": 1}' \
              '{"bandwidth_gbps": 1, "latency_us": 0, "efficiency": 1}'; do
    python3 -c "import json,sys; h=json.load(open('$OUT')); l=json.loads(sys.argv[1]); h['intra_node']=l; \
h['intra_node_oversubscribed']=l; json.dump(h, open('$WORK/unit.json','w'))" "$link"
    coef+=("$(bazel-bin/tools/plan --predict --hardware "$WORK/unit.json" --hidden $WIDTH --layers $DEPTH --heads $HEADS \
      --vocab 256 --seq "$ctx" --no-flash --global-batch $((M * mb)) --gpus 2 --design 3d --tp 2 --micro-batch "$mb" |
      grep -oP '(?<=tp_collectives_s=)[0-9.]+')")
  done
  rows+="$ctx $mb $wait_s ${coef[0]} ${coef[1]}"$'\n'
done
python3 - "$OUT" "$rows" <<'PY'
import json, sys
sys.path.insert(0, "tools")
import relative_fit
out, rows = sys.argv[1], [r.split() for r in sys.argv[2].strip().splitlines()]
# wait = A * latency + B / bandwidth; A: seconds per second of latency (unit run at 1000 us), B:
# seconds times bytes per second (unit run at 1 GB/s).
pts = [(float(a) / 1e-3, float(b) * 1e9, float(w)) for _, _, w, a, b in rows]
alpha, inv_bw = relative_fit.fit_link(pts)
gbps, us = round(1 / inv_bw / 1e9, 4), round(alpha * 1e6, 1)
fit = ", ".join("context %s x %s: %.4f s measured / %.4f s fitted" % (c, mb, w, alpha * a + inv_bw * b)
                for (c, mb, *_), (a, b, w) in zip(rows, pts))
hw = json.load(open(out))
hw["intra_node_oversubscribed"] = {"bandwidth_gbps": gbps, "latency_us": us, "efficiency": 1.0}
note = ("intra_node_oversubscribed from two tp=2 jobs of the 3D baseline at once (tools/calibrate_tp_pairs.sh), "
        "their TP wait per step fitted: %.3f GB/s bus, %.0f us per hop (%s)" % (gbps, us, fit))
src = hw.get("source", "")
hw["source"] = (src.split("; intra_node_oversubscribed from")[0] + "; " + note) if src else note
with open(out, "w") as f:
    json.dump(hw, f, indent=2)
    f.write("\n")
print("calibrate: " + note)
PY
