#!/usr/bin/env bash
# Data-parallel throughput on this machine: examples/s of the translator and the
# classifier (ListOps) trained for a few steps as 1 process x 1 thread, 1 process x 2 threads and
# 2 MPI processes x 1 thread, with the same global batch; plus the gradient all-reduce time per
# step (as the trainer measures it, i.e. including waiting for the slower rank) and the cost of
# the all-reduce alone for a buffer of the model's size (bench_allreduce).
#
#   bench/distributed.sh            STEPS=30 by default; BUILD=build-nocuda to pick a build;
#                                   MPI_ARGS="--mca mpi_yield_when_idle 1" adds mpirun flags
#
# Timings on a shared machine are noisy: compare the rows of one invocation, not across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
steps=${STEPS:-30}
mpirun=${MPIRUN:-mpirun}
root_flag=""
[[ $(id -u) -eq 0 ]] && root_flag="--allow-run-as-root"
command -v "$mpirun" >/dev/null || { echo "no $mpirun: install openmpi-bin" >&2; exit 1; }
cmake --build "$build" --target mixlab bench_allreduce -j 2 >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The translator on a generated reversal task (2,000 pairs of 8-16 words; 10% held out), so that
# the validation and test decoding after the timed steps stay short.
awk 'BEGIN { srand(7); for (i = 0; i < 2000; i++) { n = 8 + int(rand() * 9); s = ""; t = "";
  for (k = 0; k < n; k++) { w[k] = "w" int(rand() * 40); s = s (k ? " " : "") w[k] }
  for (k = n - 1; k >= 0; k--) t = t w[k] (k ? " " : ""); print s "\t" t } }' >"$work/reverse.tsv"
translate=(translate train --data "$work/reverse.tsv" --dim 64 --heads 4 --layers 2 --dropout 0)
classify=(classify train --data listops --listops-train 4000 --dim 64 --heads 4 --layers 2
          --dropout 0)
batch=64

# Prints "examples/s" and the trainer's all-reduce line for one configuration.
measure() {  # name ranks threads args...
  local name=$1 ranks=$2 threads=$3
  shift 3
  local launcher=() per_rank=$batch
  if ((ranks > 1)); then
    launcher=("$mpirun" -np "$ranks" --oversubscribe $root_flag --bind-to none ${MPI_ARGS:-})
    per_rank=$((batch / ranks))
  fi
  local log="$work/$name.log"
  "${launcher[@]}" "$build/mixlab" "$@" --batch "$per_rank" --steps "$steps" --threads "$threads" \
    --seed 1 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  local rate reduce params
  rate=$(grep -m1 '^throughput' "$log" | sed -E 's/^throughput +([0-9.,]+) examples.*/\1/')
  reduce=$(grep -m1 '^data parallel' "$log" | sed -E 's/.*all-reduce ([0-9.]+) ms\/step.*/\1/' || true)
  params=$(grep -m1 '^parameters' "$log" | sed -E 's/^parameters +//; s/,//g')
  printf '%-10s %-14s %12s ex/s   all-reduce/step %s ms\n' "$name" "$ranks x $threads" "$rate" \
    "${reduce:-0}"
  echo "$params" >"$work/params"
}

for task in translate classify; do
  declare -n args=$task
  echo "== $task (global batch $batch, $steps steps)"
  measure "$task" 1 1 "${args[@]}"
  measure "$task" 1 2 "${args[@]}"
  measure "$task" 2 1 "${args[@]}"
  "$mpirun" -np 2 --oversubscribe $root_flag --bind-to none ${MPI_ARGS:-} "$build/bench_allreduce" \
    --floats "$(cat "$work/params")" --iters 50
done
