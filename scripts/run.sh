#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, and trains a translation
# model on SCAN simple (generated, no download): about 5 minutes to ~98% exact match.
# Extra arguments go to `mixlab translate train` (e.g. --steps 500 --mixer gmlp); the last
# value of a repeated flag wins. Each invocation trains into a folder of its own,
# runs/scan-demo-<mixer>-N (N counts up), and prints it; give --out DIR to choose one.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --with-data
build=${MIXLAB_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMIXLAB_CUDA="${MIXLAB_CUDA:-AUTO}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target mixlab
# The encoder mixer named by the arguments (the last --mixer wins), for the folder name.
mixer=attention
out=
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --mixer) mixer="${args[i + 1]:-attention}" ;;
    --mixer=*) mixer="${args[i]#--mixer=}" ;;
    --out) out="${args[i + 1]:-}" ;;
    --out=*) out="${args[i]#--out=}" ;;
  esac
done
if [[ -z "$out" ]]; then
  n=1
  while [[ -e "runs/scan-demo-${mixer//[^A-Za-z0-9_.+-]/_}-$n" ]]; do n=$((n + 1)); done
  out="runs/scan-demo-${mixer//[^A-Za-z0-9_.+-]/_}-$n"
  set -- --out "$out" "$@"
fi
echo "run folder: $out"
exec "$build/mixlab" translate train --epochs 12 --threads 1 "$@"
