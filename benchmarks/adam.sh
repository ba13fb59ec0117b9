#!/usr/bin/env bash
# ./zpp bench adam: zeropp's CPU AdamW (the product's path: the CPU's best vector code, all threads)
# vs torch.optim.AdamW (foreach, fused) vs DeepSpeedCPUAdam, and the memory bound of AdamW's own
# access pattern (4 reads, 3 writes per parameter), all measured in this run on 2^26 parameters,
# each the best of the same number of steps at the same thread count; and the gradient norm's pass
# over bf16 values against a read-only pass over the same bytes. Peers are installed into a
# private venv (which reuses the pinned torch wheel `./zpp setup` installed), never into the product.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${ZEROPP_BENCH_VENV:-$HOME/.cache/zeropp-bench-venv}"
N="${ZPP_ADAM_N:-67108864}"
REPS="${ZPP_ADAM_REPS:-10}"
THREADS="$(nproc)"
if ! "$VENV/bin/python" -c "import torch, deepspeed" >/dev/null 2>&1; then
  echo "bench: installing deepspeed and ninja into $VENV (peers only)" >&2
  [[ -x "$VENV/bin/python" ]] || python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q deepspeed ninja
fi
bazel build //benchmarks:adam_bench
ours="$(bazel-bin/benchmarks/adam_bench "$N" "$REPS" "$THREADS")"
echo "$ours"
peers="$(PATH="$VENV/bin:$PATH" "$VENV/bin/python" benchmarks/adam_peers.py "$N" "$REPS" "$THREADS" 2>/dev/null | grep '^PEER')"
echo "$peers"
best=$(grep -oP '(?<=zeropp_mparams_per_s=)[0-9.]+' <<<"$ours")
pattern=$(grep -oP '(?<=pattern_mparams_per_s=)[0-9.]+' <<<"$ours")
peer() { grep -oP "(?<=name=$1 mparams_per_s=)[0-9.]+" <<<"$peers" || echo 0; }
ds=$(peer deepspeed_cpu_adam); tf=$(peer torch_adamw_fused); te=$(peer torch_adamw_foreach)
line() {  # name value unit reference target
  awk -v n="$1" -v v="$2" -v u="$3" -v r="$4" -v t="$5" 'BEGIN {
    ratio = (r > 0) ? v / r : 0
    printf "RESULT adam %s=%s %s reference=%s ratio=%.3f target=%s %s\n", n, v, u, r, ratio, t, (r > 0 && ratio >= t) ? "MET" : "MISSED" }'
}
line zeropp_adamw_vs_own_pattern_stream "$best" Mparam/s "$pattern" 0.80
line zeropp_vs_deepspeed_cpu_adam "$best" Mparam/s "$ds" 1.20
line zeropp_vs_torch_adamw_fused "$best" Mparam/s "$tf" 1.00
line zeropp_vs_torch_adamw_foreach "$best" Mparam/s "$te" 1.00
# The gradient norm's pass over a bf16 shard (the offloaded step's first pass) against a read-only
# pass over the same bytes, measured alternately in adam_bench.
norm=$(grep -oP '(?<=norm_zeropp_gvalues_per_s=)[0-9.]+' <<<"$ours")
readpat=$(grep -oP '(?<=norm_read_pattern_gvalues_per_s=)[0-9.]+' <<<"$ours")
line zeropp_bf16_norm_vs_read_pattern "$norm" Gvalue/s "$readpat" 0.80
