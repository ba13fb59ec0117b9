#!/usr/bin/env bash
# ./zpp bench pipeline: each schedule on 4 local CPU ranks (pp=4, as the issue asks: 2 ranks share
# a core, so idle time is partly filled by the neighbour) and on 2 ranks (pp=2, a core each, so
# bubbles are real idle time), measured against its bubble formula and against the simulator
# calibrated in the same run; timelines (measured and simulated) as PNG under
# benchmarks/results/pipeline/pp<N>/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${ZPP_PIPELINE_OUT:-benchmarks/results/pipeline}"
bazel build -q //tools:launcher //benchmarks:pipeline_bench 2>/dev/null || bazel build //tools:launcher //benchmarks:pipeline_bench
for n in ${ZPP_PIPELINE_NPROC:-4 2}; do
  dir="$OUT/pp$n"
  mkdir -p "$dir"
  bazel-bin/tools/launcher --nproc-per-node "$n" -- bazel-bin/benchmarks/pipeline_bench --out "$dir" \
    --steps "${ZPP_BENCH_STEPS:-8}" | sed 's/^\[rank 0\] //'
  for f in "$dir"/*.rank0.json; do
    tag="$(basename "$f" .rank0.json)"
    python3 tools/timeline.py "$dir/$tag".rank*.json -o "$dir/$tag.png" --title "$tag pp=$n measured" >/dev/null
    python3 tools/timeline.py "$dir/$tag.sim.json" -o "$dir/$tag.sim.png" --title "$tag pp=$n simulated" >/dev/null
  done
  rm -f "$dir"/*.json
done
echo "# timelines: $OUT/pp<N>/<schedule>.png (measured) and <schedule>.sim.png (simulated)"
