#!/usr/bin/env bash
# The GPU issue's measured checks, from the bundle, each ending in a RESULT/DONE line:
#   1. bf16 matrix-multiply throughput of this GPU (PyTorch, best of 10 at 8192^3): the MFU bound;
#   2. single-GPU training of the bundled GPT at ~1.3B parameters in bf16: tokens/s and MFU;
#   3. the oversized run: a GPT whose training state exceeds the GPU's memory (~5.2B parameters,
#      ~84 GB on an 80 GB H100) with the optimizer offloaded to the CPU, loss over 5 steps, the step
#      split into GPU compute, copies and CPU optimizer (skipped, saying so, where its pinned host
#      pool would pass 80% of the host's memory: a 141 GB H200 on a 128 GiB host);
#   4. the same width with half the blocks and its parameters offloaded too (ZeRO-Infinity into
#      host memory: compute shard, gradient shard, master and moments in the pinned pool), 3 steps;
#   2b. a short run of the same model with --profile-ops: its kernel time by kind against the
#      planner's charge for each kind (compare_ops.py);
#   layer dispatch: the host's issue time per layer, into the measured description (see below);
#   with a description of this GPU in the bundle (H100, H200, A100), between 1 and 2: the planner's
#   efficiencies measured here (gpu_calibrate.py: GEMM shapes and a linear layer's GEMM table,
#   flash attention, copy bandwidth), and after 2, 3 and 4: the planner's prediction of each step
#   from the datasheet description and from the measured one, against the measured step
#   (RESULT planner-gpu-*, planner-gpu-offload-*, planner-gpu-params-offload-*).
#   ./gpu_checks.sh [quick|oversized|resident]   quick: small sizes (a smoke run); oversized: checks
#   3 and 4 alone (and the host AdamW they use), predicted from the datasheet description and from
#   the newest description an earlier lease measured on the same GPU (pack.sh bundles it; no
#   calibration: that mode exists to fit the offload checks into a short lease); resident: everything but checks 3 and 4
#   (lease.sh's default). Each part prints "SECTION NAME starts at S s" first.
# Timings on a lent H100 (2026-11-26): 1 + calibration + 2 + 2b + 5 took 431 s; check 3 alone
# outlasted 200 s (allocating and pinning ~73 GB of host memory, then 5 offloaded steps). On
# 2026-11-27: resident 329 s (the layer-dispatch step included), oversized 369 s (check 3 198 s,
# check 4 154 s). On 2026-11-27b: resident about 380 s (after 30 s of CUDA tests), oversized 392 s.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh" || exit 2
quick="${1:-}" resident=""
case "$quick" in
  ""|quick|oversized) ;;
  resident) quick="" resident=1 ;;
  *) echo "error: gpu_checks.sh: mode '$quick': expected quick, oversized, resident or none"; exit 2 ;;
esac
section() { echo "SECTION $1 starts at $SECONDS s"; }
section matmul-bound
tflops="$("$PY" - <<'PY'
import torch, time
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
best = 0.0
for _ in range(10):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10): a @ b
    torch.cuda.synchronize(); best = max(best, 10 * 2 * n**3 / (time.perf_counter() - t) / 1e12)
print(f"{best:.1f}")
PY
)" || { echo "error: the bf16 matmul probe failed"; exit 1; }
echo "MATMUL bf16 8192^3 best of 10: $tflops TFLOP/s"
gpu_name="$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')"
case "$gpu_name" in
  *H100*) desc="$here/hardware/h100-80gb-ib400x8.json" ;;
  *H200*) desc="$here/hardware/h200-141gb-ib400x8.json" ;;
  *A100*) desc="$here/hardware/a100-80gb-ib200x8.json" ;;
  *) desc=""; echo "NOTE: no planner description of '$gpu_name' in the bundle (H100, H200, A100): no planner check" ;;
