#!/usr/bin/env bash
# tools/calibrate_veth.sh HW.json: the unshaped link between tools/two_nodes.sh's network namespaces
# (veth_unshaped, read by ./zpp bench planner-local for its unshaped rows), measured the way training
# uses it. Run by ./zpp calibrate after tools/calibrate_pairs.sh; on its own it re-measures an
# existing description.
#
# JOBS jobs at once (as many as the box has cores, 2 ranks each, so that ranks outnumber cores as in
# the validated runs), each a 2-rank ZeRO-3 job with one rank in each namespace
# (tools/two_nodes.sh --nproc-per-node 1, prefetch on), at three layer widths with micro-batches of
# 32 tokens, so that gathers and reductions dominate and their mix of latency and bytes differs by
# width (a unit's all-gather moves width^2 bytes for the same number of hops). The ranks' mean step
# time is compared with the planner's for the same job (plan --predict with --devices-per-node 1, the
# box's cores shared among the JOBS jobs), and the link's per-hop latency and bus bandwidth are the
# pair that minimises the squared relative error over the three shapes (tools/link_search.py).
#
# Why not the busy-thread sweep ./zpp calibrate also runs: fitted to collectives beside threads that
# never block, the link came out 2.2-2.5 ms per hop and 0.39-0.69 GB/s across calibrations, and put
# ZeRO-3 over four ranks 1.21-1.34x over its measured step (planner-local r10, r12, r13), while on
# prefetched pair jobs like these the same fit was 0.78x when comm-bound
# (benchmarks/results/fsdp-in-1f1b-u1-gathers-2026-11-23.txt, sections 5 and 6). No validated layout
# runs ZeRO-3 on 2 ranks, one rank per node, or at 32 tokens a micro-batch.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: tools/calibrate_veth.sh HW.json}"
[[ -f "$OUT" ]] || { echo "calibrate_veth: '$OUT' does not exist (run ./zpp calibrate first)" >&2; exit 2; }
bazel build //tools:launcher //tools:plan //tools:train >/dev/null 2>&1 || bazel build //tools:launcher //tools:plan //tools:train
UNITS=$(python3 -c "import json; print(int(json.load(open('$OUT')).get('shared_compute_units', 0)))" 2>/dev/null) ||
  { echo "calibrate_veth: '$OUT' is not a JSON hardware description" >&2; exit 2; }
((UNITS > 0)) ||
  { echo "calibrate_veth: '$OUT': shared_compute_units is ${UNITS}, expected a CPU box's cores (> 0)" >&2; exit 2; }
JOBS=$UNITS M=8 DEPTH=4 HEADS=4 CTX=32
WIDTHS=(128 256 384)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-veth.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# measure WIDTH: runs the JOBS jobs at once and prints the mean step time over their ranks.
measure() {
  local width=$1 j p pids=()
  for ((j = 0; j < JOBS; j++)); do
    timeout 900 tools/two_nodes.sh --nproc-per-node 1 --timeout 600 -- bazel-bin/tools/train --profile \
      --width "$width" --depth $DEPTH --heads $HEADS --context $CTX --microbatches $M --micro-batch 1 --steps 6 \
      --bench-warmup 2 --log-every 1000 --lr 3e-3 >"$WORK/w$width-$j.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { echo "calibrate_veth: a job at width $width failed:" >&2; tail -5 "$WORK/w$width"-*.txt >&2; exit 1; }
  done
  cat "$WORK/w$width"-*.txt | grep -oP '(?<=PROFILE ).*' | grep -oP '(?<=step_s=)[0-9.]+' |
    awk '{ s += $1 } END { if (NR) printf "%.4f\n", s / NR }'
}

rows=""
for w in "${WIDTHS[@]}"; do
  s="$(measure "$w")"
  [[ -n "$s" ]] || { echo "calibrate_veth: the jobs at width $w printed no PROFILE step time" >&2; exit 1; }
  rows+="$w $s"$'\n'
done
# One job's share of the box: its cores divided among the jobs running beside it.
python3 -c "import json; h=json.load(open('$OUT')); h['shared_compute_units']=max(1, $UNITS // $JOBS); \
json.dump(h, open('$WORK/one_job.json','w'))"
python3 - "$OUT" "$WORK/one_job.json" "$rows" $DEPTH $HEADS $CTX $M $JOBS <<'PY'
import json, os, re, subprocess, sys
sys.path.insert(0, "tools")
import link_search
out, job_hw, rows, depth, heads, ctx, m, jobs = sys.argv[1:]
shapes = [(int(w), float(s)) for w, s in (r.split() for r in rows.strip().splitlines())]


def predict(latency_us, gbps):
    res = []
    for width, _ in shapes:
        cmd = ["bazel-bin/tools/plan", "--predict", "--hardware", job_hw, "--hidden", str(width), "--layers", depth,
               "--heads", heads, "--vocab", "256", "--seq", ctx, "--no-flash", "--gpus", "2", "--devices-per-node", "1",
               "--global-batch", str(2 * int(m)), "--design", "zero3", "--zero", "2", "--micro-batch", "1",
               "--inter-gbps", "%.6g" % gbps, "--inter-latency-us", "%.6g" % latency_us]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("calibrate_veth: plan failed: " + p.stderr.strip())
        res.append(float(re.search(r"step_s=(\S+)", p.stdout).group(1)))
    return res


latency_us, gbps, err = link_search.search([s for _, s in shapes], predict)
fitted = predict(latency_us, gbps)
hw = json.load(open(out))
# The sweep's fit, kept beside this one (a second run of this script leaves it as the sweep wrote it).
swept = hw.setdefault("veth_unshaped_swept", hw.get("veth_unshaped"))
if swept is None:
    del hw["veth_unshaped_swept"]
hw["veth_unshaped"] = {"bandwidth_gbps": round(gbps, 4), "latency_us": round(latency_us, 1)}
fit = ", ".join("width %d: %.4f s measured / %.4f s fitted" % (w, s, f) for (w, s), f in zip(shapes, fitted))
note = ("veth_unshaped from %s 2-rank ZeRO-3 jobs at once, one rank per namespace, their step times fitted "
        "(tools/calibrate_veth.sh, context %s x 1, depth %s): %.3f GB/s bus, %.0f us per hop (%s)"
        % (jobs, ctx, depth, gbps, latency_us, fit))
if swept:
    note += ("; the busy-thread sweep's fit (veth_unshaped_swept), not used: %.3f GB/s, %.0f us"
             % (swept["bandwidth_gbps"], swept["latency_us"]))
src = hw.get("source", "").split("; veth_unshaped from")[0]
hw["source"] = "; ".join(([src] if src else []) + [note])
with open(out + ".tmp", "w") as f:
    json.dump(hw, f, indent=2)
    f.write("\n")
os.replace(out + ".tmp", out)
print("calibrate: " + note)
PY
