#!/bin/bash
# `train --profile-ops` against `plan --predict` on the same model and layout: every rank's
# matrix-product FLOPs, counted from the operators the engine really ran, equal what the planner
# charges that pipeline rank (tools/compare_ops.py refuses a mismatch), for ZeRO-3 with
# recomputation, ZeroPP with its default recomputation, 1F1B, interleaved and ZB-H1 (the split
# weight pass) on 2 real processes, and for the 3D baseline's tensor parallelism (train_3d --tp 2,
# with and without sequence parallelism: each rank's column and row slices, its vocabulary slice of
# the head). A FLOP the engine spends and the planner does not charge (or the reverse) fails here.
set -u
RUNFILES="${TEST_SRCDIR:-$PWD/..}/zeropp"
LAUNCHER="$RUNFILES/tools/launcher"
TRAIN="$RUNFILES/tools/train"
TRAIN3D="$RUNFILES/benchmarks/baseline_3d/train_3d"
PLAN="$RUNFILES/tools/plan"
COMPARE="$RUNFILES/tools/compare_ops.py"
HW="$RUNFILES/scheduler/planner/hardware/cpu-local.json"
FAILS=0; PASSES=0
pass() { echo "PASS: $1"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $1"; FAILS=$((FAILS + 1)); }
MODEL=(--width 64 --depth 4 --heads 2 --context 32 --micro-batch 2)
SHAPE=(--hidden 64 --layers 4 --heads 2 --seq 32 --vocab 256 --micro-batch 2 --gpus 2)

# check NAME "TRAIN ARGS" "PLAN ARGS" [zero]: with "zero" both ranks belong to pipeline rank 0 (data
# ranks of ZeRO-3, or tensor-parallel ranks). PROG: the training job (tools/train unless set).
PROG="$TRAIN"
check() {
  local name="$1" zero="${4:-}" targs plargs out pred r
  read -r -a targs <<<"$2"
  read -r -a plargs <<<"$3"
  out="$("$LAUNCHER" --nproc-per-node 2 -- "$PROG" --steps 3 "${MODEL[@]}" "${targs[@]}" --profile-ops 2>&1)"
  pred="$("$PLAN" --predict --hardware "$HW" "${SHAPE[@]}" "${plargs[@]}" 2>&1)"
  for r in 0 1; do
    local cmp
    cmp="$(printf '%s\n%s\n' "$out" "$pred" | python3 "$COMPARE" --rank "$r" --plan-rank "$([[ -n "$zero" ]] && echo 0 || echo "$r")" 2>&1)"
    if [[ $? -eq 0 ]] && grep -q "kind=matmul " <<<"$cmp"; then
      pass "$name rank $r: $(grep -oP 'OPS rank='"$r"' .*matmul_gflop=\S+' <<<"$out" | grep -oP 'matmul_gflop=\S+') as predicted"
    else
      fail "$name rank $r: $cmp
$out
$pred"
    fi
  done
}

check "ZeRO-3 recompute" "--recompute" "--design zero3 --zero 2 --global-batch 4 --recompute" zero
check "ZeroPP v2 u2" "--pp 2 --schedule zeropp --chunks 2 --unit-size 2 --microbatches 4 --pipeline-recompute default" \
  "--design zeropp --pp 2 --v 2 --u 2 --global-batch 8 --recompute"
check "1F1B" "--pp 2 --schedule 1f1b --microbatches 4" "--design 3d --pp 2 --schedule 1f1b --global-batch 8"
check "interleaved" "--pp 2 --schedule interleaved --chunks 2 --microbatches 4" \
  "--design 3d --pp 2 --v 2 --schedule interleaved --global-batch 8"
check "ZB-H1" "--pp 2 --schedule zb-h1 --microbatches 4" "--design 3d --pp 2 --schedule zb-h1 --global-batch 8"
PROG="$TRAIN3D"
check "3D tp 2" "--tp 2 --microbatches 4" "--design 3d --tp 2 --global-batch 8" zero
check "3D tp 2 sp" "--tp 2 --sp --microbatches 4" "--design 3d --tp 2 --sp --global-batch 8" zero
echo "$PASSES passed, $FAILS failed"
[[ $FAILS -eq 0 ]]
