#!/usr/bin/env bash
# Fails, naming each file and line, where a tracked C++ or CUDA source differs from what
# clang-format makes of it with the project's .clang-format. scripts/ci-extra.sh runs it first
# (its clang-format comes from scripts/install-deps.sh --with-clang); run it by hand before a
# commit, or `clang-format -i FILE` to fix a file.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format.sh: clang-format is not installed" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if clang-format --dry-run -Werror "${files[@]}"; then
  echo "clang-format: ${#files[@]} files as .clang-format says ($(clang-format --version))"
else
  echo "check-format.sh: the files above are not formatted (clang-format -i FILE fixes one)" >&2
  exit 1
fi
