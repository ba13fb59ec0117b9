#!/usr/bin/env bash
# ./zpp bench pipeline: each schedule on 4 local CPU ranks (pp=4), measured against its bubble
# formula and against the simulator calibrated in the same run; timelines (measured and
# simulated) as PNG under benchmarks/results/pipeline/.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${ZPP_PIPELINE_OUT:-benchmarks/results/pipeline}"
mkdir -p "$OUT"
bazel build -q //tools:launcher //benchmarks:pipeline_bench 2>/dev/null || bazel build //tools:launcher //benchmarks:pipeline_bench
bazel-bin/tools/launcher --nproc-per-node 4 -- bazel-bin/benchmarks/pipeline_bench --out "$OUT" --steps "${ZPP_BENCH_STEPS:-3}" | sed 's/^\[rank 0\] //'
for f in "$OUT"/*.rank0.json; do
  tag="$(basename "$f" .rank0.json)"
  python3 tools/timeline.py "$OUT/$tag".rank*.json -o "$OUT/$tag.png" --title "$tag measured" >/dev/null
  python3 tools/timeline.py "$OUT/$tag.sim.json" -o "$OUT/$tag.sim.png" --title "$tag simulated" >/dev/null
done
rm -f "$OUT"/*.json
echo "# timelines: $OUT/<schedule>.png (measured) and <schedule>.sim.png (simulated)"
