#!/usr/bin/env bash
# Quality runs (benchmarks, not tests): train a documented recipe end to end and print its test
# metrics, the wall time, the machine and every command line. Runs go to runs/quality/.
#
#   bench/quality.sh fashion-mnist [flags]  the Fashion-MNIST recipe: an attention-free gMLP on
#                                           the convolutional tokenizer's tokens, with
#                                           augmentation (MIXER=attention for the attention row,
#                                           48 epochs instead of 24,
#                                           --stem patch for 4x4 patches instead);
#                                           SEEDS="0 1 2" trains those seeds and scores them
#                                           also as one ensemble; JOBS=2 trains two seeds at once;
#                                           DISTILL=1 trains each seed's gMLP first and the
#                                           mixer also on its predictions (--teacher);
#                                           each best checkpoint (and the ensemble) is
#                                           scored again with --tta flip
#   bench/quality.sh g2p [flags]            the CMUdict g014b2b recipe: two d=128 translators
#                                           (seeds 0 and 1, side by side; 60 epochs, weight
#                                           decay 0.1, attention with a relative position
#                                           bias), each the mean of its last 5 epochs'
#                                           weights, beam 5 on test, and the two
#                                           decoded as one ensemble (SEEDS=, JOBS= change
#                                           that); UNSEEN=FILE also scores each on a word list
#                                           outside the split (scripts/g2p_unseen_words.py);
#                                           DISTILL=1 then trains one model on the ensemble's
#                                           pronunciations of the training words; BASELINE=1
#                                           trains the levers' baseline instead (40 epochs,
#                                           weight decay 0.01, no position bias)
#   bench/quality.sh fashion [flags]        the plain Fashion-MNIST setting of docs/results.md's
#                                           per-mixer table (MIXER=, EPOCHS=)
#   bench/quality.sh scan [flags]           the SCAN simple-split translator (MIXER=, DECODER=)
#
# Extra flags go to `mixlab ... train` (they override the recipe's, as the last value of a flag
# wins). Rerunning the fashion-mnist or g2p recipe with the same OUT= goes on where it stopped:
# finished runs are kept and an unfinished one resumes from its last checkpoint. OUT= names the
# recipe's folder: its logs and command.txt, with mixlab's run folder in run/ beside them. JOBS=
# runs that many seeds side by side (default: 2 for g2p, else 1), each on THREADS= kernel threads
# (default: the cores shared among the jobs). docs/results.md tabulates the results with their
# commands.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MIXLAB_BUILD_DIR:-build}
cmake --build "$build" --target mixlab -j "$(nproc)" >/dev/null
mixlab=$build/mixlab
mixer=${MIXER:-attention}
decoder=${DECODER:-$mixer}
task=${1:?usage: bench/quality.sh fashion-mnist|g2p|fashion|scan [flags]}
shift
# The G2P recipe is two seeds side by side and their ensemble; the others train one run.
jobs=1
[ "$task" != g2p ] || jobs=2
jobs=${JOBS:-$jobs}
threads=${THREADS:-$((($(nproc) + jobs - 1) / jobs))}
ensemble_threads=${THREADS:-$(nproc)}
commands=()
started=$SECONDS

# Runs one command of the recipe, logging it (appending with STEP_APPEND=1), and remembers it
# for the summary. The first command of a run folder is also its command.txt, which
# bench/quality_table.sh reads with the log's /usr/bin/time lines.
step() {
  local log=$1
  shift
  commands+=("$*")
  [ -f "$rec/command.txt" ] || echo "command: $*" >"$rec/command.txt"
  echo "+ $*"
  local timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -v)
  "${timer[@]}" "$@" 2>&1 | tee ${STEP_APPEND:+-a} "$log"
}

