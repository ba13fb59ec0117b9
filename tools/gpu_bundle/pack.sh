#!/usr/bin/env bash
# ./zpp gpu-bundle OUT: builds the CUDA configuration and packs the CUDA test binaries, the train
# binary and launcher, the libraries they need that the PyTorch wheel does not ship (the project's
# own shared objects; Abseil, xxHash and liburing from Debian), a small text corpus and the runner
# scripts into OUT (a few MiB). OUT/run_tests.sh runs on any x86-64 machine with an NVIDIA driver
# and the torch 2.11 wheel; OUT/gpu_checks.sh makes the GPU measurements.
set -euo pipefail
out="${1:?usage: ./zpp gpu-bundle OUT}"
BAZEL=(${ZPP_BAZEL:-bazel})
src="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$src/../.." && pwd)"
tests=(engine_parity_test pipeline_parity_test engine_offload_test engine_accounting_test device_test adamw_cuda_test nccl_backend_test
  op_profile_test checkpoint_test)
tools=(tools:train tools:launcher tools:plan benchmarks:adam_bench)  # into OUT/tools
targets=("${tools[@]/#///}")
for t in "${tests[@]}"; do targets+=("//tests:$t"); done
(cd "$root" && "${BAZEL[@]}" build --config=cuda "${targets[@]}")
bin="$root/bazel-bin"
rm -rf "$out"
mkdir -p "$out"/{tests,tools,_solib_k8,lib,data,hardware}
for t in "${tests[@]}"; do cp -L "$bin/tests/$t" "$out/tests/"; done
tool_bins=("${tools[@]/:/\/}")
tool_bins=("${tool_bins[@]/#/$bin/}")
cp -L "${tool_bins[@]}" "$out/tools/"
cp "$root"/scheduler/planner/hardware/{h100-80gb-ib400x8,h200-141gb-ib400x8,a100-80gb-ib200x8}.json "$out/hardware/"
# The newest description measured on a lent GPU of each kind: gpu_checks.sh oversized predicts from it
# (that mode has no time to calibrate), on the same kind of GPU.
for gpu in h100 h200 a100; do
  prior="$(ls "$root"/benchmarks/results/$gpu-measured-*.json 2>/dev/null | sort | tail -1)" || true  # none yet
  [[ -z "$prior" ]] || cp "$prior" "$out/hardware/$gpu-prior-measured.json"
done
# The binaries find the project's shared objects at $ORIGIN/../_solib_k8 (their RUNPATH); the
# wheel's own libraries (torch, c10, CUDA, NCCL) come from the target machine's torch install.
for f in "${tests[@]/#/$bin/tests/}" "${tool_bins[@]}"; do
  ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$lib" in
      */_solib_k8/*) [[ "$lib" == *torch* ]] || cp -Ln "$lib" "$out/_solib_k8/" ;;
      */libabsl_*|*/libxxhash*|*/liburing*) cp -Ln "$lib" "$out/lib/" ;;
    esac
  done
done
find /usr/share/common-licenses -maxdepth 1 -type f -exec cp {} "$out/data/" \;
cp "$src/run_tests.sh" "$src/env.sh" "$src/gpu_checks.sh" "$src/gpu_calibrate.py" "$src/lease.sh" "$out/"
cp "$root/tools/hardware_json.py" "$root/tools/compare_ops.py" "$out/"
chmod -R u+w "$out"
size_kb=$(du -sk "$out" | cut -f1)
echo "gpu bundle: $out ($((size_kb / 1024)) MiB, $(ls "$out/tests" | wc -l) test binaries); run: $out/run_tests.sh"
if (( size_kb > 60 * 1024 )); then echo "error: the bundle is $((size_kb / 1024)) MiB, over the 60 MiB it must stay under" >&2; exit 1; fi
