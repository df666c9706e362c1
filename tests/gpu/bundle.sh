#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a GPU machine that has the CUDA toolkit and driver
# but none of mixlab's Debian packages (OpenBLAS, FFTW, ...) and no network: the GPU lease is
# short, so building there (several minutes on its cores, with headers it lacks) costs more than
# carrying binaries. Writes .gpu/bundle.tar.gz: the test, benchmark and app binaries, plus every
# shared library they load from this machine's system folders except the C/C++ runtime (the GPU
# machine's own, newer, serves: build here on the older glibc) and the CUDA libraries (the GPU
# machine's toolkit must match the one built with: both are CUDA 13 here).
#
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXLAB_CUDA=ON \
#     -DMIXLAB_NATIVE=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#   cmake --build build-gpu --target mixlab_tests bench_cuda bench_train_step mixlab
#   tests/gpu/bundle.sh build-gpu
#
# MIXLAB_NATIVE=OFF because the GPU machine's processor may lack this one's instructions; MPI off
# because OpenMPI is not there. On the GPU machine (its working tree carries .gpu):
#   tests/gpu/check.sh --prebuilt .gpu/bundle.tar.gz
#
#   tests/gpu/bundle.sh [BUILD_DIR] [--out FILE]   (default build-gpu, .gpu/bundle.tar.gz)
set -euo pipefail
build="build-gpu"
tarball=.gpu/bundle.tar.gz
while (($#)); do
  case $1 in
    --out) tarball=$(realpath -m "${2:?"--out needs a file name"}"); shift 2 ;;
    *) build=$(realpath -m "$1"); shift ;;
  esac
done
cd "$(dirname "$0")/../.."  # after the paths given were made absolute: defaults are the repo's
bins=(mixlab_tests bench_cuda bench_train_step mixlab)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$(dirname "$tarball")"
for b in "${bins[@]}"; do
  [[ -x "$build/$b" ]] || { echo "bundle.sh: $build/$b is missing: build it first" >&2; exit 1; }
  cp "$build/$b" "$stage/bin/"
done
# The runtime that the GPU machine provides itself.
keep_out='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s|libz|libcuda|libcublas|libcublasLt|libcufft|libcudart|libnvidia)\.'
for b in "${bins[@]}"; do
  ldd "$build/$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $keep_out ]] && continue
  cp -L "$path" "$stage/lib/$name"
done
# Data files the tests and the app read from the source tree travel with the working tree itself.
tar -C "$stage" -czf "$tarball" bin lib
# The default place is inside the checkout: keep it out of git (and travelling as `carry` only).
if [[ "$tarball" == .gpu/bundle.tar.gz && -d .git ]]; then
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >>.git/info/exclude; }
fi
echo "bundle.sh: $tarball ($(du -h "$tarball" | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ')"
