#!/usr/bin/env bash
# bench/ab_step.sh against two stand-in binaries with known step times: the table must pair
# them round by round and give best old ÷ best new, pass each model's flags and the options on,
# and fail (exit 1, the run named) when a binary gives no median.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fake() {  # fake NAME MS: a bench_train_step that logs its arguments and reports MS
  cat >"$tmp/$1" <<SCRIPT
#!/usr/bin/env bash
echo "\$*" >>"$tmp/$1.args"
echo "mixlab ...: median step $2 ms"
echo "json: {\"median_ms\": $2, \"examples_per_s\": 1.0, \"params\": 1}"
SCRIPT
  chmod +x "$tmp/$1"
}
fail=0
check() {  # check WHAT CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

fake old 10.0
fake new 4.0
out=$("$root/bench/ab_step.sh" --rounds 2 --steps 7 --threads 1 "$tmp/old" "$tmp/new" translator gmlp)
rc=$?
echo "$out"
check "exit 0" test $rc -eq 0
check "two rounds per side and model" test "$(grep -c '^round' <<<"$out")" -eq 8
check "translator ratio 2.50" grep -q '^translator .*best old / best new: 2.50' <<<"$out"
check "gmlp ratio 2.50" grep -q '^gmlp .*best old / best new: 2.50' <<<"$out"
check "the classifier's flags" grep -q -- '--task classify --mixer gmlp --dim 128 --layers 4' "$tmp/new.args"
check "the translator's flags" grep -q -- '--task translate --device cpu --steps 7 --threads 1' "$tmp/old.args"
check "each side ran 4 times" test "$(wc -l <"$tmp/old.args")" -eq 4

printf '#!/usr/bin/env bash\nexit 3\n' >"$tmp/broken"
chmod +x "$tmp/broken"
out=$("$root/bench/ab_step.sh" --rounds 1 "$tmp/old" "$tmp/broken" translator)
rc=$?
echo "$out"
check "a broken binary fails the run" test $rc -eq 1
check "and is named" grep -q "FAILED (no median from $tmp/broken)" <<<"$out"
exit $fail
