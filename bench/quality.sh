#!/usr/bin/env bash
# Quality runs (benchmarks, not tests): train the reference models to their targets and print
# the final metrics. Each run's log, checkpoints, metrics.csv and curves.svg go to runs/quality/.
#
#   bench/quality.sh fashion [flags]   Fashion-MNIST classifier (MIXER=attention by default)
#   bench/quality.sh scan [flags]      SCAN simple split translator (MIXER / DECODER)
#   bench/quality.sh g2p [flags]       CMUdict g014b2b grapheme-to-phoneme translator
#
# Extra flags go to mixlab (e.g. --epochs 3). Results and commands are tabulated in README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MIXLAB_BUILD_DIR:-build}
cmake --build "$build" --target mixlab -j "$(nproc)" >/dev/null
mixer=${MIXER:-attention}
decoder=${DECODER:-$mixer}
task=${1:?usage: bench/quality.sh fashion|scan|g2p [flags]}
shift
out=${OUT:-runs/quality/$task-$mixer}
mkdir -p "$out"
case "$task" in
  fashion)
    cmd=("$build/mixlab" classify train --data fashion-mnist --mixer "$mixer" --patch 4 --dim 64
         --heads 4 --layers 4 --batch 128 --epochs ${EPOCHS:-7} --lr 2e-3 --warmup 400 --weight-decay 0.05
         --label-smoothing 0.1 --dropout 0.1 --threads 1 --quiet --out "$out") ;;
  scan)
    cmd=("$build/mixlab" translate train --data scan --split simple --mixer "$mixer"
         --decoder-mixer "$decoder" --dim 64 --heads 4 --layers 2 --batch 64 --epochs ${EPOCHS:-30}
         --lr 1e-3 --warmup 400 --dropout 0.1 --threads 1 --quiet --out "$out") ;;
  g2p)
    cmd=("$build/mixlab" translate train --data g2p --mixer "$mixer" --decoder-mixer "$decoder"
         --dim 128 --heads 4 --layers 3 --batch 128 --epochs ${EPOCHS:-8} --lr 1e-3 --warmup 1000
         --dropout 0.1 --label-smoothing 0.1 --beam 1 --threads 1 --quiet --out "$out") ;;
  *) echo "unknown task '$task'" >&2; exit 2 ;;
esac
echo "command: ${cmd[*]} $*" | tee "$out/command.txt"
/usr/bin/time -v "${cmd[@]}" "$@" 2>&1 | tee "$out/log.txt"