# Trains one run folder of a recipe: `train LOG OUT MIXLAB COMMAND train FLAGS...`. Rerunning a
# recipe goes on where it stopped: a run that finished (its metrics.csv ends with the test row)
# is kept, and an unfinished one (Ctrl-C, a reboot, a dropped connection) resumes from its
# last.safetensors with its stored settings, its log appended.
train() {
  local log=$1 out=$2
  shift 2
  if [ -f "$out/metrics.csv" ] && [ "$(tail -n 1 "$out/metrics.csv" | cut -d, -f1)" = test ]; then
    commands+=("$*")
    echo "= $out holds this recipe's finished run: kept (remove the folder to train it again)"
  elif [ -f "$out/last.safetensors" ]; then
    echo "= $out holds an unfinished run: resumed from its last checkpoint, with its stored settings"
    STEP_APPEND=1 step "$log" "$1" "$2" train --resume --threads "$threads" --quiet --out "$out"
  elif [ -e "$out" ]; then
    # Stopped before its first checkpoint: --overwrite removes only the files that run wrote.
    step "$log" "$@" --overwrite
  else
    step "$log" "$@"
  fi
}

# Runs `$1 SEED` for every seed of $seeds, JOBS at a time, each in a subshell that leaves its
# commands in $rec/steps.txt for the summary. After a failed seed no further seed starts, and the
# recipe stops once the running ones end.
for_each_seed() {
  local each=$1 seed running=0 failed=0
  for seed in $seeds; do
    if [ "$running" -ge "$jobs" ]; then
      wait -n || failed=1
      running=$((running - 1))
    fi
    [ "$failed" = 0 ] || break
    (
      commands=()
      "$each" "$seed"
      printf '%s\n' "${commands[@]}" >"$rec/steps.txt"
    ) &
    running=$((running + 1))
  done
  while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
  done
  [ "$failed" = 0 ] || { echo "a seed's run failed: see its log" >&2; exit 1; }
  for seed in $seeds; do
    seed_folder "$seed"
    mapfile -t -O "${#commands[@]}" commands <"$rec/steps.txt"
  done
}

summary() {
  local minutes=$(((SECONDS - started) / 60)) seconds=$(((SECONDS - started) % 60))
  echo
  echo "== $task recipe"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $threads kernel threads a run, $jobs run(s) at a time"
  echo "wall time: ${minutes} min ${seconds} s"
  echo "commands:"
  printf '  %s\n' "${commands[@]}"
  echo "test metrics (each under the log it comes from):"
  local log
  for log in "$@"; do
    echo "  $log"
    grep -hE "^test |^test-time|WER|PER|accuracy" "$log" | grep -v "Elapsed" | sed 's/^/    /' || true
  done
}

