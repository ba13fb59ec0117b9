#!/bin/bash
# train_3d --tp-wait-log: every TP wait of the timed steps, per rank, in issue order. The two TP peers
# log the same number of waits, a whole number per step (the same collectives every step); each
# wait ends after it begins and before the next begins, and so does the process CPU clock logged at
# its ends, which never runs faster than the process's threads allow; the logged waits add up to the
# tp_wait_s_per_step the job reports (its mean over the ranks); tools/tp_wait_skew.py splits them,
# transfer + skew = wait, on every rank, and reports the CPU inside and between them.
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
import sys
prefix, reported, skew = sys.argv[1], float(sys.argv[2]), sys.argv[3]
logs = [[tuple(map(int, l.split())) for l in open(f"{prefix}.rank{r}")] for r in (0, 1)]
n = len(logs[0])
assert n > 0 and n == len(logs[1]) and n % 3 == 0, (n, len(logs[1]))
for rows in logs:
    assert all(len(row) == 4 for row in rows), rows[0]
    for (b, e, cb, ce), (b2, _, cb2, _) in zip(rows, rows[1:] + [(float("inf"), 0, float("inf"), 0)]):
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
print(f"PASS: {n // 3} TP waits a step on each rank, {logged:.4f} s a step logged, {reported:.4f} reported")
PY
