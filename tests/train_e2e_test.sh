#!/bin/bash
# The training job end to end: 2 real processes through the launcher train a tiny GPT with ZeRO-3;
# the run ends with its DONE line, the loss falls, metrics are JSON lines; bad settings fail on
# every rank with one clear line.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
TRAIN="$RUNFILES/tools/train"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/train.XXXXXX")"
FAILS=0; PASSES=0
pass() { echo "PASS: $1"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $1"; FAILS=$((FAILS + 1)); }

out="$("$LAUNCHER" --nproc-per-node 2 -- "$TRAIN" --steps 30 --width 32 --depth 2 --heads 2 --context 16 \
  --micro-batch 4 --lr 0.01 --log-every 10 --metrics "$WORK/m.jsonl" --eval-every 10 --mfu 2>&1)"; rc=$?
done_line="$(grep -oP 'DONE steps=\S+ first_loss=\S+ last_loss=\S+ tokens_per_s=\S+ peak_rss_mb=\S+$' <<<"$out")"
first=$(grep -oP '(?<=first_loss=)[0-9.]+' <<<"$done_line"); last=$(grep -oP '(?<=last_loss=)[0-9.]+' <<<"$done_line")
if [[ $rc -eq 0 && -n "$done_line" ]] && awk -v f="$first" -v l="$last" 'BEGIN{exit !(l < f - 1.0)}'; then
  pass "2-rank training: $done_line"
else
  fail "2-rank training rc=$rc: $out"
fi
# --mfu: model FLOPs per token by hand for this GPT (6 x (12 h^2 L + V h) + 12 L h s = 208896), the
# run's tokens/s as DONE prints it, and MFU = model FLOP/s over the matmul throughput it measured,
# recomputed from the printed tokens/s and matmul GFLOP/s within their print rounding (0.05 each) and
# mfu's own (5e-5). model_gflops has 2 decimals, too coarse to recompute mfu from on a slow box.
mfu_line="$(grep -oP 'MFU model_flops_per_token=.*' <<<"$out")"
mf() { grep -oP "(?<=$1=)[0-9.]+" <<<"$mfu_line"; }
done_tps=$(grep -oP '(?<=tokens_per_s=)[0-9.]+' <<<"$done_line")
if [[ "$(mf model_flops_per_token)" == "208896" ]] && awk -v t="$(mf tokens_per_s)" -v d="$done_tps" \
    -v g="$(mf model_gflops)" -v b="$(mf matmul_gflops)" -v m="$(mf mfu)" 'BEGIN {
      if (b <= 0 || t <= 0) exit 1; r = t * 208896 / 1e9 / b; e = r * (0.05 / t + 0.05 / b) + 5e-5 + 1e-7
      exit !((t - d) ^ 2 <= 1 && (g - t * 208896 / 1e9) ^ 2 < 1e-4 + (1e-3 * g) ^ 2 && (m - r) ^ 2 <= e ^ 2) }'; then
  pass "MFU line: $mfu_line"
else
  fail "MFU line '$mfu_line' (DONE tokens/s $done_tps): $out"
fi
# Held-out loss every 10 steps (the last 5% of the corpus, never trained on), falling.
evals=$(grep -oP '(?<=EVAL step=)[0-9]+ loss=[0-9.]+' <<<"$out")
first_eval=$(head -1 <<<"$evals" | grep -oP '(?<=loss=)[0-9.]+'); last_eval=$(tail -1 <<<"$evals" | grep -oP '(?<=loss=)[0-9.]+')
if [[ $(wc -l <<<"$evals") -eq 3 ]] && awk -v f="$first_eval" -v l="$last_eval" 'BEGIN{exit !(l < f)}'; then
  pass "3 held-out evaluations, falling: $(tr '\n' ' ' <<<"$evals")"
else
  fail "held-out evaluations: $evals"
