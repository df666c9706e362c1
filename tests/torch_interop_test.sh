#!/usr/bin/env bash
# Optional: scripts/torch_interop.py decodes an exported attention translator inside
# torch.nn.Transformer exactly as `mixlab translate run` does (CTest: $1 = the mixlab binary).
# The Python is the first of $MIXLAB_PYTHON, the python3 on PATH and /usr/bin/python3 (Debian's,
# where apt's python3-torch goes) that imports torch; without one it exits 77 (CTest SKIP).
# Nothing here installs torch.
set -euo pipefail
mixlab=$1
script=$(dirname "$0")/../scripts/torch_interop.py
python=
for candidate in ${MIXLAB_PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c "import torch" 2> /dev/null; then python=$candidate; break; fi
done
[[ -n $python ]] || { echo "no python3 here imports torch: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export MIXLAB_NUM_THREADS=1

# Reverse 1-3 words; two blocks each side, untied head, learned positions.
words=(a b c d e)
for i in $(seq 0 299); do
  len=$((1 + i % 3)); src=(); tgt=()
  for ((t = 0; t < len; t++)); do src+=("${words[$(((i * 7 + t * 3) % 5))]}"); done
  for ((t = len - 1; t >= 0; t--)); do tgt+=("${words[$(((i * 7 + t * 3) % 5))]}"); done
  printf '%s\t%s\n' "${src[*]}" "${tgt[*]}"
done > "$dir/pairs.tsv"
"$mixlab" translate train --data "$dir/pairs.tsv" --dim 16 --heads 2 --layers 2 --batch 16 \
  --steps 60 --lr 3e-3 --warmup 5 --dropout 0 --quiet --out "$dir/run" > /dev/null 2>&1
{ cut -f1 "$dir/pairs.tsv" | head -40; echo "a z b"; echo "e e e e"; } > "$dir/inputs.txt"

for dtype in f32 f16; do
  "$mixlab" export --checkpoint "$dir/run/best.safetensors" --out "$dir/$dtype.safetensors" \
    --dtype $dtype > /dev/null
  "$mixlab" translate run --checkpoint "$dir/$dtype.safetensors" < "$dir/inputs.txt" > "$dir/$dtype.mixlab"
  # A model that decodes nothing would agree trivially: require real outputs first.
  nonempty=$(grep -c . "$dir/$dtype.mixlab" || true)
  ((nonempty >= 30)) || { echo "FAIL: mixlab decoded only $nonempty non-empty lines"; exit 1; }
  echo "$dtype export:"
  "$python" "$script" --checkpoint "$dir/$dtype.safetensors" --inputs "$dir/inputs.txt" \
    --expected "$dir/$dtype.mixlab"
done
