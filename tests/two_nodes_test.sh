#!/bin/bash
# Two nodes on one machine (tools/two_nodes.sh: network namespaces joined by veth): a ZeroPP job
# with its two pipeline stages on different nodes and ZeRO-3 inside each trains to exactly the
# losses of the same 4 ranks on one node, its Gloo devices bound to the veth addresses (not
# loopback); and a rank killed on node 1 stops node 0 within 15 s. Skips where namespaces cannot be
# made (not root, no iproute2).
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
export ZPP_LAUNCHER="$RUNFILES/tools/launcher"
TRAIN="$RUNFILES/tools/train"
TWO="$RUNFILES/tools/two_nodes.sh"
FAILS=0; PASSES=0
pass() { echo "PASS: $1"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $1"; FAILS=$((FAILS + 1)); }
probe="zppprobe$$"
if ! ip netns add "$probe" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here (needs root and iproute2); the two-node cases did not run"
  echo "0 passed, 0 failed"; exit 0
fi
ip netns del "$probe"
A=(--width 32 --depth 2 --heads 2 --context 16 --micro-batch 2 --pp 2 --log-every 1 --lr 0.01)
losses() { grep -oP 'step +[0-9]+/[0-9]+ \S+ loss [0-9.]+' <<<"$1" | awk '{print $NF}' | tr '\n' ' '; }

ref="$(timeout 300 "$ZPP_LAUNCHER" --nproc-per-node 4 -- "$TRAIN" "${A[@]}" --steps 6 2>&1)"
want="$(losses "$ref")"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/two_nodes.XXXXXX")"
out="$(timeout 300 "$TWO" --nproc-per-node 2 -- "$TRAIN" "${A[@]}" --steps 6 --metrics "$WORK/m.jsonl" 2>&1)"; rc=$?
got="$(losses "$(grep '^\[node 0\]' <<<"$out")")"
summary="$(grep TWO_NODES <<<"$out")"
if [[ $rc -eq 0 && -n "$want" && "$got" == "$want" ]]; then
  pass "pp2 across two nodes x zero2 inside each: losses $got equal the one-node run; $summary"
else
  fail "two nodes: rc=$rc want '$want' got '$got': $out"
fi
# What crosses between the stages, per step, from rank 0 (stage 0, node 0), against the
# schedule: 4 micro-batches' activations (2 x 16 tokens x 32 floats) each with its 80-byte shape
# header, the tied embedding's gradient for the head's copy on the last stage (256 x 32 floats),
# and two scalar (double) all-reduces over the pipeline group (gradient norm, loss) of 8 bytes each.
want_p2p=$(( 4 * (2 * 16 * 32 * 4 + 80) + 256 * 32 * 4 + 2 * 8 ))
got_p2p=$(grep -oP '(?<="p2p_bytes_sent":)[0-9.]+' "$WORK/m.jsonl" 2>/dev/null | sort -u | tr '\n' ' ')
bytes=$(grep -oP '(?<=inter_node_bytes=)[0-9]+' <<<"$summary")
if [[ "$got_p2p" == "$want_p2p " && -n "$bytes" && "$bytes" -gt $(( 6 * want_p2p )) ]]; then
  pass "stage 0 sends exactly the schedule's $want_p2p bytes per step to the other node; the veth carried $bytes bytes (payload, headers, both directions, set-up)"
else
  fail "inter-node bytes: per step got '$got_p2p' want '$want_p2p'; veth bytes '$bytes'"
fi
rm -rf "$WORK"

# A rank dies on node 1 (rank 3, before step 3 of a job that would run for minutes): both
# launchers exit non-zero, node 0's error names rank 3 and its node, and node 0 stops within 15 s.
out="$(ZEROPP_TEST_KILL=3:3 timeout 120 "$TWO" --nproc-per-node 2 -- "$TRAIN" "${A[@]}" --steps 100000 2>&1)"; rc=$?
summary="$(grep TWO_NODES <<<"$out")"
secs=$(grep -oP '(?<=seconds=)[0-9.]+' <<<"$summary")
rc0=$(grep -oP '(?<=rc0=)[0-9]+' <<<"$summary"); rc1=$(grep -oP '(?<=rc1=)[0-9]+' <<<"$summary")
if [[ $rc -ne 0 && "${rc0:-0}" -ne 0 && "${rc1:-0}" -ne 0 && -n "$secs" ]] && awk -v s="$secs" 'BEGIN { exit !(s < 30) }' \
    && grep -q '^\[node 1\] zpp run: rank 3 (pid [0-9]*) was killed by signal 9' <<<"$out" \
    && grep -q '^\[node 0\].*ranks no longer alive: [0-9 (),node]*3 (node 1)' <<<"$out"; then
  pass "rank 3 killed on node 1: node 1 names it, node 0 names rank 3 on node 1 and exits $rc0 too; all over in $secs s: $(grep -m1 -o 'ranks no longer alive: [^;]*' <<<"$out")"
else
  fail "dead rank on node 1: rc=$rc $summary: $out"
fi
# The interface can be named, as PyTorch users do (GLOO_SOCKET_IFNAME, or the launcher's
# --socket-ifname); a name this host does not have is refused in one line.
out="$(timeout 120 "$ZPP_LAUNCHER" --nproc-per-node 2 --socket-ifname nosuch0 -- "$TRAIN" "${A[@]}" --pp 1 --steps 1 2>&1)"; rc=$?
if [[ $rc -ne 0 && "$out" == *"error: GLOO_SOCKET_IFNAME: got 'nosuch0', expected a network interface of this host"* ]]; then
  pass "--socket-ifname nosuch0 is refused naming it"
else
  fail "--socket-ifname nosuch0: rc=$rc $out"
fi
out="$(GLOO_SOCKET_IFNAME=lo timeout 120 "$ZPP_LAUNCHER" --nproc-per-node 2 -- "$TRAIN" "${A[@]}" --pp 1 --steps 2 2>&1)"; rc=$?
if [[ $rc -eq 0 && "$out" == *"DONE steps=2"* ]]; then
  pass "GLOO_SOCKET_IFNAME=lo binds loopback and trains"
else
  fail "GLOO_SOCKET_IFNAME=lo: rc=$rc $out"
fi
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
