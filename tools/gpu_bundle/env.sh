# Sourced by the bundle's scripts: the wheel's libraries (torch, and the nvidia-* wheels beside it)
# and the bundle's own on LD_LIBRARY_PATH; one intra-op thread per rank.
PY="${PYTHON:-python3}"
torch_lib="$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)" || {
  echo "error: $PY cannot import torch (the bundle needs the PyTorch 2.11 wheel's libraries)"; return 2; }
site="$(dirname "$(dirname "$torch_lib")")"
nv="$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')"
export LD_LIBRARY_PATH="$torch_lib:${nv}$here/lib:${LD_LIBRARY_PATH:-}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export TORCH_CPP_LOG_LEVEL="${TORCH_CPP_LOG_LEVEL:-ERROR}"
