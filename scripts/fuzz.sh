#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ from a build configured with -DMIXLAB_FUZZ=ON (see
# scripts/ci-extra.sh). Each target starts from its seed corpus fuzz/corpus/<name>/ (and its
# dictionary fuzz/dict/<name>.dict when there is one); new inputs it finds go to a scratch corpus,
# never into the repository.
#
#   scripts/fuzz.sh BUILD_DIR                  smoke run: a fixed number of executions per target
#   scripts/fuzz.sh BUILD_DIR 600              a campaign: 600 seconds per target
#   scripts/fuzz.sh BUILD_DIR 600 fuzz_json    one target
#
# A crash leaves crash-* in the current directory; once fixed, add it to fuzz/corpus/<name>/ as a
# regression input (every run replays every corpus file first).
set -euo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS] [TARGET...]}
seconds=${2:-0}
shift $(($# > 1 ? 2 : 1))
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in "$root"/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
runs=${MIXLAB_FUZZ_RUNS:-10000} # executions per target in the smoke run (about 50 s in all)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  args=(-max_len=8192 -rss_limit_mb=2048 -timeout=20 -print_final_stats=1)
  if [[ -f $root/fuzz/dict/$name.dict ]]; then args+=(-dict="$root/fuzz/dict/$name.dict"); fi
  n=$runs
  # The targets that go through a file (the readers take paths) run about 20x slower per input.
  case $name in idx | text_files | cmudict | checkpoint) n=$((runs / 3)) ;; esac
  if ((seconds > 0)); then args+=(-max_total_time="$seconds"); else args+=(-runs="$n" -seed=1); fi
  mkdir -p "$scratch/$name"
  echo "== $t"
  start=$SECONDS
  status=0
  "$build/$t" "${args[@]}" "$scratch/$name" "$root/fuzz/corpus/$name" >"$scratch/$name.log" 2>&1 ||
    status=$?
  grep -E "^stat::number_of_executed_units" "$scratch/$name.log" || true
  echo "   $((SECONDS - start)) s, exit $status"
  if ((status != 0)); then
    tail -60 "$scratch/$name.log"
    echo "fuzz target $t failed"
    exit 1
  fi
done
