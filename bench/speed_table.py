#!/usr/bin/env python3
"""The speed table: mixlab against PyTorch eager for every mixer's classifier and for the
translator at two widths, at each thread count (docs/speed.md explains every column).

Each row is one bench/vs_torch.py comparison (same model, batch, dropout, threads and data on
both sides, each side in its own process). Rows whose parameter counts disagree are marked and
make the exit status 1; a mixer mixlab registers but bench/torch_models.py does not know gets a
row saying so (exit status 1 too), so a new mixer cannot silently drop out of the table.

    python3 bench/speed_table.py [--quick] [--threads 1,2] [--mixers a,b] [--build DIR]
        [--python PATH] [--steps K] [--rounds R] [--markdown]

Full run: the speed targets' classifier (patch 4 = 49 tokens, d=128, 4 blocks, batch 128,
dropout 0) for every mixer, the translator at d=128 and d=256 (3+3 layers, batch 128,
dropout 0.1), threads 1 and 2. --quick: tiny sizes, two mixers, a few steps, plus the
check that every mixer's classifier is the same function on both sides: equal parameter counts,
and mixlab's initial weights loaded into the PyTorch model give mixlab's logits (--check-only:
that check alone, of the --mixers given or all; with --device cuda both sides on the GPU).
The quick timings check the pipeline end to end; their numbers mean little.
After the table, one line per speed target says whether this run's rows met it
(bench/speed_targets.py).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import speed_targets  # noqa: E402
import vs_torch  # noqa: E402

QUICK_MIXERS = ["attention", "fnet"]


def kernel_registers(build):
    """The vector registers mixlab's CPU kernels were built for (AVX-512, AVX2 or generic), which
    decide its speed as much as the CPU does; None if bench_train_step cannot say."""
    try:
        out = subprocess.run([os.path.join(build, "bench_train_step"), "--kernels"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    answer = out.stdout.strip()
    return answer if out.returncode == 0 and re.fullmatch(r"[\w-]+", answer) else None


def registered_mixers(build):
    out = subprocess.run([os.path.join(build, "bench_train_step"), "--list-mixers"],
                         check=True, capture_output=True, text=True).stdout
    return [line for line in out.split() if line]


def torch_knows(python, mixer):
    code = ("import sys; sys.path.insert(0, %r); import torch_models as t; "
            "t.make_mixer(%r, 8, 2, 4, {}, 32)") % (os.path.dirname(os.path.abspath(__file__)), mixer)
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def check_same_models(args, tmp):
    """Every registered mixer's classifier (--check-only: those of --mixers, if given), built
    small on both sides (on --device): the parameter counts must
    agree, and mixlab's initial weights loaded into the PyTorch model must give mixlab's logits
    on the same images. Prints one line; returns the number of mixers that fail."""
    d, layers, batch = 32, 2, 4
    mixers = (args.mixers.split(",") if args.check_only and args.mixers else
              registered_mixers(args.build))  # --quick checks every mixer
    device = ["--device", args.device] if args.device != "cpu" else []
    images = os.path.join(tmp, "check-images.bin")
    vs_torch.write_images(images, batch, seed=1)
    pairs, counts = [], {}
    for i, m in enumerate(mixers):
        dump = os.path.join(tmp, f"model-{i}.bin")
        out = subprocess.run([os.path.join(args.build, "bench_train_step"), "--task", "classify",
                              "--mixer", m, "--dim", str(d), "--layers", str(layers), "--batch",
                              str(batch), "--images", images, "--steps", "1", "--threads", "1",
                              "--dump-model", dump] + device,
                             check=True, capture_output=True, text=True).stdout
        counts[m] = vs_torch.parse_json_line(out, "bench_train_step")["params"]
        pairs.append(f"{m}={dump}")
    out = subprocess.run([args.python, vs_torch.__file__, "--dim", str(d), "--layers", str(layers),
                          "--batch", str(batch), "--images", images] + device +
                         ["--check-models"] + pairs,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the PyTorch model check failed:\n{out.stderr}")
    report = vs_torch.parse_json_line(out.stdout, "the PyTorch model check")
    bad, worst = [], 0.0
    for m in mixers:
        r = report[m]
        if "error" in r:
            bad.append(f"{m} ({r['error']})")
        elif r["params"] != counts[m]:
            bad.append(f"{m} (parameters: mixlab {counts[m]}, PyTorch {r['params']})")
        elif not r["max_diff"] <= 1e-4 * max(1.0, r["scale"]):
            bad.append(f"{m} (logits differ by {r['max_diff']:.2e})")
        else:
            worst = max(worst, r["max_diff"])
    print(f"# same models (d={d}, {layers} blocks, mixlab's weights in PyTorch"
          f"{', both on ' + args.device if device else ''}): "
          f"{len(mixers) - len(bad)} of {len(mixers)} mixers have equal parameter counts and "
          f"logits (largest difference {worst:.1e})" + ("; FAIL: " + "; ".join(bad) if bad else ""))
    return len(bad)


def configurations(args):
    """(label, flags) per model, in table order."""
    if args.quick:
        cls = dict(dim=32, layers=1, batch=16, patch=4, steps=args.steps or 3)
        tr = [dict(dim=32, layers=1, batch=16, len=12, steps=args.steps or 3),
              dict(dim=64, layers=1, batch=16, len=12, steps=args.steps or 3)]
    else:
        cls = dict(dim=128, layers=4, batch=128, patch=4, steps=args.steps or 20)
        tr = [dict(dim=128, layers=3, batch=128, len=12, steps=args.steps or 20),
              dict(dim=256, layers=3, batch=128, len=12, steps=args.steps or 20)]
    models = [(f"translator d={t['dim']}", dict(t, task="translate", mixer="attention", patch=4,
                                                dropout=0.1)) for t in tr]
    mixers = args.mixers.split(",") if args.mixers else (
        QUICK_MIXERS if args.quick else registered_mixers(args.build))
    models += [(f"classifier {m}", dict(cls, task="classify", mixer=m, len=12, dropout=0.0))
               for m in mixers]
    return models


def mib(kib):
    return f"{kib / 1024:.0f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, two mixers, a few steps")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--mixers", default="", help="comma-separated classifier mixers (default: all)")
    p.add_argument("--steps", type=int, default=0, help="timed steps per side (default 20; quick 3)")
    p.add_argument("--rounds", type=int, default=0,
                   help="timings per side, alternating, fastest kept (default 2; quick 1)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--check-only", action="store_true",
                   help="only check that both sides build the same models (no timings)")
    p.add_argument("--device", default="cpu",
                   help="--check-only on this device, both sides (cuda: tests/gpu/train_vs_torch.sh)")
    vs_torch.add_run_flags(p)
    args = p.parse_args()
    if args.device != "cpu" and not args.check_only:
        p.error("--device is for --check-only: the GPU timings are tests/gpu/train_vs_torch.sh's")
    threads = [int(t) for t in args.threads.split(",")]
    started = time.time()
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    registers = kernel_registers(args.build)
    print(f"# mixlab vs PyTorch {version} eager, {cpu}, {os.cpu_count()} CPUs"
          f"{f', mixlab CPU kernels {registers}' if registers else ''}"
          f"{' (--quick: tiny sizes, numbers not meaningful)' if args.quick else ''}")
    with tempfile.TemporaryDirectory() as tmp:
        failures = check_same_models(args, tmp) if args.quick or args.check_only else 0
    if args.check_only:
        return 1 if failures else 0
    header = ["model", "thr", "mixlab ex/s", "torch ex/s", "ratio", "matmul %", "kernels %",
              "next kernel", "mixlab MiB", "torch MiB", "torch lib MiB", "params"]
    widths = [34, 3, 11, 10, 5, 8, 9, 20, 10, 9, 13, 9]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))))
    with tempfile.TemporaryDirectory() as tmp:
        images = os.path.join(tmp, "images.bin")
        written_for = None
        scored = []  # the timed rows, for the speed targets after the table
        for label, flags in configurations(args):
            known = flags["task"] == "translate" or torch_knows(args.python, flags["mixer"])
            for n in threads:
                if not known:
                    cells = [label, str(n), "-", "-", "-", "-", "-", "no PyTorch model", "-", "-", "-",
                             "-"]
                    failures += 1
                else:
                    if flags["task"] == "classify" and written_for != flags["batch"]:
                        vs_torch.write_images(images, flags["batch"])
                        written_for = flags["batch"]
                    row = vs_torch.compare(SimpleNamespace(
                        **flags, threads=n, images=images, build=args.build, python=args.python,
                        rounds=args.rounds or (1 if args.quick else 2)))
                    m, t = row["mixlab"], row["torch"]
                    params = str(m["params"]) if row["params_match"] else \
                        f"DIFFER {m['params']}/{t['params']}"
                    failures += not row["params_match"]
                    scored.append(speed_targets.row(label, n, row["ratio"], row["products_share"],
                                                    m["examples_per_s"], m["peak_rss_kib"],
                                                    t["peak_rss_kib"], row["kernel_share"]))
                    cells = [label, str(n), f"{m['examples_per_s']:.0f}", f"{t['examples_per_s']:.0f}",
                             f"{row['ratio']:.2f}", f"{100 * row['products_share']:.0f}",
                             f"{100 * row['kernel_share']:.0f}", row["top_other"],
                             mib(m["peak_rss_kib"]), mib(t["peak_rss_kib"]),
                             mib(t["rss_after_import_kib"]), params]
                if args.markdown:
                    print("| " + " | ".join(cells) + " |", flush=True)
                else:
                    print("  ".join(c.rjust(w) if i else c.ljust(w)
                                    for i, (c, w) in enumerate(zip(cells, widths))), flush=True)
    print(f"# {time.time() - started:.0f} s; ratio = mixlab/torch examples per second "
          f"(above 1: mixlab is faster); matmul % = share of mixlab's kernel time in matrix "
          f"products, in the product kernels and inside the fused kernels (MIXLAB_DEBUG's two "
          f"tables); kernels % = in whole product kernels only, a fused core counted as none "
          f"(FNet's, the convolutions' and the long convolutions' classifiers: both with their "
          f"own kernels, "
          f"{', '.join(sorted(set(k for ks in vs_torch.MIXER_OWN_KERNELS.values() for k in ks)))})")
    print("# the speed targets in this run (one run's rows: on a shared machine single ratios move"
          " by 20% between runs)" if not args.quick else
          "# the speed targets scored on this run's rows (--quick: tiny models, not the targets';"
          " these verdicts only show that the scoring runs)")
    for line in speed_targets.score(scored):
        print(f"#   {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as error:  # a side failed: say which and why, without a traceback
        sys.exit(f"speed_table.py: {error}")
