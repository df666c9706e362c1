#!/usr/bin/env bash
# Every command in the README's ```sh blocks runs as written, at small sizes, and does what the
# README says it does. Usage: readme_commands.sh MIXLAB_BINARY SOURCE_DIR
#  - `build/mixlab ...` lines run with the built binary in a scratch folder; a `train` gets small
#    sizes appended (the last value of a repeated flag wins) and a `study` a step cap; each
#    command's effect is checked (the files it writes, the lines it prints).
#  - `./scripts/run.sh` runs from a copy of the script with the build and the package install
#    stubbed out and the built binary in their place: it must print its run folder first and
#    train into it, a second invocation into a folder of its own.
#  - `./scripts/test.sh` runs from a copy with cmake, ctest and the package install stubbed: it
#    must configure, build and hand ctest its arguments (it is the suite's own runner, so the
#    suite is not run again from inside itself).
# A README command this script does not know fails the test, naming it.
set -euo pipefail
bin=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

small_train=(--steps 4 --dim 16 --layers 1 --heads 2 --batch 8 --eval-every 4 --threads 1)
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# The value of FLAG in a command line, e.g. flag_value --out "$cmd".
flag_value() { sed -n "s/.*$1 \([^ ]*\).*/\1/p" <<<"$2"; }

# Stubs for the scripts' build steps: cmake and ctest record their arguments.
mkdir -p stubs
for tool in cmake ctest; do
  printf '#!/bin/sh\necho "%s $*" >> "%s/calls.log"\n' "$tool" "$work" > "stubs/$tool"
  chmod +x "stubs/$tool"
done
script_copy() {  # a copy of the repository's scripts/ with install-deps.sh a no-op
  rm -rf repo && mkdir -p repo/scripts && cp "$src/scripts/$1" repo/scripts/
  printf '#!/bin/sh\nexit 0\n' > repo/scripts/install-deps.sh
  chmod +x repo/scripts/install-deps.sh
  mkdir -p repo/build && ln -sf "$bin" repo/build/mixlab
}

commands=0
while IFS= read -r line; do
  cmd=$(sed -E 's/[[:space:]]+#[[:space:]].*$//' <<<"$line")
  [[ -z "${cmd// /}" ]] && continue
  commands=$((commands + 1))
  echo "== $cmd"
  case "$cmd" in
    ./scripts/run.sh*)
      script_copy run.sh
      for n in 1 2; do
        out=$(cd repo && PATH="$work/stubs:$PATH" bash -c "${cmd#./} ${small_train[*]}" 2>&1) ||
          fail "$cmd exited with an error: $out"
        first=$(head -n 1 <<<"$out")
        [[ "$first" == "run folder: runs/scan-demo-attention-$n" ]] ||
          fail "$cmd (run $n) printed first '$first', not its run folder"
        [[ -f "repo/runs/scan-demo-attention-$n/best.safetensors" ]] ||
          fail "$cmd (run $n) wrote no checkpoint into runs/scan-demo-attention-$n"
      done
      ;;
    ./scripts/test.sh*)
      script_copy test.sh
      rm -f calls.log
      (cd repo && PATH="$work/stubs:$PATH" bash -c "${cmd#./} -R probe") >/dev/null 2>&1 ||
        fail "$cmd exited with an error"
      grep -q '^cmake --build' calls.log 2>/dev/null || fail "$cmd did not build"
      grep -q '^ctest .*--output-on-failure.* -R probe' calls.log 2>/dev/null ||
        fail "$cmd did not run ctest with its arguments"
      ;;
    *build/mixlab*)
      run=${cmd//build\/mixlab/$bin}
      case "$cmd" in
        *" train "*) run+=" ${small_train[*]}" ;;
        *" study "*) run+=" --steps 3" ;;
      esac
      if ! bash -c "$run" > out.txt 2> err.txt; then
        fail "$cmd exited with an error: $(tail -n 5 err.txt)"
        continue
      fi
      out_dir=$(flag_value --out "$cmd")
      case "$cmd" in
        *"mixlab mixers"*)
          grep -q '^attention ' out.txt && grep -q '^gmlp ' out.txt ||
            fail "$cmd did not list the mixers" ;;
        *" train "*)
          for f in config.ini model.json best.safetensors last.safetensors metrics.csv; do
            [[ -f "$out_dir/$f" ]] || fail "$cmd wrote no $out_dir/$f"
          done
          grep -q '^steps=4$' "$out_dir/config.ini" || fail "$cmd: the small size was not applied"
          ;;
        *" predict "*)
          grep -Eq '^[0-9]+' out.txt || fail "$cmd printed no class: $(cat out.txt)" ;;
        *" eval "*)
          grep -q '^test exact_match ' out.txt || fail "$cmd printed no test metrics" ;;
        *" run "*)
          grep -q 'I_' out.txt || fail "$cmd printed no translation: $(cat out.txt)" ;;
        *" inspect "*)
          [[ -f "$out_dir/index.html" && -f "$out_dir/mixing.safetensors" ]] ||
            fail "$cmd wrote no index.html and mixing.safetensors"
          ls "$out_dir"/*.svg >/dev/null 2>&1 || ls "$out_dir"/*/*.svg >/dev/null 2>&1 ||
            fail "$cmd wrote no heatmap" ;;
        *" study "*)
          [[ -f "$out_dir/report.md" && -f "$out_dir/report.html" ]] || fail "$cmd wrote no report"
          for m in attention fnet gmlp; do
            grep -q "$m" "$out_dir/report.md" 2>/dev/null || fail "$cmd: the report has no $m"
          done ;;
        *" export "*)
          ck=$(flag_value --checkpoint "$cmd")
          [[ -f "$out_dir" ]] && (($(stat -c %s "$out_dir") < $(stat -c %s "$ck"))) ||
            fail "$cmd wrote no weights file smaller than its checkpoint" ;;
        *) fail "README command not known to tests/readme_commands.sh: $cmd" ;;
      esac
      ;;
    *) fail "README command not known to tests/readme_commands.sh: $cmd" ;;
  esac
done < <(awk '/^```sh$/ { inside = 1; next } /^```/ { inside = 0 } inside' "$src/README.md")

((commands >= 10)) || fail "found only $commands commands in the README's sh blocks"
echo "$commands README commands run, $failures failed"
((failures == 0))
