#!/usr/bin/env bash
# ./zpp bench pipeline: each schedule on 4 local CPU ranks (pp=4, as the issue asks: 2 ranks share
# a core, so idle time is partly filled by the neighbour; its RESULT lines say "oversubscribed") and
# on 2 ranks (pp=2, a core each, so bubbles are real idle time), 40 steps each: mean step and spread,
# MFU against the matmul throughput measured here, the bubble against its formula, and the
# simulator's prediction (calibrated once on the ZB-H1 run, predicting the others); ZB-H1 vs 1F1B and
# split vs unsplit (ZB-H1, ZeroPP U=m/2 and U=m) judged on paired per-step differences (MET when
# the mean gain exceeds twice its standard error); timelines (measured and simulated) as PNG under
# benchmarks/results/pipeline/pp<N>/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${ZPP_PIPELINE_OUT:-benchmarks/results/pipeline}"
python3 -c "import matplotlib" 2>/dev/null || { echo "bench: installing matplotlib (timelines)" >&2; python3 -m pip install -q matplotlib; }
bazel build //tools:launcher //benchmarks:pipeline_bench //benchmarks:matmul_bench
# The MFU denominator, measured in this run: one thread's fp32 matmul throughput (the bench GPT's shapes
# and a large square).
mm="$(bazel-bin/benchmarks/matmul_bench --threads 1 --width 256 --tokens 256 --vocab 256 | grep MATMUL)"
echo "# $mm"
square=$(grep -oP '(?<=square_gflops=)[0-9.]+' <<<"$mm")
for n in ${ZPP_PIPELINE_NPROC:-4 2}; do
  dir="$OUT/pp$n"
  mkdir -p "$dir"
  bazel-bin/tools/launcher --nproc-per-node "$n" -- bazel-bin/benchmarks/pipeline_bench --out "$dir" \
    --steps "${ZPP_BENCH_STEPS:-40}" --matmul-gflops "$square" | sed 's/^\[rank 0\] //'
  for f in "$dir"/*.rank0.json; do
    tag="$(basename "$f" .rank0.json)"
    python3 tools/timeline.py "$dir/$tag".rank*.json -o "$dir/$tag.png" --title "$tag pp=$n measured" >/dev/null
    python3 tools/timeline.py "$dir/$tag.sim.json" -o "$dir/$tag.sim.png" --title "$tag pp=$n simulated" >/dev/null
  done
  rm -f "$dir"/*.json
done
echo "# timelines: $OUT/pp<N>/<schedule>.png (measured) and <schedule>.sim.png (simulated)"
