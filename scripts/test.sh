#!/usr/bin/env bash
# Builds mixlab and runs the whole test suite (doctest through CTest). Installs missing Debian
# packages first; safe to run twice. Extra arguments go to ctest (e.g. -R mixers).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${MIXLAB_BUILD_DIR:-build}
jobs=${MIXLAB_JOBS:-$(nproc)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMIXLAB_CUDA="${MIXLAB_CUDA:-AUTO}" >/dev/null
cmake --build "$build" -j "$jobs"
cd "$build"
# Two test processes at a time; the kernels inside each use one thread, so timings stay fair.
MIXLAB_NUM_THREADS=1 ctest -j "$jobs" --output-on-failure --timeout 600 "$@"
