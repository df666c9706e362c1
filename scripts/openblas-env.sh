# Sourced by the run and benchmark scripts (not by the tests or CI). OpenBLAS 0.3.21 falls back
# to its generic SSE3 kernels on CPUs it does not recognise (a virtualised "Intel Xeon
# Processor" here); when OPENBLAS_CORETYPE is unset, pick the kernel family from the CPU flags.
if [[ -z "${OPENBLAS_CORETYPE:-}" && -r /proc/cpuinfo ]]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512bw "* ]]; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif [[ " $flags " == *" avx2 "* ]]; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
