#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, and trains a translation
# model on SCAN simple (generated, no download): about 5 minutes to ~98% exact match.
# Extra arguments go to `mixlab translate train` (e.g. --steps 500 --mixer gmlp); the last
# value of a repeated flag wins.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --with-data
build=${MIXLAB_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMIXLAB_CUDA="${MIXLAB_CUDA:-AUTO}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target mixlab
exec "$build/mixlab" translate train --out runs/scan-demo --epochs 12 --threads 1 "$@"
