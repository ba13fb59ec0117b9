#!/bin/bash
# train_3d --tp-wait-log: every TP wait of the timed steps, per rank, in issue order. The two TP peers
# log the same number of waits, a whole number per step (the same collectives every step); each
# wait ends after it begins and before the next begins, and so does the process CPU clock logged at
# its ends, which never runs faster than the process's threads allow; each is marked with the phase
# that issued it, as many forward and backward ones as the model's layers issue; the logged waits
# add up to the tp_wait_s_per_step the job reports (its mean over the ranks); tools/tp_wait_skew.py
# splits them, transfer + skew = wait, on every rank, and reports the CPU inside and between them,
# and, at tp2 x pp2, the waits by their phase and the other stage's. Beside each
# rank's log, PREFIX.rank<N>.ops holds its operations on its other groups over the timed steps: none
# at tp=2 alone; at tp2 x pp2 (1f1b), every micro-batch's activation and gradient, each a send on one
# stage and a receive of the same size on the other, which the tool pairs into transfer spans.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
TRAIN3D="$RUNFILES/benchmarks/baseline_3d/train_3d"
SKEW="$RUNFILES/tools/tp_wait_skew.py"
DIR="${TEST_TMPDIR:-$(mktemp -d)}"
out="$("$LAUNCHER" --nproc-per-node 2 -- "$TRAIN3D" --tp 2 --width 64 --depth 2 --heads 2 --context 32 --micro-batch 2 \
  --microbatches 2 --steps 4 --bench-warmup 1 --log-every 1000 --tp-wait-log "$DIR/log" 2>&1)" ||
  { echo "FAIL: train_3d --tp-wait-log: $out"; exit 1; }
# Without timed steps there is nothing to log: one line naming the field, a nonzero exit, no file.
bad="$("$LAUNCHER" --nproc-per-node 2 -- "$TRAIN3D" --tp 2 --width 64 --depth 2 --heads 2 --context 32 --steps 2 \
  --tp-wait-log "$DIR/bad" 2>&1)" && { echo "FAIL: --tp-wait-log without --bench-warmup ran: $bad"; exit 1; }
grep -q "tp-wait-log: got --bench-warmup 0 with --steps 2, expected 0 < bench-warmup < steps" <<<"$bad" &&
  ! grep -q "Traceback\|terminate called" <<<"$bad" && ! ls "$DIR"/bad* >/dev/null 2>&1 ||
  { echo "FAIL: --tp-wait-log without --bench-warmup: $bad"; exit 1; }
reported="$(grep -oP '(?<=tp_wait_s_per_step=)[0-9.]+' <<<"$out")"
skew="$(python3 "$SKEW" "$DIR/log" --world 2 --tp 2 --steps 3 2>&1)" || { echo "FAIL: tp_wait_skew: $skew"; exit 1; }
python3 - "$DIR/log" "$reported" "$skew" <<'PY'
import os
import sys
prefix, reported, skew = sys.argv[1], float(sys.argv[2]), sys.argv[3]
logs = [[tuple(map(int, l.split())) for l in open(f"{prefix}.rank{r}")] for r in (0, 1)]
n = len(logs[0])
assert n > 0 and n == len(logs[1]) and n % 3 == 0, (n, len(logs[1]))
# Each wait's phase: a forward issues, a micro-batch, the embedding's all-reduce, 2 a layer and the
# loss's 3 (the maxima's all-gather, the sums'); a backward 2 a layer and the head's input gradient.
# Depth 2, 2 micro-batches: 2 x (1 + 4 + 3) = 16 forward waits a step, 2 x (4 + 1) = 10 backward.
for rows in logs:
    assert all(len(row) == 5 and row[4] in (0, 1) for row in rows), rows[0]
    phases = [sum(1 for row in rows if row[4] == p) for p in (0, 1)]
    assert phases == [16 * 3, 10 * 3], phases
    for (b, e, cb, ce, _), (b2, _, cb2, _, _) in zip(rows, rows[1:] + [(float("inf"), 0, float("inf"), 0, 0)]):
        assert b <= e <= b2 and cb <= ce <= cb2, (b, e, b2, cb, ce, cb2)
    # The process's CPU over the logged span: at most its threads' (a few: main, the transport's,
    # PyTorch's) times the wall, and not zero (the rank computes between the waits).
    wall, cpu = rows[-1][1] - rows[0][0], rows[-1][3] - rows[0][2]
    assert 0 < cpu <= 8 * wall, (cpu, wall)
logged = sum(row[1] - row[0] for rows in logs for row in rows) / 1e9 / 3 / 2  # per step, mean over the 2 ranks
assert abs(logged - reported) <= 1e-4 + 1e-3 * reported, (logged, reported)
for line in skew.splitlines()[1:3]:
    r, calls, wait, transfer, sk = line.split()
    assert int(calls) == n // 3 and abs(float(wait) - float(transfer) - float(sk)) <= 2e-4, line
