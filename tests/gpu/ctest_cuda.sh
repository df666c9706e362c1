#!/usr/bin/env bash
# The CTest entry for the CUDA parity tests (tests/test_backend_parity.cpp). doctest leaves
# skipped cases out of the list CTest registers, so this one entry makes them visible: it runs
# them where a GPU is present and reports "skipped" (exit 77) everywhere else.
set -u
tests=$1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "no CUDA GPU on this machine: the CUDA parity tests are skipped"
  exit 77
fi
exec "$tests" -tc='cuda:*'