case "$task" in
  fashion-mnist)
    mixer=${MIXER:-gmlp}
    base=${OUT:-runs/quality/fashion-mnist-$mixer${DISTILL:+-distilled}}
    seeds=${SEEDS:-0}
    seed_folder() {
      rec=$base
      [ "$seeds" = 0 ] || rec=$base-seed$1
      out=$rec/run
    }
    # Attention fits this data more slowly than the gMLP: its row trains twice as long.
    gmlp_epochs=24
    epochs=$gmlp_epochs
    [ "$mixer" != attention ] || epochs=$((2 * gmlp_epochs))
    teacher_base=${TEACHER_OUT:-runs/quality/fashion-mnist-gmlp}
    teacher_folder() {  # the folders of the recipe's gMLP for DISTILL=1, named as seed_folder's
      rec=$teacher_base
      [ "$seeds" = 0 ] || rec=$teacher_base-seed$1
      out=$rec/run
    }
    # Trains the recipe's model for one seed into $out: `fashion_train MIXER SEED [FLAGS...]`.
    fashion_train() {
      local model=$1 seed=$2
      shift 2
      mkdir -p "$rec"
      train "$rec/log.txt" "$out" "$mixlab" classify train --data fashion-mnist --mixer "$model" \
        --patch 4 --dim 96 --heads 4 --layers 6 --batch 128 --epochs "${EPOCHS:-$epochs}" \
        --lr 2e-3 --warmup 500 --weight-decay 0.05 --label-smoothing 0.1 --dropout 0.1 \
        --augment-crop 2 --augment-flip --augment-erase 0.25 --stem conv --seed "$seed" \
        --threads "$threads" --quiet --out "$out" "$@"
    }
    # DISTILL=1: the seed's gMLP of the recipe first (its epochs, in $teacher_base, kept when it
    # has finished), then the mixer learns from it as well (--teacher, hard distillation).
    fashion_seed() {
      local teacher=()
      if [ -n "${DISTILL:-}" ]; then
        teacher_folder "$1"
        EPOCHS=$gmlp_epochs fashion_train gmlp "$1"
        teacher=(--teacher "$out/best.safetensors")
      fi
      seed_folder "$1"
      fashion_train "$mixer" "$1" "${teacher[@]}" "${flags[@]}"
      # The best checkpoint again with test-time flip averaging (each image and its mirror).
      step "$rec/tta-eval.txt" "$mixlab" classify eval --tta flip --threads "$threads" \
        --checkpoint "$out/best.safetensors"
    }
    flags=("$@")
    for_each_seed fashion_seed
    logs=()
    bests=()
    for seed in $seeds; do
      if [ -n "${DISTILL:-}" ]; then
        teacher_folder "$seed"
        logs+=("$rec/log.txt")
      fi
      seed_folder "$seed"
      logs+=("$rec/log.txt" "$rec/tta-eval.txt")
      bests+=("$out/best.safetensors")
    done
    if [ ${#bests[@]} -gt 1 ]; then
      step "$base-ensemble-eval.txt" "$mixlab" classify eval --threads "$ensemble_threads" \
        --checkpoint "${bests[@]}"
      step "$base-ensemble-tta-eval.txt" "$mixlab" classify eval --tta flip \
        --threads "$ensemble_threads" --checkpoint "${bests[@]}"
      logs+=("$base-ensemble-eval.txt" "$base-ensemble-tta-eval.txt")
    fi
    summary "${logs[@]}" ;;
  g2p)
    base=${OUT:-runs/quality/g2p-$mixer${BASELINE:+-baseline}}
    seeds=${SEEDS:-0 1}
    if [ -n "${DISTILL:-}" ] && [ "$(wc -w <<<"$seeds")" -lt 2 ]; then
      echo "DISTILL needs an ensemble to learn from: two or more SEEDS" >&2
      exit 2
    fi
    seed_folder() {
      rec=$base-seed$1
      out=$rec/run
    }
    # Trains one model into the folder REC (`g2p_model REC SEED [FLAGS...]`), averages its last
    # five epochs' weights and decodes test (and UNSEEN).
    g2p_model() {
      local rec=$1 seed=$2
      shift 2
      out=$rec/run
      mkdir -p "$rec"
      train "$rec/log.txt" "$out" "$mixlab" translate train --data g2p --mixer "$mixer" \
        --decoder-mixer "$decoder" --dim 128 --heads 4 --layers 3 --batch 128 \
        --epochs "${EPOCHS:-$epochs}" --lr 2e-3 --warmup 800 --weight-decay "$decay" \
        --dropout 0.1 --label-smoothing 0.1 --beam 1 --keep-epochs 5 --seed "$seed" \
        --threads "$threads" --quiet --out "$out" "${position_bias[@]}" "$@" "${flags[@]}"
      local last e inputs=()
      last=$(ls "$out"/epoch-*.safetensors | sed 's/.*epoch-\([0-9]*\).*/\1/' | sort -n | tail -5)
      for e in $last; do inputs+=("$out/epoch-$e.safetensors"); done
      step "$rec/average.txt" "$mixlab" average --out "$out/avg.safetensors" "${inputs[@]}"
      step "$rec/eval.txt" "$mixlab" translate eval --data g2p --beam 5 --threads "$threads" \
        --checkpoint "$out/avg.safetensors"
      if [ -n "${UNSEEN:-}" ]; then
        step "$rec/unseen.txt" "$mixlab" translate eval --data "g2p:$UNSEEN" --beam 5 \
          --threads "$threads" --checkpoint "$out/avg.safetensors"
      fi
    }
    g2p_seed() {
      seed_folder "$1"
      g2p_model "$rec" "$1"
    }
    # The recipe's model: 60 epochs, weight decay 0.1 and, for attention, a learned relative
    # position bias in every self-attention (mixers.md §2; another mixer has no such option).
    # BASELINE=1 gives the model docs/results.md measures each lever against instead: 40 epochs,
    # weight decay 0.01, no bias.
    position_bias=()
    if [ -n "${BASELINE:-}" ]; then
      epochs=40
      decay=0.01
    else
      epochs=60
      decay=0.1
      [ "$mixer" != attention ] || position_bias+=(--mixer-opt rel-bias=1)
      [ "$decoder" != attention ] || position_bias+=(--decoder-mixer-opt rel-bias=1)
    fi
    flags=("$@")
    for_each_seed g2p_seed
    logs=()
    averages=()
    for seed in $seeds; do
      seed_folder "$seed"
      averages+=("$out/avg.safetensors")
      logs+=("$rec/eval.txt")
      [ -z "${UNSEEN:-}" ] || logs+=("$rec/unseen.txt")
    done
    if [ ${#averages[@]} -gt 1 ]; then
      # The ensemble decodes on every core: no seed runs beside it.
      seed_folder "${seeds%% *}"
      step "$base-ensemble-eval.txt" "$mixlab" translate eval --data g2p --beam 5 \
        --threads "$ensemble_threads" --checkpoint "${averages[@]}"
      logs+=("$base-ensemble-eval.txt")
      if [ -n "${UNSEEN:-}" ]; then
        step "$base-ensemble-unseen.txt" "$mixlab" translate eval --data "g2p:$UNSEEN" --beam 5 \
          --threads "$ensemble_threads" --checkpoint "${averages[@]}"
        logs+=("$base-ensemble-unseen.txt")
      fi
    fi
    if [ -n "${DISTILL:-}" ]; then
      # Sequence-level distillation: the ensemble decodes every training word (JOBS parts side
      # by side), and one model learns those pronunciations (--train-targets) on every core.
      kd=$base-distill
      mkdir -p "$kd"
      if [ ! -s "$kd/targets.tsv" ]; then
        zcat data/g2p/g014b2b.train.gz | cut -f1 | awk '!seen[$0]++' >"$kd/words.txt"
        split -n "l/$jobs" -d "$kd/words.txt" "$kd/words-part-"
        pids=()
        for part in "$kd"/words-part-*; do
          commands+=("$mixlab translate run --beam 5 --batch 128 --threads $threads --checkpoint ${averages[*]} < $part > $part.out")
          "$mixlab" translate run --beam 5 --batch 128 --threads "$threads" \
            --checkpoint "${averages[@]}" <"$part" >"$part.out" 2>"$part.log" &
          pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid"; done
        cat "$kd"/words-part-*.out | paste "$kd/words.txt" - >"$kd/targets.tsv.partial"
        rm -f "$kd"/words-part-*
        mv "$kd/targets.tsv.partial" "$kd/targets.tsv"
      fi
      threads=$ensemble_threads
      g2p_model "$kd" "${seeds%% *}" --train-targets "$kd/targets.tsv"
      logs+=("$kd/eval.txt")
      [ -z "${UNSEEN:-}" ] || logs+=("$kd/unseen.txt")
    fi
    summary "${logs[@]}" ;;
  fashion)
    rec=${OUT:-runs/quality/$task-$mixer}
    out=$rec/run
    mkdir -p "$rec"
    step "$rec/log.txt" "$mixlab" classify train --data fashion-mnist --mixer "$mixer" --patch 4 \
      --dim 64 --heads 4 --layers 4 --batch 128 --epochs "${EPOCHS:-7}" --lr 2e-3 --warmup 400 \
      --weight-decay 0.05 --label-smoothing 0.1 --dropout 0.1 --threads 1 --quiet --out "$out" "$@"
    summary "$rec/log.txt" ;;
  scan)
    rec=${OUT:-runs/quality/$task-$mixer}
    out=$rec/run
    mkdir -p "$rec"
    step "$rec/log.txt" "$mixlab" translate train --data scan --split simple --mixer "$mixer" \
      --decoder-mixer "$decoder" --dim 64 --heads 4 --layers 2 --batch 64 --epochs "${EPOCHS:-30}" \
      --lr 1e-3 --warmup 400 --dropout 0.1 --threads 1 --quiet --out "$out" "$@"
    summary "$rec/log.txt" ;;
  *) echo "unknown task '$task': expected fashion-mnist, g2p, fashion or scan" >&2; exit 2 ;;
esac