esac
measured="$here/hardware/measured.json"
# planner_check NAME STEP_S PLAN_ARGS...: the planner's prediction of a step measured here (one GPU),
# from the datasheet description and from the measured one, each against STEP_S as a RESULT line.
planner_check() {
  local name="$1" step="$2" d pred p tag
  shift 2
  for d in "$desc" "$measured"; do
    [[ -n "$d" && -f "$d" ]] || continue
    pred="$("$here/tools/plan" --predict --hardware "$d" --gpus 1 "$@")" || continue
    echo "$pred"
    p="$(grep -oP 'step_s=\K[0-9.]+' <<<"$pred")"
    tag="$([[ "$d" == "$measured" ]] && echo measured || echo datasheet)"
    "$PY" -c "p=$p; m=$step; print(f'RESULT $name-$tag predicted_step_s={p:.4f} s reference={m} '
                                    f'ratio={p/m:.3f} target=0.9-1.1 ' + ('MET' if 0.9 <= p/m <= 1.1 else 'MISSED'))"
  done
}
rm -f "$measured"
prior="$here/hardware/$(basename "${desc:-none}" | cut -d- -f1)-prior-measured.json"
if [[ "$quick" == oversized && -n "$desc" && -f "$prior" ]]; then
  # No calibration in this mode: the description an earlier lease measured on the same GPU stands in
  # (until 2026-12-05 only an H100's: the first H200 lease's offload check had no measured prediction).
  cp "$prior" "$measured"
  echo "NOTE: oversized mode predicts from the datasheet description and from an earlier lease's measured one"
fi
if [[ -n "$desc" && "$quick" != oversized ]]; then
  section calibration
  "$PY" "$here/gpu_calibrate.py" --base "$desc" --out "$measured" ${quick:+--quick} ||
    { echo "error: gpu_calibrate.py failed"; rm -f "$measured"; }
fi
# The machine's cores: nproc honours OMP_NUM_THREADS, which env.sh sets to 1 (one intra-op thread
# per rank), so until 2026-11-27's second lease every run here passed --threads 1 and the offloaded
# runs' host AdamW ran on one of 16 cores (benchmarks/results/gpu-2026-11-27b.txt). Training runs
# now keep one intra-op thread and let train give the host AdamW its default (the cores over the
# local ranks); the host AdamW bench gets every core.
cores="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
train() { "$here/tools/launcher" --nproc-per-node 1 -- "$here/tools/train" --device cuda --data-dir "$here/data" --log-every 1 "$@"; }
# The host's issue time per layer (layer_dispatch_us of the measured description): a step of 128
# tokens through the 1.2B model of check 2, too small to keep the GPU busy, so its forward and
# backward take the host's time; less the optimizer (GPU-bound: the planner's charge for it on the
# measured description), over the 24 layers.
if [[ -f "$measured" && -z "$quick" ]]; then
  section layer-dispatch
  out="$(train --width 2048 --depth 24 --heads 16 --context 128 --micro-batch 1 --steps 12 --bench-warmup 4 \
    --param-dtype bf16 --reduce-dtype bf16 2>&1 </dev/null)"
  grep -E 'BENCH|DONE|rror' <<<"$out"
  step="$(grep -oP 'step_s_mean=\K[0-9.]+' <<<"$out" | tail -1)"
  opt="$("$here/tools/plan" --predict --hardware "$measured" --gpus 1 --hidden 2048 --layers 24 --heads 16 --seq 128 \
    --vocab 256 --micro-batch 1 --global-batch 1 --design zero3 | grep -oP 'PREDICT_OPS .*optimizer_s=\K[0-9.]+')"
  if [[ -n "$step" && -n "$opt" ]]; then
    "$PY" - "$here" "$measured" "$step" "$opt" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import hardware_json
path, step, opt = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
hw = json.load(open(path))
us = max(0.0, (step - opt) / 24 * 1e6)
hw["layer_dispatch_us"] = round(us, 1)
hw["source"] += (" layer_dispatch_us %.0f: a 128-token step of the 1.2B GPT (24 layers) took %.4f s, less the "
                 "optimizer's predicted %.4f s, over 24 layers (gpu_checks.sh)." % (us, step, opt))
hardware_json.write(path, hw)
print("GPU_CALIBRATE layer_dispatch_us=%.0f (128-token step %.4f s, optimizer %.4f s, 24 layers)" % (us, step, opt))
PY
  fi
fi
if [[ "$quick" == quick ]]; then
  big=(--width 512 --depth 4 --heads 8 --context 256 --micro-batch 4 --steps 8 --bench-warmup 3)
  huge=(--width 1024 --depth 4 --heads 8 --context 256 --micro-batch 2 --steps 5)
  width=1024 depth=4 heads=8 context=256 pdepth=2 pbudget_mb=1024 budget_mb=1024
