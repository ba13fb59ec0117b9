#!/usr/bin/env bash
# ./zpp bench io: sequential write and read GB/s of zeropp's I/O engine (io_uring and the thread
# pool) vs fio (io_uring, O_DIRECT, 1 MiB blocks, queue depth 32) on the same directory, same size,
# in one run: three rounds, each running zeropp's engines then fio, and every competitor reports
# its best round (all rounds printed). fio comes from Debian and is installed here if missing. The
# files live in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="$(mktemp -d "${ZPP_IO_DIR:-$HOME/.cache}/zeropp-io-bench.XXXXXX")"
trap 'rm -rf "$DIR"' EXIT
SIZE="${ZPP_IO_BYTES:-2147483648}"
ROUNDS="${ZPP_IO_ROUNDS:-3}"
command -v fio >/dev/null || { echo "bench: installing fio" >&2; apt-get install -y -qq fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }; }
bazel build //benchmarks:io_bench
fio_bw() {  # rw -> GB/s
  fio --name=zpp --filename="$DIR/fio.bin" --size="$SIZE" --bs=1M --iodepth=32 --rw="$1" --ioengine=io_uring \
      --direct=1 --output-format=json 2>/dev/null | python3 -c "
import json, sys
j = json.load(sys.stdin)['jobs'][0]
print('%.3f' % (j['$2']['bw_bytes'] / 1e9))"
}
all=""
for round in $(seq "$ROUNDS"); do
  ours="$(bazel-bin/benchmarks/io_bench "$DIR" "$SIZE")"
  fw=$(fio_bw write write); fr=$(fio_bw read read)
  rm -f "$DIR/fio.bin"
  all+="$(sed "s/^ZPP /ZPP round=$round /" <<<"$ours")"$'\n'"FIO round=$round write_gbs=$fw read_gbs=$fr"$'\n'
done
printf '%s' "$all"
best() {  # prefix field -> the best value over the rounds
  grep "$1" <<<"$all" | grep -oP "(?<=$2=)[0-9.]+" | sort -g | tail -1
}
line() {
  awk -v n="$1" -v v="$2" -v r="$3" 'BEGIN { ratio = (r > 0) ? v / r : 0
    printf "RESULT io %s=%s GB/s reference=%s ratio=%.3f target=0.90 %s\n", n, v, r, ratio, (ratio >= 0.9) ? "MET" : "MISSED" }'
}
fw=$(best '^FIO' write_gbs); fr=$(best '^FIO' read_gbs)
echo "# best of $ROUNDS rounds each: fio write $fw GB/s, read $fr GB/s"
line io_uring_write "$(best 'engine=io_uring' write_gbs)" "$fw"
line io_uring_read "$(best 'engine=io_uring' read_gbs)" "$fr"
line threads_write "$(best 'engine=threads' write_gbs)" "$fw"
line threads_read "$(best 'engine=threads' read_gbs)" "$fr"