fi
# pp = 1 runs through the same executor: the job prints the zero3 schedule it runs.
if [[ "$out" == *"schedule zero3 v="* ]] && grep -qP '^\[rank 0\] rank 0: G0 G1 F0\.0 ' <<<"$out"; then
  pass "pp=1 prints the zero3 schedule it runs"
else
  fail "pp=1 schedule not printed: $(head -5 <<<"$out")"
fi
lines=$(grep -c '^{"step":[0-9]*,"loss":' "$WORK/m.jsonl" 2>/dev/null || echo 0)
if [[ "$lines" -eq 30 ]]; then pass "30 metrics lines"; else fail "metrics lines: $lines"; fi

out="$("$LAUNCHER" --nproc-per-node 2 -- "$TRAIN" --steps 2 --zero 3 2>&1)"; rc=$?
# Either rank may report first: the launcher stops the other as soon as one exits with an error.
if [[ $rc -ne 0 && "$out" =~ \[rank\ [01]\]\ error:\ ParallelConfig:\ pp\(1\)\*zero\(3\)\*dp\(1\)=3\ \!=\ world_size\(2\) && "$out" != *"error: [rank"* ]]; then
  pass "impossible layout refused"
else
  fail "impossible layout: rc=$rc $out"
fi
out="$("$LAUNCHER" --nproc-per-node 2 -- "$TRAIN" --steps 2 --width 30 --heads 4 2>&1)"; rc=$?
if [[ $rc -ne 0 && "$out" == *"gpt.width: got 30, expected a multiple of gpt.heads (4)"* ]]; then
  pass "bad model setting refused"
else
  fail "bad model setting: rc=$rc $out"
fi
# The ZeroPP pipeline: pp=2 stages x zero=2 on 4 processes, 2 chunks per rank, units of 2.
out="$("$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" --steps 20 --width 32 --depth 2 --heads 2 --context 16 \
  --micro-batch 2 --lr 0.01 --log-every 10 --pp 2 --schedule zeropp --chunks 2 --microbatches 4 --unit-size 2 \
  --eval-every 10 --eval-batches 8 2>&1)"; rc=$?
done_line="$(grep -oP 'DONE steps=\S+ first_loss=\S+ last_loss=\S+ tokens_per_s=\S+ peak_rss_mb=\S+$' <<<"$out")"
first=$(grep -oP '(?<=first_loss=)[0-9.]+' <<<"$done_line"); last=$(grep -oP '(?<=last_loss=)[0-9.]+' <<<"$done_line")
if [[ $rc -eq 0 && "$out" == *"schedule zeropp v=2 m=4 U=2"* ]] && awk -v f="$first" -v l="$last" 'BEGIN{exit !(l < f - 1.0)}'; then
  pass "ZeroPP pp=2 x zero=2 training: $done_line"
  if [[ $(grep -c 'EVAL step=' <<<"$out") -eq 2 ]]; then pass "ZeroPP held-out evaluations"; else fail "ZeroPP evals: $out"; fi
else
  fail "ZeroPP training rc=$rc: $out"
fi
out="$("$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" --steps 2 --width 32 --depth 2 --heads 2 --pp 2 --schedule zeropp \
  --microbatches 4 --unit-size 1 2>&1)"; rc=$?
if [[ $rc -ne 0 && "$out" == *"zeropp: unit 0 has 1 micro-batches (m(4) split by U(1)) but every unit needs at least pp(2)"* ]]; then
  pass "ZeroPP unit smaller than pp refused"
else
  fail "ZeroPP bad unit: rc=$rc $out"
fi

out="$("$LAUNCHER" --nproc-per-node 4 -- "$TRAIN" --steps 2 --width 32 --depth 2 --heads 2 --pp 2 --schedule zeropp \
  --microbatches 4 --unit-size 2 --eval-every 1 --eval-batches 6 2>&1)"; rc=$?
