#!/usr/bin/env bash
# The speed table (docs/speed.md): mixlab against PyTorch eager, every mixer's classifier and
# the translator at d=128 and d=256, at 1 and 2 threads.
#
#   scripts/bench-speed.sh [--quick] [--markdown] [--threads 1,2] [--mixers a,b] [--steps K]
#
# Builds bench_train_step in build/ (or $MIXLAB_BUILD_DIR) and, when .venv/ has no PyTorch,
# creates it and installs PyPI's current torch there (PyPI's Linux x86-64 wheel is the CUDA
# build: with its nvidia-* dependencies about 5 GB on disk, downloaded once; the CUDA libraries
# are loaded but unused, the comparison runs on the CPU). Other options go to
# bench/speed_table.py.
#
# --skip-without-torch (for CTest): build and install nothing; use .venv/'s Python or python3,
# whichever has torch, and exit 77 (skipped) when neither has.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${MIXLAB_BUILD_DIR:-build}"
skip_without_torch=0
args=()
while (($#)); do
  case "$1" in
    --skip-without-torch) skip_without_torch=1 ;;
    --build) build="$2"; shift ;;
    *) args+=("$1") ;;
  esac
  shift
done

# torch 2 or later: the PyTorch models use its fused scaled_dot_product_attention.
has_torch() {
  { [ -x "$1" ] || command -v "$1" >/dev/null 2>&1; } &&
    "$1" -c "import torch.nn.functional as F; F.scaled_dot_product_attention" >/dev/null 2>&1
}

python=""
if has_torch .venv/bin/python; then
  python=.venv/bin/python
elif ((skip_without_torch)); then
  if has_torch python3; then python=python3; fi
  if [ -z "$python" ]; then
    echo "SKIP: no PyTorch (.venv/ or python3); scripts/bench-speed.sh installs it"
    exit 77
  fi
else
  if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
    echo "python3 cannot create a virtual environment: apt-get install python3-venv" >&2
    exit 1
  fi
  echo "== creating .venv/ with PyPI's torch (once; about 5 GB with its CUDA dependencies)"
  python3 -m venv .venv
  .venv/bin/pip install --quiet torch numpy
  python=.venv/bin/python
  "$python" -c "import torch; print('== torch', torch.__version__, '(CUDA build', torch.version.cuda, 'unused here)')"
fi

if ((skip_without_torch)); then
  [ -x "$build/bench_train_step" ] || { echo "no $build/bench_train_step: build it first" >&2; exit 1; }
else
  launcher=()
  if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target bench_train_step >/dev/null
fi

exec "$python" bench/speed_table.py --build "$build" --python "$python" "${args[@]}"
