#!/usr/bin/env bash
# `mixlab export` through the app (CTest runs it with the mixlab binary as $1): a translator and a
# classifier are trained for a few steps, exported as f32 and f16, and every command that takes a
# checkpoint is given the exports. Checks: the f32 export is at most 40% of best.safetensors and
# `translate run`, `translate eval`, `classify eval` and `classify predict` print exactly what they
# print from best.safetensors; the f16 export loads everywhere (it decodes within rounding: the
# number of identical lines is reported, not required); `average` takes exports; a refused
# export (--out = --checkpoint, or an unknown --dtype) exits 2 and changes no file.
set -euo pipefail
mixlab=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export MIXLAB_NUM_THREADS=1

fail() { echo "FAIL: $*" >&2; exit 1; }
same() {  # same LABEL FILE_A FILE_B
  cmp -s "$2" "$3" || { diff "$2" "$3" | head -20 >&2; fail "$1 differs"; }
  echo "ok: $1 identical ($(wc -l < "$2") lines)"
}

# ---- translator: reverse 1-3 words ----
words=(a b c d)
for i in $(seq 0 199); do
  len=$((1 + i % 3)); src=(); tgt=()
  for ((t = 0; t < len; t++)); do src+=("${words[$(((i + t) % 4))]}"); done
  for ((t = len - 1; t >= 0; t--)); do tgt+=("${words[$(((i + t) % 4))]}"); done
  printf '%s\t%s\n' "${src[*]}" "${tgt[*]}"
done > "$dir/pairs.tsv"
"$mixlab" translate train --data "$dir/pairs.tsv" --dim 16 --heads 2 --layers 1 --batch 16 \
  --steps 40 --lr 3e-3 --warmup 5 --dropout 0 --quiet --out "$dir/t" > /dev/null
"$mixlab" export --checkpoint "$dir/t/best.safetensors" --out "$dir/t32.safetensors"
"$mixlab" export --checkpoint "$dir/t/best.safetensors" --out "$dir/t16.safetensors" --dtype f16

best=$(stat -c %s "$dir/t/best.safetensors"); exported=$(stat -c %s "$dir/t32.safetensors")
((exported * 10 <= best * 4)) || fail "export is $exported bytes, over 40% of $best"
echo "ok: export is $exported bytes, $((100 * exported / best))% of best.safetensors ($best)"

cut -f1 "$dir/pairs.tsv" > "$dir/inputs.txt"
for ck in t/best t32 t16; do
  "$mixlab" translate run --checkpoint "$dir/$ck.safetensors" < "$dir/inputs.txt" > "$dir/$(basename $ck).run"
  "$mixlab" translate eval --data "$dir/pairs.tsv" --beam 2 --checkpoint "$dir/$ck.safetensors" \
    | grep -v -i -E "checkpoint|seconds|[0-9.]+ s\b" > "$dir/$(basename $ck).eval" || true
done
same "translate run, best vs f32 export" "$dir/best.run" "$dir/t32.run"
same "translate eval, best vs f32 export" "$dir/best.eval" "$dir/t32.eval"
[[ $(wc -l < "$dir/t16.run") == $(wc -l < "$dir/best.run") ]] || fail "f16 run lost lines"
echo "f16: $(paste -d'\n' "$dir/best.run" "$dir/t16.run" | paste - - | awk -F'\t' '$1 == $2' | wc -l)" \
  "of $(wc -l < "$dir/best.run") lines identical to best.safetensors"

"$mixlab" average --out "$dir/avg.safetensors" "$dir/t32.safetensors" "$dir/t16.safetensors" > /dev/null
"$mixlab" translate run --checkpoint "$dir/avg.safetensors" < "$dir/inputs.txt" > "$dir/avg.run"
[[ $(wc -l < "$dir/avg.run") == 200 ]] || fail "the average of exports does not decode"
echo "ok: average takes exports"

before=$(sha256sum < "$dir/t/best.safetensors")
set +e
"$mixlab" export --checkpoint "$dir/t/best.safetensors" --out "$dir/t/best.safetensors" 2> /dev/null
code=$?
set -e
[[ $code == 2 ]] || fail "export onto its input exited $code, not 2"
[[ $(sha256sum < "$dir/t/best.safetensors") == "$before" ]] || fail "the refused export changed the checkpoint"
echo "ok: export onto its own input refused (exit 2), checkpoint unchanged"
set +e
"$mixlab" export --checkpoint "$dir/t/best.safetensors" --out "$dir/bf16.safetensors" --dtype bf16 2> /dev/null
code=$?
set -e
[[ $code == 2 && ! -e $dir/bf16.safetensors ]] || fail "--dtype bf16: exit $code, or a file was written"
echo "ok: an unknown --dtype exits 2 and writes nothing"

# ---- classifier: sentiment of a few words ----
pos=("good great fine" "great good" "fine good nice" "nice great")
neg=("bad awful poor" "poor bad" "awful poor sad" "sad bad")
for i in $(seq 0 39); do printf 'pos\t%s\nneg\t%s\n' "${pos[$((i % 4))]}" "${neg[$((i % 4))]}"; done > "$dir/data.tsv"
"$mixlab" classify train --data "$dir/data.tsv" --dim 16 --heads 2 --layers 1 --batch 8 --steps 20 \
  --lr 3e-3 --warmup 5 --dropout 0 --quiet --out "$dir/c" > /dev/null
"$mixlab" export --checkpoint "$dir/c/best.safetensors" --out "$dir/c32.safetensors" > /dev/null
printf 'good great\nbad poor\nfine sad\n' > "$dir/words.txt"
for ck in c/best c32; do
  "$mixlab" classify predict --checkpoint "$dir/$ck.safetensors" < "$dir/words.txt" > "$dir/$(basename $ck).predict"
  "$mixlab" classify eval --data "$dir/data.tsv" --checkpoint "$dir/$ck.safetensors" \
    | grep -i "accuracy" > "$dir/$(basename $ck).ceval"
done
same "classify predict, best vs f32 export" "$dir/best.predict" "$dir/c32.predict"
same "classify eval, best vs f32 export" "$dir/best.ceval" "$dir/c32.ceval"
