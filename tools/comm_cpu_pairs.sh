#!/usr/bin/env bash
# tools/comm_cpu_pairs.sh [PAIRS]: does a byte between nodes cost the CPU more than one inside a node?
# Alternates collectives_bench --comm-cpu-only over two nodes of 2 ranks (tools/two_nodes.sh, the
# veth pair unshaped: the ring crosses between nodes on 2 of its 4 hops) and on one node of 4 ranks
# (the loopback), PAIRS times (default 12), then prints each pair and the paired difference of their
# CPU per byte with its standard error, and the rate of a hop between nodes by the formula
# tools/calibrate.sh uses for comm_cpu_inter_node_gbps (there from one pair, here from the means).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS="${1:-12}"
if ! [[ "$PAIRS" =~ ^[0-9]+$ && "$PAIRS" -ge 3 ]]; then
  echo "comm_cpu_pairs: PAIRS: got '$PAIRS', expected a whole number >= 3" >&2
  exit 2
fi
bazel build //tools:launcher //benchmarks:collectives_bench >/dev/null 2>&1
rate() { grep -oP '(?<=COMM_CPU gbps=)[0-9.]+|(?<=COMM_CPU gbps=)inf' | head -1; }
rows=""
for ((i = 1; i <= PAIRS; i++)); do
  two="$(tools/two_nodes.sh --nproc-per-node 2 --timeout 900 -- bazel-bin/benchmarks/collectives_bench --comm-cpu-only \
    --max-bytes 16777216 2>&1 | rate)"
  one="$(bazel-bin/tools/launcher --nproc-per-node 4 -- bazel-bin/benchmarks/collectives_bench --comm-cpu-only \
    --max-bytes 16777216 2>&1 | rate)"
  echo "pair $i two_nodes_gbps=$two one_node_gbps=$one"
  rows+="$two $one"$'\n'
done
python3 - <<PY
import math, statistics as st
pairs = [tuple(float(x) for x in l.split()) for l in """$rows""".splitlines() if l.strip()]
two, one = [1 / p[0] for p in pairs], [1 / p[1] for p in pairs]  # ns per byte
d = [a - b for a, b in zip(two, one)]
inter = 2 * st.mean(two) - st.mean(one)
print("CPU per byte: two nodes %.3f ns (%.3f GB/s), one node %.3f ns (%.3f GB/s); two minus one %.4f ns, standard error "
      "%.4f, positive in %d of %d pairs; a hop between nodes %.3f ns (%.3f GB/s)"
      % (st.mean(two), 1 / st.mean(two), st.mean(one), 1 / st.mean(one), st.mean(d), st.stdev(d) / math.sqrt(len(d)),
         sum(x > 0 for x in d), len(d), inter, 1 / inter if inter > 0 else float("inf")))
PY
