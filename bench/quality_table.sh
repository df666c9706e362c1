#!/usr/bin/env bash
# Tabulates the quality runs that bench/quality.sh left under runs/quality/ (or the folders
# given as arguments) as Markdown rows: run, parameters, wall time, test metrics, command.
# The numbers are read from each run's own log.txt, so docs/results.md's tables can be checked
# against (or regenerated from) what actually ran.
#
#   bench/quality_table.sh                   every finished run under runs/quality/
#   bench/quality_table.sh runs/quality/g2p-*   only these
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && dirs=(runs/quality/*/)

echo "| run | parameters | wall time | test metrics | command |"
echo "|---|---|---|---|---|"
for dir in "${dirs[@]}"; do
  dir=${dir%/}
  log=$dir/log.txt
  # A run that has not reached its summary yet has no "test ..." rows: skip it.
  [ -f "$log" ] && grep -q '^test ' "$log" || continue
  params=$(awk '$1 == "parameters" { print $2; exit }' "$log")
  # A recipe rerun after an interruption resumed its run: one /usr/bin/time line per part.
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { w = w (w == "" ? "" : " + ") $2 } END { print w }' "$log")
  # The headline metrics of each task; exact match and accuracy as percentages.
  metrics=$(awk '
    $1 == "test" && $2 == "accuracy"    { out = out sprintf("accuracy %.2f%% ", 100 * $3) }
    $1 == "test" && $2 == "exact_match" { out = out sprintf("exact match %.2f%% ", 100 * $3) }
    $1 == "test" && $2 == "wer"         { out = out sprintf("WER %.2f%% ", 100 * $3) }
    $1 == "test" && $2 == "per"         { out = out sprintf("PER %.2f%% ", 100 * $3) }
    END { sub(/ $/, "", out); print out }' "$log")
  command=$(sed -e 's/^command: //' -e 's/ *$//' "$dir/command.txt" 2>/dev/null || echo "?")
  echo "| $(basename "$dir") | $params | $wall | $metrics | \`$command\` |"
done
