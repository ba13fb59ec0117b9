#!/usr/bin/env bash
# ./zpp bench one-runtime [BASE]: throughput of this checkout against BASE (default: the commit
# before the one-executor work), both built side by side (BASE in a git worktree under
# $TMPDIR) and run back to back on the same machine, alternating, three times each: ZeRO-3 (pp=1,
# the zero3-vs-fsdp2 model on 2 ranks) and every pipeline schedule (pp=2, the pipeline bench's
# model), 2 ranks (a core each), each run timing 10 steps after 2 warm-up steps. Ratio = this
# checkout's mean tokens/s over BASE's (means of the three runs, spreads printed); target >= 0.95.
# The worktree is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${1:-1f0c5c9}"
OLD="${TMPDIR:-/tmp}/zeropp-base-$BASE"
[[ -d "$OLD" ]] || git worktree add -f "$OLD" "$BASE" -q
trap 'git worktree remove --force "$OLD" 2>/dev/null || rm -rf "$OLD"' EXIT
(cd "$OLD" && { bazel build //tools:launcher //tools:train; })
bazel build //tools:launcher //tools:train
STEPS=(--steps "${ZPP_BENCH_STEPS:-12}" --bench-warmup 2 --log-every 1000)
Z3=(--vocab 256 --context 128 --width 768 --depth 8 --heads 12 --micro-batch 2)
PIPE=(--vocab 256 --context 64 --width 256 --depth 8 --heads 8 --micro-batch 4 --microbatches 8 --pp 2)
declare -A CONFIGS=(
  [zero3]="${Z3[*]}"
  [gpipe]="${PIPE[*]} --schedule gpipe"
  [1f1b]="${PIPE[*]} --schedule 1f1b"
  [interleaved]="${PIPE[*]} --schedule interleaved --chunks 2"
  [zb-h1]="${PIPE[*]} --schedule zb-h1"
  [zeropp]="${PIPE[*]} --schedule zeropp --chunks 2 --unit-size 4"
)
run() {  # dir config -> tokens/s. The base build may crash at exit after its BENCH line (it
  # does under pp=2: SIGSEGV in teardown), so the line is taken whatever the exit code.
  (cd "$1" && { bazel-bin/tools/launcher --nproc-per-node 2 -- bazel-bin/tools/train ${CONFIGS[$2]} "${STEPS[@]}" \
    2>/dev/null || true; } | grep -oP '(?<=BENCH framework=zeropp ranks=2 tokens_per_s=)[0-9.]+')
}
echo "# base $BASE ($OLD) vs this checkout $(git rev-parse --short HEAD); 2 ranks, ${STEPS[*]}"
echo "# config  base_tok/s mean (sd; runs)  new_tok/s mean (sd; runs)  ratio"
stat() { awk '{ for (i = 1; i <= NF; ++i) { s += $i; q += $i * $i } n = NF }
  END { m = s / n; v = (n > 1) ? (q - n * m * m) / (n - 1) : 0; printf "%.1f %.1f", m, (v > 0) ? sqrt(v) : 0 }' <<<"$*"; }
lines=()
for c in zero3 gpipe 1f1b interleaved zb-h1 zeropp; do
  olds=(); news=()
  for k in 1 2 3; do olds+=("$(run "$OLD" $c)"); news+=("$(run . $c)"); done
  read -r o osd <<<"$(stat "${olds[*]}")"; read -r n nsd <<<"$(stat "${news[*]}")"
  r=$(awk -v a=$n -v b=$o 'BEGIN{printf "%.3f", a/b}')
  printf "  %-11s %9s (%s; %s) %9s (%s; %s) %s\n" $c $o $osd "${olds[*]}" $n $nsd "${news[*]}" $r
  v=$(awk -v x=$r 'BEGIN{print (x >= 0.95) ? "MET" : "MISSED"}')
  lines+=("RESULT one-runtime tokens_per_s_$c=$n tok/s reference=$o ratio=$r target=0.95 $v")
done
printf '%s\n' "${lines[@]}"
