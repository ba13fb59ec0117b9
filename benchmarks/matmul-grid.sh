#!/usr/bin/env bash
# ./zpp bench matmul-grid: how repeatable ./zpp calibrate's GEMM table is on this box. Runs
# benchmarks/linear_grid as calibrate does (one thread, the grid of the description's matmul.table,
# --repeats 2: the second pass in reverse order, each shape timed in turns with a reference GEMM),
# builds a table from each pass alone, both scaled by the reference (tools/grid_table.py, what
# calibrate writes) and with the rates as timed (what it wrote before), and prints the cost model's
# forward + backward time per step from each table for the three shapes calibrate fits its compute
# on (tools/calibrate.sh SHAPES: context 128 and micro-batch 4, 128 and 1, 64 and 4).
#   ./zpp bench matmul-grid [--hardware FILE] [--from GRID_FILE[.gz]] [--keep GRID_FILE]
# --from reads a kept linear_grid output instead of measuring (about 9 minutes); --keep saves it.
# RESULT: the largest difference between the two passes' times for those shapes beyond the level common
# to the three (which compute_overhead's fit takes up), scaled, with the rates as timed as reference
# (target: within 5%; tools/grid_repeatability.py says why).
set -euo pipefail
cd "$(dirname "$0")/.."
HW=scheduler/planner/hardware/cpu-local.json
FROM="" KEEP=""
ARGS="$*"
while (($#)); do
  # Each option takes a value: a missing one is refused (an empty --from would measure for 9 minutes).
  [[ "$1" != --* || -n "${2:-}" ]] || { echo "matmul-grid: $1: got no value, expected a file" >&2; exit 2; }
  case "$1" in
    --hardware) HW="$2"; shift 2 ;;
    --from) FROM="$2"; shift 2 ;;
    --keep) KEEP="$2"; shift 2 ;;
    *) echo "matmul-grid: unknown option '$1' (expected --hardware FILE, --from GRID_FILE, --keep GRID_FILE)" >&2
       exit 2 ;;
  esac
done
[[ -f "$HW" ]] || { echo "matmul-grid: --hardware: no file '$HW'" >&2; exit 2; }
[[ -z "$FROM" || -f "$FROM" ]] || { echo "matmul-grid: --from: no file '$FROM'" >&2; exit 2; }
bazel build //tools:plan //benchmarks:linear_grid >/dev/null 2>&1 || bazel build //tools:plan //benchmarks:linear_grid
echo "# command: ./zpp bench matmul-grid $ARGS  ($(date -u +%Y-%m-%d) at $(git rev-parse --short HEAD));" \
  "hardware description $HW"
GRID="$(mktemp "${TMPDIR:-/tmp}/zpp-grid.XXXXXX")"
trap 'rm -f "$GRID"' EXIT
if [[ -n "$FROM" ]]; then
  if [[ "$FROM" == *.gz ]]; then zcat "$FROM" >"$GRID"; else cat "$FROM" >"$GRID"; fi
else
  read -r tokens dims < <(python3 -c "import json, sys; t = json.load(open(sys.argv[1]))['matmul']['table']; \
print(','.join(map(str, t['tokens'])), ','.join(map(str, t['dims'])))" "$HW")
  bazel-bin/benchmarks/linear_grid --threads 1 --tokens "$tokens" --dims "$dims" --repeats 2 >"$GRID"
fi
[[ -z "$KEEP" ]] || cp "$GRID" "$KEEP"
echo "# $(grep -c '^GRID' "$GRID") GRID lines"
python3 tools/grid_repeatability.py "$GRID" "$HW" bazel-bin/tools/plan 128x4,128x1,64x4