assert "process CPU" in skew, skew
assert all(os.path.getsize(f"{prefix}.rank{r}.ops") == 0 for r in (0, 1))  # no other group of 2 or more
print(f"PASS: {n // 3} TP waits a step on each rank, {logged:.4f} s a step logged, {reported:.4f} reported")
PY
[[ $? == 0 ]] || exit 1

# tp2 x pp2: ranks 0-1 are stage 0, 2-3 stage 1; micro-batch 2 x context 32 x width 64 fp32 = 16384 bytes
# an activation (and its gradient), 2 micro-batches a step, 3 timed steps.
out="$("$LAUNCHER" --nproc-per-node 4 -- "$TRAIN3D" --tp 2 --pp 2 --schedule 1f1b --width 64 --depth 2 --heads 2 \
  --context 32 --micro-batch 2 --microbatches 2 --steps 4 --bench-warmup 1 --log-every 1000 --tp-wait-log "$DIR/pp" 2>&1)" ||
  { echo "FAIL: train_3d --tp 2 --pp 2 --tp-wait-log: $out"; exit 1; }
skew="$(python3 "$SKEW" "$DIR/pp" --world 4 --tp 2 --steps 3 2>&1)" || { echo "FAIL: tp_wait_skew (pp): $skew"; exit 1; }
python3 - "$DIR/pp" "$skew" <<'PY'
import sys
prefix, skew = sys.argv[1], sys.argv[2]
first_wait = min(int(open(f"{prefix}.rank{r}").readline().split()[0]) for r in range(4))
for r in range(4):
    ops = [l.split() for l in open(f"{prefix}.rank{r}.ops")]
    peer = r + 2 if r < 2 else r - 2  # the same TP index on the other stage
    data = [o for o in ops if o[1] in ("send", "recv") and int(o[2]) == 16384]
    sent = [o for o in data if o[1] == "send"]
    assert len(sent) == 6 and len(data) == 12 and all(int(o[3]) == peer for o in data), (r, ops)
    for group, kind, nbytes, p, b, e in ops:
        assert group.startswith("pp.") and int(b) <= int(e) and int(b) >= first_wait - 10**9, (r, group, b, e)
# The three bins hold every TP wait of the 4 ranks (per step), the ones beside a transfer among them.
lines = skew.splitlines()
at = next(i for i, l in enumerate(lines) if l.startswith("TP waits by the share"))
bins = {l.split()[0]: float(l.split()[1]) for l in lines[at + 2:at + 5]}
waits = sum(1 for r in range(4) for l in open(f"{prefix}.rank{r}") if int(l.split()[1]) > int(l.split()[0])) / 3
# (each printed to 0.1 a step: the sum may be off by 0.05 a bin)
assert list(bins) == ["none", "0-0.5", "0.5-1"] and abs(sum(bins.values()) - waits) <= 0.05 * 3 + 1e-9, (bins, waits)
assert bins["0-0.5"] + bins["0.5-1"] > 0, bins
# The gap bins hold them all too, each rank's first of a step in 'first': 4 a step.
at = next(i for i, l in enumerate(lines) if "gap before each" in l)
gaps = {l.split()[0]: float(l.split()[1]) for l in lines[at + 2:at + 7]}
assert gaps["first"] == 4.0 and abs(sum(gaps.values()) - waits) <= 0.05 * 5 + 1e-9, (gaps, waits)
# One layer a stage. Stage 0 (ranks 0-1): a micro-batch's forward, the embedding's all-reduce and the
# layer's 2; its backward the layer's 2. Stage 1: forward the layer's 2 and the loss's 3; backward the
# layer's 2 and the head's. 2 micro-batches a step, 3 steps. The phase bins hold every wait.
for r in range(4):
    phases = [sum(1 for l in open(f"{prefix}.rank{r}") if l.split()[4] == p) for p in "01"]
    assert phases == ([6 * 3, 4 * 3] if r < 2 else [10 * 3, 6 * 3]), (r, phases)
at = next(i for i, l in enumerate(lines) if l.startswith("TP waits by phase"))
by_phase = {l.split()[0]: float(l.split()[1]) for l in lines[at + 2:at + 8]}
assert list(by_phase) == ["F|F", "F|B", "F|m", "B|F", "B|B", "B|m"], by_phase
assert abs(sum(by_phase.values()) - waits) <= 0.05 * 6 + 1e-9 and by_phase["F|m"] == by_phase["B|m"] == 0, by_phase
print("PASS: tp2 x pp2: each rank's 2 activations and 2 gradients a step, paired with the other stage's")
PY
