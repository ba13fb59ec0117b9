#!/usr/bin/env bash
# two_nodes.sh: two "nodes" on one machine, for tests and benchmarks. Creates two network
# namespaces joined by a veth pair (node 0: 10.77.R.1, node 1: 10.77.R.2, R from the process id),
# optionally shapes the link between them with tc (tbf for rate, netem for delay where the kernel
# has it), runs `launcher --nnodes 2` in each (node 0 is the master), waits for both, and removes
# the namespaces on every exit path. Traffic inside a node stays on its namespace's loopback.
#
#   tools/two_nodes.sh [--rate 1gbit] [--delay 1ms] [--nproc-per-node N] [--out DIR]
#                      [--timeout S] -- PROGRAM ARGS...
#
# Needs root (ip netns). Prints each node's output prefixed with "[node K] " (and each rank's with
# "[rank R] " from the launcher), then one line: TWO_NODES rc0=A rc1=B inter_node_bytes=N seconds=S
# (inter_node_bytes: bytes node 0 sent plus bytes node 1 sent over the veth pair). Exits non-zero if
# either node did. --out DIR keeps node0.log and node1.log there.
set -uo pipefail
LAUNCHER="${ZPP_LAUNCHER:-$(dirname "$0")/../bazel-bin/tools/launcher}"
RATE="" DELAY="" NPROC=2 OUT="" TIMEOUT=600
while (($#)); do
  case "$1" in
    --rate) RATE="$2"; shift 2 ;;
    --delay) DELAY="$2"; shift 2 ;;
    --nproc-per-node) NPROC="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "two_nodes: unknown option '$1' (expected --rate, --delay, --nproc-per-node, --out, --timeout, then -- PROGRAM)" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "two_nodes: missing -- PROGRAM ARGS" >&2; exit 2; }
command -v ip >/dev/null || { echo "two_nodes: 'ip' (iproute2) not found" >&2; exit 3; }
TAG="zpp$$"
SUB=$(( $$ % 250 + 1 ))
N0="${TAG}n0" N1="${TAG}n1" A0="10.77.$SUB.1" A1="10.77.$SUB.2"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/two_nodes.XXXXXX")"
cleanup() {
  [[ -n "${P0:-}" ]] && kill -- "$P0" 2>/dev/null
  [[ -n "${P1:-}" ]] && kill -- "$P1" 2>/dev/null
  ip netns del "$N0" 2>/dev/null
  ip netns del "$N1" 2>/dev/null
  if [[ -n "$OUT" ]]; then mkdir -p "$OUT" && cp "$WORK"/node*.log "$OUT"/ 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$N0" 2>"$WORK/err" && ip netns add "$N1" 2>>"$WORK/err" ||
  { echo "two_nodes: cannot create network namespaces: $(head -1 "$WORK/err")" >&2; exit 3; }
ip link add "${TAG}a" netns "$N0" type veth peer name "${TAG}b" netns "$N1" || exit 3
ip -n "$N0" addr add "$A0/24" dev "${TAG}a" && ip -n "$N1" addr add "$A1/24" dev "${TAG}b" || exit 3
for ns in "$N0" "$N1"; do ip -n "$ns" link set lo up; done
ip -n "$N0" link set "${TAG}a" up && ip -n "$N1" link set "${TAG}b" up || exit 3
if [[ -n "$RATE" || -n "$DELAY" ]]; then
  for pair in "$N0:${TAG}a" "$N1:${TAG}b"; do
    ns="${pair%%:*}" dev="${pair#*:}"
    if [[ -n "$DELAY" ]] && ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY" 2>/dev/null; then
      [[ -n "$RATE" ]] && ip netns exec "$ns" tc qdisc add dev "$dev" parent 1: handle 2: tbf rate "$RATE" burst 256kb latency 400ms
    elif [[ -n "$RATE" ]]; then
      [[ -n "$DELAY" ]] && echo "two_nodes: netem is not available here; shaping the rate only" >&2
      ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$RATE" burst 256kb latency 400ms ||
        { echo "two_nodes: tc tbf failed on $dev" >&2; exit 3; }
    fi
  done
fi
PORT=$(( 20000 + $$ % 20000 ))
tx() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
b0=$(tx "$N0" "${TAG}a"); b1=$(tx "$N1" "${TAG}b")
start=$(date +%s.%N)
PROGRAM=("$@")
( ip netns exec "$N0" timeout "$TIMEOUT" "$LAUNCHER" --nproc-per-node "$NPROC" --nnodes 2 --node-rank 0 \
    --master-addr "$A0" --master-port "$PORT" -- "${PROGRAM[@]}" >"$WORK/node0.log" 2>&1 ) &
P0=$!
( ip netns exec "$N1" timeout "$TIMEOUT" "$LAUNCHER" --nproc-per-node "$NPROC" --nnodes 2 --node-rank 1 \
    --master-addr "$A0" --master-port "$PORT" -- "${PROGRAM[@]}" >"$WORK/node1.log" 2>&1 ) &
P1=$!
wait "$P0"; rc0=$?; P0=""
wait "$P1"; rc1=$?; P1=""
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
bytes=$(( $(tx "$N0" "${TAG}a") - b0 + $(tx "$N1" "${TAG}b") - b1 ))
sed 's/^/[node 0] /' "$WORK/node0.log"
sed 's/^/[node 1] /' "$WORK/node1.log"
echo "TWO_NODES rc0=$rc0 rc1=$rc1 inter_node_bytes=$bytes seconds=$secs"
[[ $rc0 -eq 0 && $rc1 -eq 0 ]]
