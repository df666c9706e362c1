#!/usr/bin/env bash
# Installs the Debian packages mixlab builds against, only those that are missing.
# Safe to run twice. Pass --with-data to also install Fashion-MNIST (used by `mixlab classify`),
# --with-clang for the sanitizer and fuzzing builds.
set -euo pipefail
pkgs=(cmake g++ make pkg-config libopenblas-dev libfftw3-dev doctest-dev libcli11-dev zlib1g-dev libstb-dev
      nlohmann-json3-dev
      libopenmpi-dev openmpi-bin)  # MPI: optional for the build, needed by `mpirun -np N mixlab`
if [[ "${1:-}" == "--with-data" ]]; then pkgs+=(dataset-fashion-mnist); fi
pkgs+=(python3)  # the suite's tests of bench/speed_targets.py (and the bench scripts)
pkgs+=(librsvg2-bin)  # rsvg-convert: turns the SVG pictures of `mixlab study` into the PNGs under docs/
# --with-clang: clang and its runtimes (sanitizers, libFuzzer) for scripts/ci-extra.sh and fuzz/,
# and clang-format for its style check (scripts/check-format.sh).
for arg in "$@"; do if [[ "$arg" == "--with-clang" ]]; then pkgs+=(clang libclang-rt-dev clang-format); fi; done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
