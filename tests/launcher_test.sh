#!/bin/bash
# End-to-end launcher tests with real processes: a 4-rank run, a rank killed with SIGKILL
# mid-collective, bad input, a program started by hand with torchrun's variables, and ranks pinned
# to CPUs.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
PROG="$RUNFILES/tests/dist_program"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/launcher.XXXXXX")"
FAILS=0
PASSES=0
pass() { echo "PASS: $1"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $1"; FAILS=$((FAILS + 1)); }
free_port() { "$LAUNCHER" --help >/dev/null; echo $(( 20000 + RANDOM % 20000 )); }

# 1. Four ranks complete, output prefixed by rank.
out="$("$LAUNCHER" --nproc-per-node 4 -- "$PROG" 2>&1)"; rc=$?
if [[ $rc -eq 0 ]] && [[ $(grep -c '^\[rank [0-3]\] rank [0-3] ok sum=10$' <<<"$out") -eq 4 ]]; then
  pass "4-rank run"
else
  fail "4-rank run (rc=$rc): $out"
fi

# 2. SIGKILL one rank mid-collective: launcher exits non-zero within 15 s naming it, nothing left.
PIDDIR="$WORK/pids"; mkdir -p "$PIDDIR"
ZPP_PIDDIR="$PIDDIR" "$LAUNCHER" --nproc-per-node 4 -- "$PROG" --loop >"$WORK/kill.out" 2>&1 &
LPID=$!
for _ in $(seq 1 300); do [[ $(ls "$PIDDIR" | wc -l) -eq 4 ]] && break; sleep 0.1; done
if [[ $(ls "$PIDDIR" | wc -l) -ne 4 ]]; then
  fail "ranks did not start: $(cat "$WORK/kill.out")"
else
  PIDS="$(cat "$PIDDIR"/*.pid)"
  sleep 0.5
  start=$(date +%s%N)
  kill -9 "$(cat "$PIDDIR/rank2.pid")"
  wait $LPID; rc=$?
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  last="$(grep '^zpp run:' "$WORK/kill.out")"
  left=""
  for p in $PIDS; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
  if [[ $rc -ne 0 && $elapsed_ms -le 15000 && -z "$left" ]] &&
     [[ "$last" == *"rank 2 (pid "*") was killed by signal 9 (SIGKILL)"* ]] &&
     [[ $(grep -c '^zpp run:' "$WORK/kill.out") -eq 1 ]]; then
    pass "SIGKILL rank 2: rc=$rc in ${elapsed_ms} ms: $last"
  else
    fail "SIGKILL rank 2: rc=$rc elapsed=${elapsed_ms}ms left=[$left] last=[$last]"
    cat "$WORK/kill.out"
  fi
fi

# 3. Bad input: one clear line and a non-zero exit each.
check_bad() {  # name expected-substring command...
  local name="$1" expect="$2"; shift 2
  local o; o="$("$@" 2>&1)"; local rc=$?
  if [[ $rc -ne 0 && "$o" == *"$expect"* && $(wc -l <<<"$o") -eq 1 ]]; then
    pass "$name: $o"
  else
    fail "$name: rc=$rc output=[$o] expected [$expect]"
  fi
}
check_bad "nproc 0" "--nproc-per-node: got '0', expected an integer in [1, 1024]" \
  "$LAUNCHER" --nproc-per-node 0 -- "$PROG"
check_bad "nproc missing" "--nproc-per-node is required" "$LAUNCHER" -- "$PROG"
check_bad "missing program" "program 'no-such-program-zpp' not found on PATH" \
  "$LAUNCHER" --nproc-per-node 2 -- no-such-program-zpp
check_bad "missing program path" "program '/nonexistent/prog' does not exist or is not executable" \
  "$LAUNCHER" --nproc-per-node 2 -- /nonexistent/prog
check_bad "malformed RANK" "RANK='x1' (expected an integer" \
  env RANK=x1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 "$PROG"
check_bad "missing MASTER_PORT" "MASTER_PORT is not set" \
  env -u MASTER_PORT RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 "$PROG"

# Port in use: a running job holds its store port; a second job on that port is refused, both by
# the launcher and by a rank 0 started by hand.
PORT=$(free_port)
rm -f "$PIDDIR"/*
ZPP_PIDDIR="$PIDDIR" "$LAUNCHER" --nproc-per-node 2 --master-port "$PORT" -- "$PROG" --loop >"$WORK/hold.out" 2>&1 &
HPID=$!
for _ in $(seq 1 300); do [[ $(ls "$PIDDIR" | wc -l) -eq 2 ]] && break; sleep 0.1; done
check_bad "port in use (launcher)" "--master-port $PORT is in use on 127.0.0.1" \
  "$LAUNCHER" --nproc-per-node 2 --master-port "$PORT" -- "$PROG"
check_bad "port in use (rank 0)" "rank 0 could not listen (is the port in use?)" \
  env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" "$PROG"
kill -TERM $HPID; wait $HPID 2>/dev/null

# 4. Started by hand with torchrun's variables, no launcher.
PORT=$(free_port)
for r in 0 1; do
  env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    "$PROG" >"$WORK/hand$r.out" 2>&1 &
done
wait
if grep -q "rank 0 ok sum=3" "$WORK/hand0.out" && grep -q "rank 1 ok sum=3" "$WORK/hand1.out"; then
  pass "by-hand torchrun environment"
else
  fail "by-hand: $(cat "$WORK"/hand*.out)"
fi

# 5. A node whose master never answers (nothing listens on MASTER_PORT): the rank fails within its
# rendezvous timeout (ZEROPP_RENDEZVOUS_TIMEOUT=3) plus a second, with one line naming the address.
PORT=$(free_port)
start=$(date +%s.%N)
out="$(ZEROPP_RENDEZVOUS_TIMEOUT=3 timeout 60 "$LAUNCHER" --nproc-per-node 1 --nnodes 2 --node-rank 1 \
  --master-addr 127.0.0.1 --master-port "$PORT" -- "$PROG" 2>&1)"; rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
errs="$(grep 'error:' <<<"$out")"
if [[ $rc -ne 0 && $rc -ne 124 && $(grep -c 'error:' <<<"$out") -eq 1 ]] && grep -q "MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT" <<<"$errs" \
    && grep -q 'within 3 s' <<<"$errs" && awk -v s="$secs" 'BEGIN { exit !(s < 3 + 1 + 3) }' \
    && ! grep -qE 'frame #|Exception raised from' <<<"$out"; then
  pass "unreachable master: failed in $secs s (timeout 3 s) with one line: $errs"
else
  fail "unreachable master (rc=$rc, $secs s): $out"
fi

# 6. --malloc jemalloc: every rank runs with Debian's libjemalloc2 mapped in (./zpp setup installs
# it); an unknown allocator is refused with one line.
out="$("$LAUNCHER" --nproc-per-node 2 --malloc jemalloc -- /bin/bash -c 'grep -c libjemalloc /proc/self/maps' 2>&1)"; rc=$?
if [[ $rc -eq 0 && $(grep -cE '^\[rank [01]\] [1-9][0-9]*$' <<<"$out") -eq 2 ]]; then
  pass "--malloc jemalloc preloaded in both ranks"
else
  fail "--malloc jemalloc (rc=$rc): $out"
fi
out="$("$LAUNCHER" --nproc-per-node 2 --malloc tcmalloc -- /bin/true 2>&1)"; rc=$?
if [[ $rc -ne 0 && "$out" == "zpp run: --malloc: got 'tcmalloc', expected system or jemalloc" ]]; then
  pass "unknown allocator refused"
else
  fail "unknown allocator (rc=$rc): $out"
fi

# 7. --bind-cores pins local rank l to its share of the CPUs, in order: 4 ranks on 2 CPUs pair up
# (ranks 0,1 on the first, 2,3 on the second), 2 ranks get one each, 1 rank gets both; auto is the
# launcher's own CPU set. Each rank reads the kernel's Cpus_allowed_list. Bad lists are refused.
expand_list() {  # "0-2,5" -> "0 1 2 5"
  local item out=""
  for item in ${1//,/ }; do
    if [[ "$item" == *-* ]]; then out="$out $(seq -s ' ' "${item%-*}" "${item#*-}")"; else out="$out $item"; fi
  done
  echo $out
}
cpus_of() {  # launcher output -> "rank:list" per rank, sorted
  sed -nE 's/^\[rank ([0-9]+)\] Cpus_allowed_list:[[:space:]]*(.*)$/\1:\2/p' <<<"$1" | sort -n | tr '\n' ' ' | sed 's/ $//'
}
OWN="$(sed -nE 's/^Cpus_allowed_list:[[:space:]]*(.*)$/\1/p' /proc/self/status)"
read -r -a ALLOWED <<<"$(expand_list "$OWN")"
SHOW=(/bin/sh -c 'grep Cpus_allowed_list /proc/self/status')
if (( ${#ALLOWED[@]} < 2 )); then
  echo "SKIP: --bind-cores pairing needs 2 CPUs; this test may use only $OWN"
else
  A=${ALLOWED[0]} B=${ALLOWED[1]}
  BOTH="$A,$B"; (( B == A + 1 )) && BOTH="$A-$B"
  out="$("$LAUNCHER" --nproc-per-node 4 --bind-cores "$A,$B" -- "${SHOW[@]}" 2>&1)"; got="$(cpus_of "$out")"
  [[ "$got" == "0:$A 1:$A 2:$B 3:$B" ]] && pass "4 ranks on CPUs $A,$B: $got" || fail "4 ranks on $A,$B: [$got] from $out"
  # More ranks than CPUs: one note, naming the counts (it costs whole steps; see the launcher).
  [[ $(grep -c "^launcher: note: --bind-cores $A,$B: 4 ranks on 2 CPUs, so consecutive ranks share a CPU" <<<"$out") -eq 1 ]] &&
    pass "4 ranks on 2 CPUs: the sharing is noted once" || fail "4 ranks on 2 CPUs: no (or repeated) note in: $out"
  out="$(ZEROPP_BIND_CORES="$A,$B" "$LAUNCHER" --nproc-per-node 2 -- "${SHOW[@]}" 2>&1)"; got="$(cpus_of "$out")"
  [[ "$got" == "0:$A 1:$B" ]] && pass "2 ranks by ZEROPP_BIND_CORES: $got" || fail "2 ranks by variable: [$got] from $out"
  grep -q "share a CPU" <<<"$out" && fail "2 ranks on 2 CPUs noted as sharing: $out" || pass "2 ranks on 2 CPUs: no note"
  out="$("$LAUNCHER" --nproc-per-node 1 --bind-cores "$A,$B" -- "${SHOW[@]}" 2>&1)"; got="$(cpus_of "$out")"
  [[ "$got" == "0:$BOTH" ]] && pass "1 rank on both: $got" || fail "1 rank on $A,$B: [$got] from $out"
  out="$(ZEROPP_BIND_CORES="$A" "$LAUNCHER" --nproc-per-node 2 --bind-cores none -- "${SHOW[@]}" 2>&1)"; got="$(cpus_of "$out")"
  [[ "$got" == "0:$OWN 1:$OWN" ]] && pass "--bind-cores none overrides the variable: $got" || fail "none: [$got] from $out"
  out="$("$LAUNCHER" --nproc-per-node 4 --bind-cores "$A,$B" -- "$PROG" 2>&1)"; rc=$?
  if [[ $rc -eq 0 ]] && [[ $(grep -c '^\[rank [0-3]\] rank [0-3] ok sum=10$' <<<"$out") -eq 4 ]]; then
    pass "4 pinned ranks run their collectives"
  else
    fail "4 pinned ranks (rc=$rc): $out"
  fi
fi
out="$("$LAUNCHER" --nproc-per-node 1 --bind-cores auto -- "${SHOW[@]}" 2>&1)"; got="$(cpus_of "$out")"
[[ "$got" == "0:$OWN" ]] && pass "auto, 1 rank: the launcher's own CPUs $got" || fail "auto: [$got] from $out"
check_bad "bad CPU list" "--bind-cores: got '${ALLOWED[0]},x', expected none, auto, or a CPU list such as 0-3,8 ('x' is" \
  "$LAUNCHER" --nproc-per-node 2 --bind-cores "${ALLOWED[0]},x" -- /bin/true
check_bad "descending range" "('3-1' is not a CPU or an ascending range; this launcher may use $OWN)" \
  "$LAUNCHER" --nproc-per-node 2 --bind-cores 3-1 -- /bin/true
check_bad "CPU listed twice" "--bind-cores: got '${ALLOWED[0]},${ALLOWED[0]}': CPU ${ALLOWED[0]} is listed twice" \
  "$LAUNCHER" --nproc-per-node 2 --bind-cores "${ALLOWED[0]},${ALLOWED[0]}" -- /bin/true
NOT=$(( ${ALLOWED[-1]} + 1 ))
check_bad "CPU not allowed" "ZEROPP_BIND_CORES: got '$NOT': CPU $NOT is not one this launcher may use ($OWN)" \
  env ZEROPP_BIND_CORES="$NOT" "$LAUNCHER" --nproc-per-node 2 -- /bin/true

# The port the launcher picks for rank 0's store lies below the kernel's ephemeral range, which
# outgoing connections and port-0 listeners draw from (so none of theirs can take it first).
read -r eph_low _ </proc/sys/net/ipv4/ip_local_port_range
ports=""
for _ in 1 2 3 4 5; do ports="$ports $("$LAUNCHER" --nproc-per-node 1 -- /bin/sh -c 'echo $MASTER_PORT' 2>&1 | sed 's/^\[rank 0\] //')"; done
bad=""
for p in $ports; do [[ "$p" =~ ^[0-9]+$ ]] && ((p >= 10000 && p < eph_low)) || bad="$bad $p"; done
if [[ -z "$bad" && $((eph_low - 10000)) -ge 1000 ]]; then
  pass "picked ports$ports below the ephemeral range ($eph_low)"
elif [[ $((eph_low - 10000)) -lt 1000 ]]; then
  echo "SKIP: the ephemeral range starts at $eph_low, leaving no room below it; the launcher binds port 0"
else
  fail "picked ports$ports: not in [10000, $eph_low):$bad"
fi

echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
