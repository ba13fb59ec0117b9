#!/usr/bin/env bash
# ./zpp bench io: sequential write and read GB/s of zeropp's I/O engine (io_uring and the thread
# pool) vs fio (io_uring, O_DIRECT, 1 MiB blocks, queue depth 32) on the same directory, same size,
# in one run. fio comes from Debian and is installed here if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${ZPP_IO_DIR:-$HOME/.cache/zeropp-io-bench}"
SIZE="${ZPP_IO_BYTES:-2147483648}"
mkdir -p "$DIR"
command -v fio >/dev/null || { echo "bench: installing fio" >&2; apt-get install -y -qq fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }; }
bazel build -q //benchmarks:io_bench 2>/dev/null || bazel build //benchmarks:io_bench
ours="$(bazel-bin/benchmarks/io_bench "$DIR" "$SIZE")"
echo "$ours"
fio_bw() {  # rw -> GB/s
  fio --name=zpp --filename="$DIR/fio.bin" --size="$SIZE" --bs=1M --iodepth=32 --rw="$1" --ioengine=io_uring \
      --direct=1 --output-format=json 2>/dev/null | python3 -c "
import json, sys
j = json.load(sys.stdin)['jobs'][0]
print('%.3f' % (j['$2']['bw_bytes'] / 1e9))"
}
fw=$(fio_bw write write); fr=$(fio_bw read read)
rm -f "$DIR/fio.bin"
echo "FIO write_gbs=$fw read_gbs=$fr"
line() {
  awk -v n="$1" -v v="$2" -v r="$3" 'BEGIN { ratio = (r > 0) ? v / r : 0
    printf "RESULT io %s=%s GB/s reference=%s ratio=%.3f target=0.90 %s\n", n, v, r, ratio, (ratio >= 0.9) ? "MET" : "MISSED" }'
}
uw=$(grep 'engine=io_uring' <<<"$ours" | grep -oP '(?<=write_gbs=)[0-9.]+'); ur=$(grep 'engine=io_uring' <<<"$ours" | grep -oP '(?<=read_gbs=)[0-9.]+')
tw=$(grep 'engine=threads' <<<"$ours" | grep -oP '(?<=write_gbs=)[0-9.]+'); tr=$(grep 'engine=threads' <<<"$ours" | grep -oP '(?<=read_gbs=)[0-9.]+')
line io_uring_write "$uw" "$fw"
line io_uring_read "$ur" "$fr"
line threads_write "$tw" "$fw"
line threads_read "$tr" "$fr"
