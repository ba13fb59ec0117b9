#!/usr/bin/env bash
# tools/calibrate_tp_cpu.sh HW.json: a step of ./zpp calibrate (after tools/calibrate_pairs.sh), on its own
# so that an existing description can be re-measured. It sets comm_cpu_messages_per_tp_collective: the
# CPU a tensor-parallel collective takes its rank outside its wait while the box's cores are
# oversubscribed, from the 3D baseline's tp2 x dp2 on two nodes of 2 ranks (network namespaces,
# unshaped veth: as ./zpp bench zeropp-vs-3d runs its 3D rows) at context 96 (no validated layout runs
# it), 32 sequences a step in micro-batches of 2 and of 8 (168 and 42 TP collectives a rank a step),
# REPS runs of each in turn (tools/tp_cpu_fit.py fits it). Without network namespaces (not root) it says
# so and leaves the field as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: tools/calibrate_tp_cpu.sh HW.json}"
[[ -f "$OUT" ]] || { echo "calibrate_tp_cpu: '$OUT' does not exist (run ./zpp calibrate first)" >&2; exit 2; }
probe="zpptcf$$"
if ! { ip netns add "$probe" 2>/dev/null && ip netns del "$probe"; }; then
  echo "calibrate: comm_cpu_messages_per_tp_collective not measured: network namespaces unavailable (needs root)"
  exit 0
fi
bazel build //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d >/dev/null 2>&1 ||
  bazel build //tools:launcher //tools:plan //benchmarks/baseline_3d:train_3d
REPS=4
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zpp-tp-cpu.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
for ((r = 0; r < REPS; r++)); do
  for mb in 2 8; do
    tools/two_nodes.sh --nproc-per-node 2 --timeout 900 -- bazel-bin/benchmarks/baseline_3d/train_3d --tp 2 --dp 2 \
      --width 256 --depth 4 --heads 4 --context 96 --micro-batch $mb --microbatches $((16 / mb)) --steps 8 \
      --bench-warmup 2 --log-every 1000 --lr 3e-3 >"$WORK/run.txt" 2>&1 ||
      { echo "calibrate_tp_cpu: the tp2 x dp2 run at micro-batch $mb failed:" >&2; tail -5 "$WORK/run.txt" >&2; exit 1; }
    # tokens_per_s counts both replicas' tokens: a step is 32 x 96 of them.
    grep -oP 'BENCH .*' "$WORK/run.txt" | head -1 | awk -v mb=$mb '{
      match($0, /tokens_per_s=[0-9.]+/); s = 32 * 96 / substr($0, RSTART + 13, RLENGTH - 13)
      match($0, /tp_wait_s_per_step=[0-9.]+/); printf "%d %.5f %.5f\n", mb, s, substr($0, RSTART + 19, RLENGTH - 19) }' \
      >>"$WORK/runs.txt"
  done
done
python3 tools/tp_cpu_fit.py fit "$OUT" "$WORK/runs.txt"
