#!/usr/bin/env bash
# mixlab against PyTorch eager on one training step on the GPU (bench/vs_torch.py --device cuda):
# the translator at d=128 and d=256 (3+3 blocks, batch 128, dropout 0.1) and the image
# classifier of the speed table (patch 4 = 49 tokens, d=128, 4 blocks, batch 128, dropout 0) with
# the attention, fnet, mlp-mixer and synth-dense mixers. First it checks that those classifiers
# are the same function on the GPU (bench/speed_table.py --check-only --device cuda: mixlab's
# initial weights loaded into PyTorch give mixlab's logits), then prints one line per model: both
# sides' examples per second, the ratio (above 1: mixlab is faster) and both peak device memories
# (mixlab's caching allocator's peak in use; torch.cuda.max_memory_allocated). About a minute on
# an H200: the processes' start-ups dominate, a step takes milliseconds.
#
# Usage: tests/gpu/train_vs_torch.sh BUILD_DIR
#   BUILD_DIR holds bench_train_step built with the CUDA backend (or an unpacked bundle of
#   tests/gpu/bundle.sh that has it: its lib/ is put on LD_LIBRARY_PATH); python3 on PATH has
#   PyTorch with CUDA. MIXLAB_VS_TORCH_STEPS: timed steps per side (default 50, after 3 warm-ups).
# Exit status: 0 every comparison ran, 1 one failed (a side's error, differing parameter counts
# or logits), 2 usage, 77 skipped (no GPU, or python3 has no PyTorch with CUDA).
set -uo pipefail
if (($# != 1)); then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  echo "train_vs_torch: skipped (python3 has no PyTorch with CUDA, or it sees no GPU)"
  exit 77
fi
if [[ ! -x "$1/bench_train_step" ]]; then
  echo "train_vs_torch: $1/bench_train_step not found (build the bench_train_step target)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
# Binaries built elsewhere (tests/gpu/bundle.sh's layout: BUILD_DIR/lib beside them) load their
# OpenBLAS/FFTW from there and the CUDA libraries from this machine's toolkit, as check.sh does.
[[ -d "$build/lib" ]] && export LD_LIBRARY_PATH="$build/lib:${LD_LIBRARY_PATH:-}"
if ldd "$build/bench_train_step" 2>/dev/null | grep 'not found' >/dev/null; then
  LD_LIBRARY_PATH="$("$root/tests/gpu/cuda_lib_path.sh")${LD_LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH
  if ldd "$build/bench_train_step" 2>/dev/null | grep 'not found'; then
    echo "FAIL: $build/bench_train_step misses the libraries above on this machine"
    exit 1
  fi
fi
steps=${MIXLAB_VS_TORCH_STEPS:-50}
mixers=(attention fnet mlp-mixer synth-dense)
vs_torch=$root/bench/vs_torch.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
start=$SECONDS

# ---- the same models: small classifiers, both sides on the GPU (speed_table.py's check) ----
if ! timeout 300 python3 "$root/bench/speed_table.py" --check-only --device cuda --python python3 \
  --build "$build" --mixers "$(IFS=,; echo "${mixers[*]}")" | grep -v '^# mixlab vs PyTorch'; then
  echo "FAIL same models: bench/speed_table.py --check-only --device cuda (above)"
  status=1
fi

# ---- the timings: one line per model ----
header_done=0
compare() {  # compare LABEL vs_torch-flags...
  local label=$1
  shift
  local out="$tmp/run.out"
  timeout 150 python3 "$vs_torch" --device cuda --build "$build" --steps "$steps" "$@" \
    >"$out" 2>&1
  local rc=$?
  if ((rc != 0)) || ! grep -q '^json: ' "$out"; then
    echo "FAIL $label (vs_torch.py exit $rc):"
    tail -n 8 "$out" | sed 's/^/  /'
    status=1
    return
  fi
  if ((!header_done)); then
    python3 - "$out" "$steps" <<'EOF'
import json, sys
r = json.loads([l for l in open(sys.argv[1]) if l.startswith("json: ")][-1][6:])
print(f"# training step on {r['device_name']}: mixlab vs PyTorch eager, median of {sys.argv[2]} "
      "timed steps each; ratio = mixlab/torch examples per second; peak device MiB: mixlab's "
      "allocator's peak in use / torch.cuda.max_memory_allocated; queued by the host: median "
      "time from a step's start to its last launch (near the step's time: the GPU waited for "
      "the host's launches)")
EOF
    header_done=1
  fi
  python3 - "$out" "$label" <<'EOF' || status=1
import json, sys
r = json.loads([l for l in open(sys.argv[1]) if l.startswith("json: ")][-1][6:])
def mib(n):
    return "n/a" if n is None else f"{n / 1024 / 1024:.0f}"
def ms(t):
    return "n/a" if t is None else f"{t:.2f}"
line = (f"{sys.argv[2]:<24} mixlab {r['mixlab_examples_per_s']:9.0f} ex/s ({r['mixlab_median_ms']:7.2f} ms)"
        f"  torch {r['torch_examples_per_s']:9.0f} ex/s ({r['torch_median_ms']:7.2f} ms)"
        f"  ratio {r['ratio']:5.2f}  peak device MiB mixlab {mib(r['mixlab_peak_device_bytes']):>6}"
        f" torch {mib(r['torch_peak_device_bytes']):>6}"
        f"  mixlab host waits/step {r.get('mixlab_host_waits_per_step', 'n/a')}"
        f"  queued by the host (ms) mixlab {ms(r.get('mixlab_host_queue_ms'))}"
        f" torch {ms(r.get('torch_host_queue_ms'))}")
if not r["params_match"]:
    line += f"  FAIL: parameters differ ({r['mixlab_params']} / {r['torch_params']})"
print(line, flush=True)
sys.exit(0 if r["params_match"] else 1)
EOF
}

compare "translator d=128" --task translate
compare "translator d=256" --task translate --dim 256
for m in "${mixers[@]}"; do
  compare "classifier $m" --task classify --mixer "$m" --dim 128 --layers 4 --batch 128 \
    --patch 4 --dropout 0
done
echo "# $((SECONDS - start)) s; $([[ $status == 0 ]] && echo "all comparisons ran" || echo FAILED)"
exit $status
