#!/usr/bin/env bash
# The CTest entry for every test that needs a GPU (the op harness on CUDA, tests/op_cases.cpp;
# tests/test_cuda_backend.cpp; checkpoints and optimisers across devices: all named "cuda: ...").
# doctest leaves skipped cases out of the list CTest registers, so this one entry makes them
# visible: it runs them where a GPU is present and reports "skipped" (exit 77) everywhere else.
set -u
tests=$1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "no CUDA GPU on this machine: the GPU tests are skipped"
  exit 77
fi
exec "$tests" -tc='cuda:*'
