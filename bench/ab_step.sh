#!/usr/bin/env bash
# Two builds of bench_train_step against each other, in one script: the old binary and the new
# one take turns, model by model, for several rounds, and the table gives each side's median step
# per round and best old ÷ best new. On a shared machine (and on a GPU machine whose host sets the
# pace of a step) absolute times drift by tens of percent between runs; a change is measured by
# alternating both binaries under the same conditions, never by comparing with an earlier run.
#
#   bench/ab_step.sh [--device cpu|cuda] [--rounds R] [--steps K] [--threads N] OLD NEW [MODEL...]
#
# OLD, NEW: bench_train_step binaries (e.g. a copy of build/bench_train_step made before the
# change, and the rebuilt one). MODEL: translator, translator-256, or a mixer name for the image
# classifier (49 tokens, d=128, 4 blocks, batch 128, dropout 0: the speed table's classifier);
# default: translator attention synth-dense mlp-mixer. --threads is passed on the CPU only.
#
# Prints one line per model and round, then a summary line per model:
#   MODEL  old: a b c ms  new: d e f ms  best old / best new: R
# R above 1: the new binary is faster. Exit 1 when a run fails or prints no median.
set -uo pipefail
device=cpu rounds=3 steps=20 threads=""
while (($#)); do
  case $1 in
    --device) device=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --threads) threads=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
if (($# < 2)); then
  echo "usage: bench/ab_step.sh [--device D] [--rounds R] [--steps K] [--threads N] OLD NEW [MODEL...]" >&2
  exit 2
fi
old=$1 new=$2
shift 2
models=("$@")
((${#models[@]})) || models=(translator attention synth-dense mlp-mixer)
for exe in "$old" "$new"; do
  [[ -x "$exe" ]] || { echo "ab_step: $exe is not an executable" >&2; exit 2; }
done

flags_for() {  # the bench_train_step flags of a model
  case $1 in
    translator) echo "--task translate" ;;
    translator-256) echo "--task translate --dim 256" ;;
    *) echo "--task classify --mixer $1 --dim 128 --layers 4 --batch 128 --patch 4 --dropout 0" ;;
  esac
}

# median_ms EXE MODEL: one run's median step in ms (empty when the run failed).
median_ms() {
  local extra=(--device "$device" --steps "$steps")
  [[ -n "$threads" && "$device" == cpu ]] && extra+=(--threads "$threads")
  # shellcheck disable=SC2046  # the model's flags are words on purpose
  "$1" $(flags_for "$2") "${extra[@]}" 2>/dev/null |
    sed -n 's/^json: .*"median_ms": \([0-9.eE+-]*\).*/\1/p' | tail -n 1
}

status=0
declare -A old_times new_times
for ((r = 1; r <= rounds; ++r)); do
  for model in "${models[@]}"; do
    for side in old new; do
      exe=$old
      [[ $side == new ]] && exe=$new
      t=$(median_ms "$exe" "$model")
      if [[ -z "$t" ]]; then
        echo "round $r $side $model: FAILED (no median from $exe)"
        status=1
        continue
      fi
      printf 'round %d %-3s %-16s %9.3f ms\n' "$r" "$side" "$model" "$t"
      if [[ $side == old ]]; then old_times[$model]+="$t "; else new_times[$model]+="$t "; fi
    done
  done
done

echo "# best old ÷ best new (above 1: the new binary is faster), $rounds rounds of $steps steps, device $device"
for model in "${models[@]}"; do
  python3 - "$model" "${old_times[$model]:-}" "${new_times[$model]:-}" <<'EOF' || status=1
import sys
model, old, new = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
if not old or not new:
    print(f"{model:<16} no complete pair")
    sys.exit(1)
fmt = lambda xs: " ".join(f"{float(x):.2f}" for x in xs)
best_old, best_new = min(map(float, old)), min(map(float, new))
print(f"{model:<16} old: {fmt(old)} ms  new: {fmt(new)} ms  best old / best new: "
      f"{best_old / best_new:.2f}")
EOF
done
exit $status
