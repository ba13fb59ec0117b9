#!/usr/bin/env bash
# ./zpp bench soak: the demo configuration (ZeroPP pp2 x zero2 on 4 ranks) for 2,000 steps with a
# checkpoint every 100 steps (--keep 2), from rank 0's per-step metrics: resident memory growth
# between step 200 and step 2,000 (target under 1%), and open file descriptors and threads at
# step 200 vs step 2,000 (target: no growth). 4 ranks on a machine with fewer cores say so on every
# RESULT line (the leak checks do not depend on it).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${ZPP_SOAK_STEPS:-2000}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zeropp-soak.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
bazel build //tools:launcher //tools:train
bazel-bin/tools/launcher --nproc-per-node 4 -- bazel-bin/tools/train --demo --steps "$STEPS" --log-every 500 \
  --eval-every 0 --save-dir "$WORK/ckpt" --save-every 100 --keep 2 --metrics "$WORK/m.jsonl" | grep -E "DONE|step +[0-9]+/" || true
python3 - "$WORK/m.jsonl" "$STEPS" "$(nproc)" <<'PY'
import json, sys
rows = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
cores = int(sys.argv[3])
tag = f"_oversubscribed_4ranks_{cores}cores" if cores < 4 else ""
last = int(sys.argv[2]); a, b = rows[200], rows[last]
growth = (b["rss_mb"] - a["rss_mb"]) / a["rss_mb"]
print(f"SOAK rank0 step200 rss_mb={a['rss_mb']:.1f} fds={a['fds']} threads={a['threads']:.0f}; "
      f"step{last} rss_mb={b['rss_mb']:.1f} fds={b['fds']} threads={b['threads']:.0f}")
print("SOAK rank0 rss_mb by step: " + " ".join(f"{s}:{rows[s]['rss_mb']:.1f}" for s in sorted(rows) if s % 200 == 0))
def line(name, v, ref, ratio, target, met, unit):
    print(f"RESULT soak {name}{tag}={v} {unit} reference={ref} ratio={ratio} target={target} {'MET' if met else 'MISSED'}")
line("rss_growth", f"{b['rss_mb'] - a['rss_mb']:.1f}", f"{a['rss_mb']:.1f}", f"{growth:.4f}", "0.01", growth < 0.01, "MB")
line("fds", b["fds"], a["fds"], f"{b['fds'] / a['fds']:.3f}", "1.000", b["fds"] <= a["fds"], "count")
line("threads", f"{b['threads']:.0f}", f"{a['threads']:.0f}", f"{b['threads'] / a['threads']:.3f}", "1.000", b["threads"] <= a["threads"], "count")
PY