if [[ $rc -ne 0 && "$out" == *"eval-batches: got 6, expected a multiple of microbatches (4): evaluation runs whole steps"* ]]; then
  pass "pipeline eval batches not a whole step refused"
else
  fail "pipeline eval batches: rc=$rc $out"
fi

# --profile: every rank prints where its step time went; the shares add up to the step (100%, to
# rounding), and under ZB-H1 the backward is split into Bi and W, with no whole B.
out="$(timeout 300 "$LAUNCHER" --nproc-per-node 2 -- "$TRAIN" --width 32 --depth 2 --heads 2 --context 16 --micro-batch 2 \
  --steps 4 --pp 2 --schedule zb-h1 --profile --log-every 10 2>&1)"; rc=$?
ok=1
for r in 0 1; do
  line=$(grep -m1 "PROFILE rank=$r " <<<"$out") || { ok=0; continue; }
  sum=$(grep -oP '[0-9.]+(?=%)' <<<"$line" | awk '{ s += $1 } END { printf "%.1f", s }')
  awk -v s="$sum" 'BEGIN { exit (s >= 99.4 && s <= 100.6) ? 0 : 1 }' || ok=0
  [[ "$line" == *"backward=0.0%"* && "$line" != *"backward_input=0.0%"* && "$line" != *"backward_weight=0.0%"* ]] || ok=0
done
if [[ $rc -eq 0 && $ok -eq 1 ]]; then
  pass "--profile: both ranks' shares sum to 100% and split Bi/W under zb-h1"
else
  fail "--profile: rc=$rc $out"
fi

# The trace of that run drawn by ./zpp timeline (matplotlib), with a second schedule beside it.
if python3 -c "import matplotlib" 2>/dev/null; then
  "$LAUNCHER" --nproc-per-node 2 -- "$TRAIN" --width 32 --depth 2 --heads 2 --context 16 --micro-batch 2 --steps 2 \
    --pp 2 --schedule 1f1b --trace "$WORK/t1" --log-every 10 >/dev/null 2>&1
  "$LAUNCHER" --nproc-per-node 2 -- "$TRAIN" --width 32 --depth 2 --heads 2 --context 16 --micro-batch 2 --steps 2 \
    --pp 2 --schedule zb-h1 --trace "$WORK/t2" --log-every 10 >/dev/null 2>&1
  out="$(python3 "$RUNFILES/tools/timeline.py" "$WORK"/t1.rank*.json --title 1F1B --vs "$WORK"/t2.rank*.json \
    --vs-title ZB-H1 -o "$WORK/t.png" 2>&1)"; rc=$?
  if [[ $rc -eq 0 && "$out" == *"4 lanes"* ]] && [[ "$(head -c 8 "$WORK/t.png" | od -An -tx1 | tr -d ' ')" == 89504e470d0a1a0a ]]; then
    pass "timeline: two schedules' traces drawn side by side as a PNG ($out)"
  else
    fail "timeline: rc=$rc $out"
  fi
  # Beside the actions, the trace holds what the rank's communication threads ran (track 1000 + rank).
  if grep -q '"cat":"comm","ph":"X","pid":0,"tid":1001,' "$WORK/t1.rank1.json"; then
    pass "--trace: rank 1's communication operations on their own track (tid 1001)"
  else
    fail "--trace: no communication track (tid 1001) in $WORK/t1.rank1.json"
  fi
else
  echo "SKIP: matplotlib is not installed (./zpp test installs it); the timeline case did not run"
fi

# --help: the settings list from one process, no distributed environment needed, exit 0.
out="$(env -u WORLD_SIZE -u RANK "$TRAIN" --help 2>&1)"; rc=$?
if [[ $rc -eq 0 && "$out" == "usage: ./zpp train"* ]] && grep -q -- "^  --profile-ops \[true|false\]$" <<<"$out" &&
    grep -q -- "^  --width$" <<<"$out"; then
  pass "--help lists the settings"
else
  fail "--help (rc=$rc): $out"
fi
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
