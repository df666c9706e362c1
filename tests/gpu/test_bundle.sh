#!/usr/bin/env bash
# CTest for tests/gpu/bundle.sh (the GPU check's way onto a machine without mixlab's packages):
# the bundle holds the four binaries and the libraries they load from this machine's system
# folders, leaves out the C/C++ runtime and the CUDA libraries (the GPU machine's own), and an
# unpacked binary runs with only the bundle's lib/ added to the loader's path, loading OpenBLAS
# from there.
#   tests/gpu/test_bundle.sh BUILD_DIR     (a CUDA build with mixlab_tests, bench_cuda,
#                                            bench_train_step and mixlab built)
set -uo pipefail
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! "$root/tests/gpu/bundle.sh" "$build" --out "$tmp/bundle.tar.gz" >"$tmp/out" 2>&1; then
  cat "$tmp/out"
  echo "FAIL: bundle.sh failed"
  exit 1
fi
tar -tzf "$tmp/bundle.tar.gz" | sort >"$tmp/list"
for f in bin/mixlab_tests bin/bench_cuda bin/bench_train_step bin/mixlab lib/libopenblas.so.0 \
  lib/libfftw3.so.3 lib/libfftw3f.so.3; do
  grep -qx "$f" "$tmp/list" || { echo "FAIL: the bundle lacks $f"; fail=1; }
done
if grep -E '^lib/(libc|libm|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcufft)\.' \
  "$tmp/list"; then
  echo "FAIL: the bundle packs the libraries above, which the GPU machine provides itself"
  fail=1
fi
mkdir "$tmp/x" && tar -C "$tmp/x" -xzf "$tmp/bundle.tar.gz"
export LD_LIBRARY_PATH="$tmp/x/lib:${LD_LIBRARY_PATH:-}"
# (grep without -q: -q would stop reading early, and ldd's SIGPIPE would fail the pipeline)
ldd "$tmp/x/bin/mixlab" | grep "libopenblas.so.0 => $tmp/x/lib/" >/dev/null ||
  { echo "FAIL: the unpacked mixlab does not load the bundle's OpenBLAS"; fail=1; }
version=$("$tmp/x/bin/mixlab" --version 2>&1) || { echo "FAIL: the unpacked mixlab does not run"; fail=1; }
[[ "$version" == *"CUDA on"* ]] || { echo "FAIL: the packed mixlab has no CUDA backend: $version"; fail=1; }
((fail)) || echo "bundle ok: $(wc -l <"$tmp/list") files; $version"
exit $fail
