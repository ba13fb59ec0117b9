#!/usr/bin/env bash
# The CUDA cases of zeropp's test suite, from the GPU bundle (./zpp gpu-bundle OUT): runs on any
# x86-64 machine with an NVIDIA driver and the PyTorch 2.11 wheel (its libraries are found through
# `python3 -c 'import torch'`); no Bazel, no network. Prints "N passed, N failed" at the end.
#   ./run_tests.sh [gtest filter [TEST_BINARY...]]   default: every CUDA case of every test binary
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh" || exit 2
filter="${1:-*cuda*:*Cuda*:*Nccl*}"
shift $(($# > 0 ? 1 : 0))
binaries=()
for b in "$@"; do
  [[ -x "$here/tests/$b" ]] || { echo "error: run_tests.sh: no test binary '$b' in $here/tests"; exit 2; }
  binaries+=("$here/tests/$b")
done
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$here"/tests/*)
passed=0 failed=0 skipped=0
for t in "${binaries[@]}"; do
  name="$(basename "$t")"
  out="$(cd "$here" && "$t" --gtest_filter="$filter" 2>&1)"; rc=$?
  p=$(grep -oP '^\[  PASSED  \] \K[0-9]+' <<<"$out" | tail -1)
  f=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= test)' <<<"$out" | tail -1)
  s=$(grep -oP '^\[  SKIPPED \] \K[0-9]+' <<<"$out" | tail -1)
  p=${p:-0} f=${f:-0} s=${s:-0}
  # A binary that died before gtest's summary counts as one failure.
  if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  echo "$name: $p passed, $f failed, $s skipped (exit $rc)"
  if [[ $f -gt 0 || $s -gt 0 ]]; then grep -E '^\[  (FAILED|SKIPPED) \]|needs a GPU|Failure|error' <<<"$out" | head -40; fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
