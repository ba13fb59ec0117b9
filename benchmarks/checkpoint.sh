#!/usr/bin/env bash
# ./zpp bench checkpoint: save and load bandwidth of a GPT's training state (width 768, depth 8:
# fp32 master + AdamW moments, 12 bytes a parameter) on 2 local ranks against fio on the same
# directory in the same run (2 jobs writing buffered files and fsyncing at the end, as the saves
# do; then reading them back), and the stall of an asynchronous save against the step time.
# The peer is PyTorch's distributed checkpoint (benchmarks/dcp_peer.py): the same state, the same
# ranks and directory, dcp.save (fsync on) and dcp.load. fio comes from Debian and Python torch's
# runtime libraries from PyPI, both installed here if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${ZPP_CKPT_DIR:-$HOME/.cache/zeropp-ckpt-bench}"
mkdir -p "$DIR"
trap 'rm -rf "$DIR/ckpt" "$DIR/dcp"; rm -f "$DIR"/zpp.*' EXIT
command -v fio >/dev/null || { echo "bench: installing fio" >&2; apt-get install -y -qq fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }; }
python3 -c "import torch.distributed.checkpoint" 2>/dev/null || {
  echo "bench: installing torch's runtime libraries for the DCP peer" >&2
  python3 -m pip install -q --no-deps nvidia-cufile nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 >/dev/null; }
bazel build //tools:launcher //benchmarks:checkpoint_bench
ours="$(bazel-bin/tools/launcher --nproc-per-node 2 -- bazel-bin/benchmarks/checkpoint_bench "$DIR/ckpt" 3 | grep -oP 'BENCH checkpoint.*')"
echo "$ours"
bytes=$(grep -oP '(?<=state_bytes=)[0-9]+' <<<"$ours")
per_job=$(( bytes / 2 ))
fio_bw() {  # rw -> GB/s over both jobs; a write run makes new files, as a save does
  [[ "$1" == write ]] && rm -f "$DIR"/zpp.*
  fio --name=zpp --directory="$DIR" --size="$per_job" --numjobs=2 --bs=1M --rw="$1" --ioengine=psync --direct=0 \
      --end_fsync=1 --group_reporting --output-format=json 2>/dev/null | python3 -c "
import json, sys
j = json.load(sys.stdin)['jobs'][0]
print('%.3f' % (j['$2']['bw_bytes'] / 1e9))"
}
# The bound is the best of three fio runs of each kind (it varies run to run on this disk); zeropp
# and the DCP peer get the same best-of-three.
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }
fw=0; fr=0
for _ in 1 2 3; do fw=$(max "$fw" "$(fio_bw write write)"); fr=$(max "$fr" "$(fio_bw read read)"); done
rm -f "$DIR"/zpp.*; rm -rf "$DIR/ckpt" "$DIR/dcp"
echo "FIO write_gbs=$fw read_gbs=$fr (2 jobs x $per_job bytes, buffered, fsync at end; best of 3)"
peer="$(OMP_NUM_THREADS=1 python3 benchmarks/dcp_peer.py "$DIR/dcp" 2 768 8 256 128)"
echo "$peer"
sw=$(grep -oP '(?<=save_gbs=)[0-9.]+' <<<"$ours"); lr=$(grep -oP '(?<=load_gbs=)[0-9.]+' <<<"$ours")
share=$(grep -oP '(?<=async_stall_share=)[0-9.]+' <<<"$ours"); stall=$(grep -oP '(?<=async_stall_ms=)[0-9.]+' <<<"$ours")
step=$(grep -oP '(?<=step_s=)[0-9.]+' <<<"$ours")
awk -v v="$sw" -v r="$fw" 'BEGIN { x = v / r; printf "RESULT checkpoint save_write_gbs=%s GB/s reference=%s ratio=%.3f target=0.80 %s\n", v, r, x, (x >= 0.8) ? "MET" : "MISSED" }'
awk -v v="$lr" -v r="$fr" 'BEGIN { x = v / r; printf "RESULT checkpoint load_read_gbs=%s GB/s reference=%s ratio=%.3f target=0.80 %s\n", v, r, x, (x >= 0.8) ? "MET" : "MISSED" }'
pw=$(grep -oP '(?<=save_gbs=)[0-9.]+' <<<"$peer"); pl=$(grep -oP '(?<=load_gbs=)[0-9.]+' <<<"$peer")
awk -v v="$sw" -v r="$pw" 'BEGIN { x = v / r; printf "RESULT checkpoint save_vs_dcp_gbs=%s GB/s reference=%s ratio=%.3f target=1.00 %s\n", v, r, x, (x > 1) ? "MET" : "MISSED" }'
awk -v v="$lr" -v r="$pl" 'BEGIN { x = v / r; printf "RESULT checkpoint load_vs_dcp_gbs=%s GB/s reference=%s ratio=%.3f target=1.00 %s\n", v, r, x, (x > 1) ? "MET" : "MISSED" }'
awk -v v="$stall" -v s="$step" -v x="$share" 'BEGIN { printf "RESULT checkpoint async_stall_ms=%s ms reference=%.1f ratio=%s target=0.05 %s\n", v, s * 1000, x, (x <= 0.05) ? "MET" : "MISSED" }'
