#!/usr/bin/env bash
# One short GPU lease, from the bundle: the CUDA cases of the engine's and the kernels' tests
# first (the parity the checks rely on, ZeRO-1's bf16 and offload cases among them: about 30 s on
# 11-27b, before the accounting test and the ZeRO-1 cases were added to this block), then the
# planner's GPU checks, then the rest of the CUDA test cases, each under a time limit so that
# whatever ran comes back. Output goes to stdout and, where the lending tool sets OUT, to
# $OUT/checks.log and $OUT/tests.log (with the measured description).
#   ./lease.sh [oversized] [CHECKS_LIMIT_S]   default: those tests, gpu_checks.sh resident
#   (everything but the offload checks, 330-430 s on an H100), then the other test binaries (about
#   40 s); oversized: the host AdamW bench and the offload checks (3 and 4) alone, no tests
# Sized from the leases of 2026-11-26 and 11-27 (benchmarks/results/gpu-2026-11-2[67]*.txt): the
# offload checks need a call of their own. On 11-27 `gpu_checks.sh resident` alone (329 s, no
# tests) and then `lease.sh oversized 470` (369 s) fit one 900 s session, the second call's fresh
# start included; on 11-27b the first four test binaries (30 s) and resident (380 s), then
# `lease.sh oversized 400` on the warm machine (398 s): 844 s held of 900. The other binaries'
# 40 s then leave about 15 s: cut the oversized call's limit to make room, or skip them. On 11-28,
# with the host AdamW on every core: call 1 `run_tests.sh` (every binary, 79 s) then `lease.sh
# oversized 390` (283 s), 367 s with the start; call 2, warm, `gpu_checks.sh resident` (328 s):
# 741 s held of 900, every check and every CUDA case.
set -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-}"
limit="${2:-$([[ "$mode" == oversized ]] && echo 540 || echo 450)}"
case "$mode" in ""|oversized) ;; *) echo "error: lease.sh: mode '$mode': expected oversized or none"; exit 2 ;; esac
out="${OUT:-$(mktemp -d)}"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; free -g | head -2
  python3 -c 'import torch; print("torch", torch.__version__)'; } 2>&1 | tee "$out/checks.log"
first=(adamw_cuda_test engine_offload_test engine_parity_test engine_accounting_test nccl_backend_test)
if [[ -z "$mode" ]]; then
  start=$SECONDS
  timeout 90 "$here/run_tests.sh" '*cuda*:*Cuda*:*Nccl*' "${first[@]}" 2>&1 | tee "$out/tests.log"
  echo "run_tests.sh (${first[*]}): exit $? after $((SECONDS - start)) s" | tee -a "$out/tests.log"
fi
start=$SECONDS
timeout "$limit" "$here/gpu_checks.sh" "${mode:-resident}" 2>&1 | tee -a "$out/checks.log"
echo "gpu_checks.sh ${mode:-resident}: exit $? after $((SECONDS - start)) s (limit $limit s)" | tee -a "$out/checks.log"
cp "$here/hardware/measured.json" "$out/" 2>/dev/null
if [[ -z "$mode" ]]; then
  start=$SECONDS
  rest=()
  for t in "$here"/tests/*; do [[ " ${first[*]} " == *" $(basename "$t") "* ]] || rest+=("$(basename "$t")"); done
  timeout 90 "$here/run_tests.sh" '*cuda*:*Cuda*:*Nccl*' "${rest[@]}" 2>&1 | tee -a "$out/tests.log"
  echo "run_tests.sh (the other binaries): exit $? after $((SECONDS - start)) s" | tee -a "$out/tests.log"
fi
