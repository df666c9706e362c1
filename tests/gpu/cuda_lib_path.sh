#!/usr/bin/env bash
# Prints the folders holding the CUDA 13 libraries mixlab's CUDA build links (the runtime,
# cuBLAS, cuFFT), colon-separated with a trailing colon, wherever this machine keeps them: the
# toolkit's folders or the nvidia-* wheels of a Python environment. For binaries built on another
# machine (tests/gpu/bundle.sh): LD_LIBRARY_PATH="$(tests/gpu/cuda_lib_path.sh)$LD_LIBRARY_PATH".
path=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcufft.so.12; do
  dir=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -name "$lib" \
    -printf '%h\n' 2>/dev/null | head -1)
  [[ -n "$dir" && ":$path" != *":$dir:"* ]] && path+="$dir:"
done
echo "$path"