else
  big=(--width 2048 --depth 24 --heads 16 --context 1024 --micro-batch 8 --steps 20 --bench-warmup 5)
  # Width 4096, the fewest blocks whose training state (16 bytes per parameter: bf16 weights and
  # gradients, fp32 master and two moments) exceeds the GPU's memory; the host pool holds the
  # offloaded 12 bytes per parameter with 15% to spare. A learning rate for ~5B parameters (the
  # default 1e-3, and 1e-4 too, drive the loss up over the first steps at this size: Adam's first
  # steps move every weight by about lr, coherently across a 4096-wide layer).
  # Where the host's memory cannot hold that pool within 80% (a 141 GB H200 on a 128 GiB host:
  # 2026-12-04's check 3 was skipped), the most blocks whose pool fits 70% of it: a step whose state
  # fits the GPU, still offloaded, which checks the planner's offload model all the same.
  read -r depth budget_mb full_depth < <("$PY" - <<'PY'
import sys, torch
gpu = torch.cuda.get_device_properties(0).total_memory
host = next(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal:"))
per_block = 12 * 4096 * 4096 + 13 * 4096
depth = int(gpu // (16 * per_block)) + 1
fits = int(0.70 * host // (12 * per_block * 1.15))
run = min(depth, fits)
if run < depth:
    print("NOTE: check 3 at %d blocks, not %d: the larger one's host pool is over 80%% of this host's memory; its "
          "state fits the GPU" % (run, depth), file=sys.stderr)
print(run, int(12 * per_block * run * 1.15) >> 20, depth)
PY
)
  huge=(--width 4096 --depth "$depth" --heads 32 --context 1024 --micro-batch 2 --steps 5 --host-budget-mb "$budget_mb" --lr 1e-5)
  # Check 4: half the blocks check 3 would have on a host large enough (its shape does not move with
  # the host), 16 bytes per parameter in the pool with 15% to spare.
  width=4096 heads=32 context=1024 pdepth=$(((full_depth + 1) / 2))
  pbudget_mb=$(((16 * (12 * 4096 * 4096 + 13 * 4096) * pdepth * 115 / 100) >> 20))
fi
if [[ "$quick" != oversized ]]; then
  section train-1.2b
  out="$(train "${big[@]}" --param-dtype bf16 --reduce-dtype bf16 2>&1)"; echo "$out"
  gf="$(grep -oP 'model_gflops=\K[0-9.]+' <<<"$out" | tail -1)"
  [[ -n "$gf" ]] && "$PY" -c "g=$gf/1000; t=$tflops; print(f'RESULT gpu-train model_tflops={g:.1f} TFLOP/s reference={t} ratio={g/t:.3f} target=0.4 ' + ('MET' if g/t >= 0.4 else 'MISSED'))"
  step="$(grep -oP 'step_s_mean=\K[0-9.]+' <<<"$out" | tail -1)"
  if [[ -n "$desc" && -n "$step" && "$quick" != quick ]]; then
    # The same step as the planner sees it: one micro-batch of 8 sequences, byte vocabulary.
    planner_check planner-gpu "$step" --hidden 2048 --layers 24 --heads 16 --seq 1024 --vocab 256 --micro-batch 8 \
      --global-batch 8 --design zero3
  fi
  # 2b. Where that step's time goes, by kind of kernel (matrix products, attention, element-wise,
  # copies, optimizer), against what the planner charges each kind (tools/compare_ops.py).
  if [[ -n "$desc" ]]; then
    section op-profile
    read -r pw pd ph pc pm <<<"$([[ "$quick" == quick ]] && echo 512 4 8 256 4 || echo 2048 24 16 1024 8)"
    out="$(train --width "$pw" --depth "$pd" --heads "$ph" --context "$pc" --micro-batch "$pm" --steps 4 \
      --param-dtype bf16 --reduce-dtype bf16 --profile --profile-ops 2>&1)"
    grep -E 'OPS|PROFILE|DONE|rror' <<<"$out"
    for d in "$desc" "$measured"; do
      [[ -f "$d" ]] || continue
      "$here/tools/plan" --predict --hardware "$d" --gpus 1 --hidden "$pw" --layers "$pd" --heads "$ph" --seq "$pc" \
        --vocab 256 --micro-batch "$pm" --global-batch "$pm" --design zero3 2>&1 | grep PREDICT_OPS
    done | cat - <(grep 'OPS rank=0' <<<"$out") | "$PY" "$here/compare_ops.py"
  fi
fi
# 5. The planner across single-GPU steps of other shapes: longer sequences at the same tokens per
# step (attention's share grows), recomputation, a wider and a narrower model, a short step (2048
# tokens). Each: 12 steps, the last 8 timed; predicted from both descriptions (RESULT planner-gpu-sweep-*).
if [[ -n "$desc" && -z "$quick" ]]; then
  section sweep
  while read -r w d h s mb rc; do
    name="planner-gpu-sweep-w$w-l$d-s$s-b$mb${rc:+-rc}"
    out="$(train --width "$w" --depth "$d" --heads "$h" --context "$s" --micro-batch "$mb" --steps 12 --bench-warmup 4 \
      --param-dtype bf16 --reduce-dtype bf16 ${rc:+--recompute} 2>&1 </dev/null)"
    grep -E 'zeropp train:|recompute:|BENCH|DONE|rror' <<<"$out"
    step="$(grep -oP 'step_s_mean=\K[0-9.]+' <<<"$out" | tail -1)"
    [[ -n "$step" ]] && planner_check "$name" "$step" --hidden "$w" --layers "$d" --heads "$h" --seq "$s" --vocab 256 \
      --micro-batch "$mb" --global-batch "$mb" --design zero3 ${rc:+--recompute} </dev/null
  done <<'SHAPES'
2048 24 16 2048 4
2048 24 16 4096 2
2048 24 16 8192 1
2048 24 16 1024 8 rc
2048 24 16 1024 2
4096 8 32 2048 4
1024 16 8 1024 16
SHAPES
fi
[[ -n "$resident" ]] && exit 0
# The host's own AdamW (the kernel the offloaded runs use, all threads) beside the memory bound of
# its access pattern, at one 4096-wide block's size: on 2026-11-27 check 3's step end took 6 s for
# 5.4B parameters, where torch's fused AdamW alone would take 1.26 s on this host (gpu_calibrate.py).
section host-adamw
# Also at 2^26 parameters, the size gpu_calibrate.py times torch's fused AdamW at.
for n in $([[ "$quick" == quick ]] && echo $((1 << 22)) || echo $((1 << 26)) $((12 * 4096 * 4096))); do
  echo "host AdamW over $n parameters:"
  "$here/tools/adam_bench" "$n" 5 "$cores" | grep -E 'ZPP|rror'
done
# Checks 3 and 4 pin their host pools; one over 80% of the host's memory would fail or starve the
# host rather than measure anything (a 141 GB H200 on a 128 GiB host: check 3 wants ~122 GB), so
# such a check says so and is skipped.
host_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
host_fits() {  # host_fits CHECK POOL_MB
  (($2 * 100 <= host_mb * 80)) && return 0
  echo "NOTE: check $1 skipped: its pinned host pool of $2 MB is over 80% of this host's $host_mb MB"
  return 1
}
section oversized
out=""
host_fits 3 "$budget_mb" && out="$(train "${huge[@]}" --param-dtype bf16 --reduce-dtype bf16 --recompute \
  --offload-optimizer cpu --profile 2>&1)"
echo "$out"
step="$(grep -oP 'PROFILE .*step_s=\K[0-9.]+' <<<"$out" | tail -1)"
if [[ -n "$desc" && -n "$step" && "$quick" != quick ]]; then
  # The planner's offload model (PCIe both ways, the host's AdamW) on the same step.
  planner_check planner-gpu-offload "$step" --hidden 4096 --layers "$depth" --heads 32 --seq 1024 --vocab 256 \
    --micro-batch 2 --global-batch 2 --design zero3 --recompute --offload cpu
fi
# 4. Parameters offloaded too: every gather stages the shard over PCIe, every reduction sends the
# gradient shard back, the step updates on the host and moves nothing.
section params-offload
out=""
host_fits 4 "$pbudget_mb" && out="$(train --width "$width" --depth "$pdepth" --heads "$heads" --context "$context" \
  --micro-batch 2 --steps 3 --host-budget-mb "$pbudget_mb" --lr 1e-5 --param-dtype bf16 --reduce-dtype bf16 \
  --recompute --offload-optimizer cpu --offload-params cpu --profile 2>&1)"
echo "$out"
step="$(grep -oP 'PROFILE .*step_s=\K[0-9.]+' <<<"$out" | tail -1)"
if [[ -n "$desc" && -n "$step" && "$quick" != quick ]]; then
  planner_check planner-gpu-params-offload "$step" --hidden "$width" --layers "$pdepth" --heads "$heads" --seq "$context" \
    --vocab 256 --micro-batch 2 --global-batch 2 --design zero3 --recompute --offload-params cpu
fi
