#!/usr/bin/env bash
# CI beyond the README's test command (.ci/run calls it after scripts/test.sh), in build-sanitize/
# (clang, CUDA off), after a check that every C++ and CUDA source is clang-formatted
# (scripts/check-format.sh):
#   1. the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer with leak detection on
#      (every report fails the test that caused it), its CPU register kernels in the other
#      width than scripts/test.sh's native build, so that both run in every CI run: on an AVX2
#      machine the AVX-512 (16-lane) forms, emulated on pairs of AVX2 registers
#      (-DMIXLAB_EMULATE_LANES16=ON, backends/cpu/simd/lanes16_emulated.h); on an AVX-512 machine the
#      AVX2 (8-lane) forms (-DMIXLAB_CPU_ARCH=x86-64-v3);
#   2. a fuzz smoke run: every target in fuzz/ for a fixed number of executions;
#   3. in build-tsan/, ThreadSanitizer over the tests that start threads: the parallel kernels,
#      the data loader's prefetch thread, and the SIGINT/SIGTERM handling of a training run.
# MIXLAB_CI_SKIP_TSAN=1 leaves out step 3.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --with-clang
jobs=${MIXLAB_JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# Unity builds (several sources compiled as one file): the sanitizers make every compile slow, and
# most of a file's time goes to the headers it shares with its neighbours (CLI11, doctest, the
# standard library). This cut the sanitizer build from about 16 to 10 minutes on 2 cores. Line
# tables are all the reports need from debug info.
# scripts/test.sh keeps one object per file, so a file that lacks an #include still fails there.
configure() {  # configure DIR SANITIZERS FUZZ [CMAKE OPTIONS...]
  CC=clang CXX=clang++ cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMIXLAB_CUDA=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    -DMIXLAB_BENCH=OFF -DMIXLAB_SANITIZE="$2" -DMIXLAB_FUZZ="$3" -DCMAKE_UNITY_BUILD=ON \
    "${launcher[@]}" "${@:4}" \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null  # OpenMPI keeps memory by design (LSan)
}
root=$(pwd)

echo "== clang-format"
./scripts/check-format.sh

echo "== ASan + UBSan build and suite"
t0=$SECONDS
if grep -qw avx512f /proc/cpuinfo; then
  other_width=(-DMIXLAB_CPU_ARCH=x86-64-v3)
  echo "(register kernels in their AVX2 forms: this machine's native build runs AVX-512's)"
else
  other_width=(-DMIXLAB_EMULATE_LANES16=ON)
  echo "(register kernels in their AVX-512 forms, emulated: this machine's native build runs AVX2's)"
fi
configure build-sanitize address,undefined ON "${other_width[@]}"
cmake --build build-sanitize -j "$jobs"
t1=$SECONDS
(
  cd build-sanitize
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  MIXLAB_NUM_THREADS=1 ctest -j "$jobs" --output-on-failure --timeout 900
)
t2=$SECONDS
echo "== fuzz smoke run"
LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp ./scripts/fuzz.sh build-sanitize
t3=$SECONDS
if [[ "${MIXLAB_CI_SKIP_TSAN:-0}" != 1 ]]; then
  echo "== ThreadSanitizer: parallel kernels, loader prefetch, signal handling"
  tsan_tests='parallel|loader|values|fast math|faults: SIGINT|apps: Ctrl-C'
  # Only the test files that hold those tests, and the ones with no test of their own (the
  # runner's main, shared helpers), go into this build's mixlab_tests.
  mapfile -t tsan_files < <(cd tests && {
    grep -l -E "TEST_CASE\(\"($tsan_tests)" -- *.cpp
    grep -L 'TEST_CASE(' -- *.cpp
  } | sort -u)
  configure build-tsan thread OFF "-DMIXLAB_TEST_FILES=$(IFS=';' && echo "${tsan_files[*]}")"
  cmake --build build-tsan -j "$jobs" --target mixlab mixlab_tests
  (
    cd build-tsan
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    # Two threads in the kernels' pool, so that the parallel loops really run in parallel.
    MIXLAB_NUM_THREADS=2 ctest -j "$jobs" --output-on-failure --timeout 900 -R "^($tsan_tests)"
  )
fi
t4=$SECONDS
echo "ci-extra: sanitizer build $((t1 - t0)) s, sanitizer suite $((t2 - t1)) s," \
  "fuzz smoke $((t3 - t2)) s, thread sanitizer $((t4 - t3)) s"
