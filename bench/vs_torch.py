#!/usr/bin/env python3
"""mixlab against PyTorch eager on one training step of the same model, same threads.

One comparison: the translator (bench_train_step's pre-LN attention encoder-decoder on
synthetic batches whose lengths vary like CMUdict words) or the image classifier with any mixer
(Fashion-MNIST-shaped random images this script writes once, so both sides train on the same
bytes). Both sides take the same step: label-smoothed cross-entropy (0.1), gradient clipping at
1, AdamW, the same batch, dropout and thread count; each side runs in its own process, so each
peak RSS is that training's alone. It prints both sides' median step, the ratio mixlab / PyTorch
in examples per second (above 1: mixlab is faster), the share of mixlab's kernel time spent in
matrix products over the timed steps (from a second, shorter mixlab run under MIXLAB_DEBUG=1:
the product kernels, and the products inside the fused kernels that its second table times;
the share in whole product kernels alone is printed beside it) and both parameter counts,
which must agree. MIXLAB_ATTENTION_CORE=math in the environment runs mixlab's side with its
attention cores unfused (nn/attention_core.h).

    python3 bench/vs_torch.py [--task translate|classify] [--mixer NAME] [--threads N]
        [--dim D] [--layers L] [--batch B] [--len T] [--patch P] [--dropout R] [--steps K]
        [--device cpu|cuda]

--device cuda runs both sides on the GPU (model, batch and optimizer state there; PyTorch in
full FP32, no TF32, as mixlab's cuBLAS calls): each timed step starts and ends with a device
synchronisation on both sides, the peak device memory of each (mixlab's caching allocator's
peak bytes in use; torch.cuda.max_memory_allocated) is printed beside the host RSS, the products
share is "n/a" (MIXLAB_DEBUG's kernel table times the host's calls, not the GPU's kernels) and a
last `json:` line holds the row (tests/gpu/train_vs_torch.sh reads it).

bench/speed_table.py runs this for every mixer and both translator sizes and prints the table
(scripts/bench-speed.sh sets up PyTorch and runs it). PyTorch is only a baseline here, never a
dependency of the engine; bench/torch_models.py holds its models.
"""
import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Steps of the MIXLAB_DEBUG run; its kernel table counts these only, not bench_train_step's 3
# warm-ups before them (their first touches of fresh memory would be charged to other kernels).
MIXLAB_DEBUG_STEPS = 5


def parse_json_line(out, who):
    for line in out.splitlines():
        if line.startswith("json: "):
            return json.loads(line[len("json: "):])
    raise RuntimeError(f"{who} printed no 'json:' line:\n{out}")


def write_images(path, batch, seed=0):
    """Fashion-MNIST-shaped random data: float32 pixels in [0, 1) [B,1,28,28], then int32
    labels in [0, 10), little-endian; bench_train_step --images reads the same bytes."""
    import random
    import struct
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{batch * 784}f", *(rng.random() for _ in range(batch * 784))))
        f.write(struct.pack(f"<{batch}i", *(rng.randrange(10) for _ in range(batch))))


def read_images(path, batch):
    import torch
    with open(path, "rb") as f:
        data = f.read()
    pixels = torch.frombuffer(bytearray(data[:batch * 784 * 4]), dtype=torch.float32)
    labels = torch.frombuffer(bytearray(data[batch * 784 * 4:]), dtype=torch.int32)
    return pixels.view(batch, 1, 28, 28), labels.long()


# ---- the PyTorch side: runs in a worker process of its own (--worker) ----

def current_rss_kib():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


def torch_worker(args):
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)  # nested-tensor and numpy notices
    import torch
    rss_after_import = current_rss_kib()  # the library's own footprint, before any model
    from torch import nn
    sys.path.insert(0, HERE)
    import torch_models

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    device = torch_device(torch, args)
    if args.task == "translate":
        model = torch_models.Translator(args.dim, args.layers, args.len, args.dropout).to(device)
        src, tgt = (t.to(device)
                    for t in torch_models.synthetic_translation_batch(args.batch, args.len))
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)

        def loss():
            logits = model(src, tgt_in)
            return loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
    else:
        model = torch_models.Classifier(args.mixer, args.dim, args.layers, args.patch,
                                        args.dropout).to(device)
        images, labels = (t.to(device) for t in read_images(args.images, args.batch))
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)

        def loss():
            return loss_fn(model(images), labels)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    # On a GPU the host only queues kernels: wait for them before starting and before stopping
    # the clock, as bench_train_step does.
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times, queue_times = [], []  # queue: until the last launch, before the closing sync
    for step in range(args.steps + 3):  # 3 warm-up steps, like bench_train_step
        sync()
        t0 = time.perf_counter()
        loss().backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        queued = time.perf_counter()
        sync()
        if step >= 3:
            times.append(time.perf_counter() - t0)
            queue_times.append(queued - t0)
    median = statistics.median(times)
    report = {
        "median_ms": median * 1e3, "examples_per_s": args.batch / median,
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "rss_after_import_kib": rss_after_import,
        "threads": torch.get_num_threads(), "version": torch.__version__}
    if device.type == "cuda":
        report.update(device=str(device), device_name=torch.cuda.get_device_name(device),
                      host_queue_ms=statistics.median(queue_times) * 1e3,
                      peak_device_bytes=torch.cuda.max_memory_allocated(device),
                      peak_device_reserved_bytes=torch.cuda.max_memory_reserved(device))
    print("json: " + json.dumps(report))


def torch_device(torch, args):
    """The device of --device; on a GPU, products in full FP32 (no TF32), as mixlab's."""
    device = torch.device(getattr(args, "device", "cpu"))
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"--device {args.device}: this PyTorch ({torch.__version__}) sees "
                               "no CUDA GPU")
        torch.set_float32_matmul_precision("highest")
    return device


# ---- the same function: mixlab's initial weights loaded into the PyTorch model ----

NAME_REWRITES = [  # mixlab's parameter paths -> bench/torch_models.py's
    (r"^encoder\.layers\.(\d+)\.", r"blocks.\1."), (r"^encoder\.final_norm\.(ln|affine)\.", "final_norm."),
    (r"\.(norm\d)\.(ln|affine)\.", r".\1."), (r"\.ffn\.fc1\.", ".ffn.0."), (r"\.ffn\.fc2\.", ".ffn.2."),
    (r"\.(scale\d)\.gamma$", r".\1"), (r"^embed\.proj\.", "embed."), (r"^positions\.weight$", "positions")]


def torch_name(mixlab_name):
    for pattern, replacement in NAME_REWRITES:
        mixlab_name = re.sub(pattern, replacement, mixlab_name)
    return mixlab_name


def read_dump(path):
    """bench_train_step --dump-model: {torch name: tensor}, and mixlab's logits."""
    import torch
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        data = f.read()
    values = torch.frombuffer(bytearray(data), dtype=torch.float32)
    tensors, offset = {}, 0
    for t in header["tensors"] + [{"name": "logits", "shape": header["logits_shape"]}]:
        n = math.prod(t["shape"])
        tensors[t["name"]] = values[offset:offset + n].view(t["shape"]).clone()
        offset += n
    logits = tensors.pop("logits")
    return {torch_name(k): v for k, v in tensors.items()}, logits


def check_same_models(args):
    """For each MIXER=DUMP pair: load mixlab's weights into the PyTorch classifier (every tensor
    must find its place, and every PyTorch tensor must be given), run the batch, and report the
    largest logit difference. Prints one json line: {mixer: {"params", "max_diff", "error"}}."""
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)
    import torch
    sys.path.insert(0, HERE)
    import torch_models
    device = torch_device(torch, args)
    images = read_images(args.images, args.batch)[0].to(device)
    report = {}
    for pair in args.check_models:
        mixer, path = pair.split("=", 1)
        try:
            model = torch_models.Classifier(mixer, args.dim, args.layers, args.patch, 0.0)
            weights, mixlab_logits = read_dump(path)
            model.load_state_dict(weights, strict=True)
            model.to(device)
            with torch.no_grad():
                diff = (model.eval()(images).cpu() - mixlab_logits).abs().max().item()
            report[mixer] = {"params": sum(p.numel() for p in model.parameters()),
                             "max_diff": diff, "scale": mixlab_logits.abs().max().item()}
        except (KeyError, RuntimeError, ValueError) as error:
            report[mixer] = {"error": str(error).splitlines()[0][:300]}
    print("json: " + json.dumps(report))


# ---- both sides, from the calling process ----

def common_flags(args):
    flags = ["--task", args.task, "--threads", args.threads, "--dim", args.dim,
             "--layers", args.layers, "--batch", args.batch, "--dropout", args.dropout,
             "--steps", args.steps]
    if args.task == "translate":
        flags += ["--len", args.len]
    else:
        flags += ["--mixer", args.mixer, "--patch", args.patch, "--images", args.images]
    if on_gpu(args):  # the CPU's command lines stay as they were
        flags += ["--device", args.device]
    return [str(f) for f in flags]


def on_gpu(args):
    """--device cuda (speed_table.py's rows have no device: the CPU)."""
    return getattr(args, "device", "cpu") != "cpu"


def run_mixlab(args, debug):
    exe = os.path.join(args.build, "bench_train_step")
    flags = common_flags(args)
    env = dict(os.environ)
    env.pop("MIXLAB_DEBUG", None)
    if debug:
        env["MIXLAB_DEBUG"] = "1"
        flags[flags.index("--steps") + 1] = str(MIXLAB_DEBUG_STEPS)
    done = subprocess.run([exe] + flags, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(flags)} failed ({done.returncode}):\n{done.stderr}")
    return done


def debug_table(stderr, title, pattern):
    """The matches of `pattern` on the lines after the one holding `title`: the rows of one of
    the tables MIXLAB_DEBUG=1 prints at exit (backends/tracing_backend.cpp)."""
    rows, in_table = [], False
    for line in stderr.splitlines():
        if title in line:
            in_table = True
            continue
        m = re.match(pattern, line.strip())
        if in_table and m:
            rows.append(m)
    return rows


def kernel_shares(stderr):
    """{kernel: ms} from the table of kernel times."""
    times = {}
    for m in debug_table(stderr, "kernel time by kernel",
                         r"^(\S+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%$"):
        times[m.group(1)] = times.get(m.group(1), 0.0) + float(m.group(3))
    if not times:
        raise RuntimeError("MIXLAB_DEBUG=1 printed no kernel table:\n" + stderr)
    return times


def products_inside(stderr):
    """{kernel: ms} of the second table: the time fused kernels (the attention cores, linear
    attention) spend in their own matrix products, from cycle counters inside them
    (backends/kernel_products.h). Empty when no such kernel ran."""
    return {m.group(1): float(m.group(3)) for m in debug_table(
        stderr, "matrix products inside fused kernels",
        r"^(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%\s+([0-9.]+)%$")}


def is_matrix_product(kernel):
    """gemm and any batched or fused variant of it (the kernel list may grow)."""
    return "gemm" in kernel or "matmul" in kernel


# The speed targets count FNet's, the convolutions' and the state-space mixers' own kernels with the
# products: they are those mixers' core arithmetic, as the products are everyone else's.
MIXER_OWN_KERNELS = {"fnet": ("fft", "fft2_real"),
                     "lightconv": ("token_conv", "token_conv_backward"),
                     "dynconv": ("token_conv", "token_conv_backward"),
                     "mamba": ("selective_scan", "selective_scan_backward"),
                     "s4d": ("circular_conv", "circular_conv_backward"),
                     "hyena": ("circular_conv", "circular_conv_backward")}


def counts_as_product(kernel, args):
    """A matrix product, or one of the classifier's mixer's own kernels (MIXER_OWN_KERNELS)."""
    own = MIXER_OWN_KERNELS.get(args.mixer, ()) if args.task == "classify" else ()
    return is_matrix_product(kernel) or kernel in own


def run_torch(args):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    cmd = [args.python, os.path.abspath(__file__), "--worker"] + common_flags(args)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0 and "No module named 'torch'" in done.stderr:
        raise RuntimeError(f"{args.python} has no PyTorch: scripts/bench-speed.sh installs it in "
                           ".venv/ (then use .venv/bin/python), or name one with --python")
    if done.returncode != 0:
        raise RuntimeError(f"the PyTorch side failed ({done.returncode}):\n{done.stderr}")
    return parse_json_line(done.stdout, "the PyTorch worker")


def faster(a, b):
    """The run with more examples per second (a or b; a when b is None)."""
    return a if b is None or a["examples_per_s"] >= b["examples_per_s"] else b


def compare(args):
    """One row of the speed table: a dict with both sides' numbers.

    With args.rounds = R > 1 each side is timed R times, the two sides alternating, and each
    keeps its fastest run: on a shared machine a neighbour's load only ever slows a run down,
    and alternating spreads a slow spell over both sides instead of one."""
    mixlab = torch_side = None
    for _ in range(max(1, getattr(args, "rounds", 1))):
        mixlab = faster(parse_json_line(run_mixlab(args, debug=False).stdout, "bench_train_step"),
                        mixlab)
        torch_side = faster(run_torch(args), torch_side)
    if on_gpu(args):  # MIXLAB_DEBUG's table would time the host's calls, not the GPU's kernels
        return {"mixlab": mixlab, "torch": torch_side,
                "ratio": mixlab["examples_per_s"] / torch_side["examples_per_s"],
                "products_share": None, "kernel_share": None, "top_other": "n/a",
                "params_match": mixlab["params"] == torch_side["params"]}
    traced = run_mixlab(args, debug=True).stderr
    kernels = kernel_shares(traced)
    total = sum(kernels.values())
    products = sum(ms for k, ms in kernels.items() if counts_as_product(k, args))
    inside = sum(ms for k, ms in products_inside(traced).items() if not counts_as_product(k, args))
    others = sorted(((ms, k) for k, ms in kernels.items() if not counts_as_product(k, args)),
                    reverse=True)
    top_other = f"{others[0][1]} {100 * others[0][0] / total:.0f}%" if others else "-"
    return {"mixlab": mixlab, "torch": torch_side,
            "ratio": mixlab["examples_per_s"] / torch_side["examples_per_s"],
            "products_share": (products + inside) / total if total > 0 else 0.0,
            "kernel_share": products / total if total > 0 else 0.0, "top_other": top_other,
            "params_match": mixlab["params"] == torch_side["params"]}


def add_model_flags(p, dim=128, layers=3, batch=128):
    p.add_argument("--task", choices=["translate", "classify"], default="translate")
    p.add_argument("--mixer", default="attention", help="classifier mixer (mixlab's name)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dim", type=int, default=dim)
    p.add_argument("--layers", type=int, default=layers)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--len", type=int, default=12, help="translator sequence length")
    p.add_argument("--patch", type=int, default=4, help="classifier patch side (4: 49 tokens)")
    p.add_argument("--dropout", type=float, default=None,
                   help="default: 0.1 for the translator, 0 for the classifier")
    p.add_argument("--steps", type=int, default=20, help="timed steps (after 3 warm-up steps)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where both sides train (cuda: the GPU; mixlab uploads each step)")
    p.add_argument("--images", default=None, help=argparse.SUPPRESS)


def add_run_flags(p):
    p.add_argument("--build", default=os.environ.get("MIXLAB_BUILD_DIR", "build"),
                   help="the build folder holding bench_train_step")
    p.add_argument("--python", default=sys.executable,
                   help="the Python (with torch) that runs the PyTorch side")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_model_flags(p)
    add_run_flags(p)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--check-models", nargs="+", metavar="MIXER=DUMP", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.check_models:
        check_same_models(args)
        return 0
    if args.dropout is None:
        args.dropout = 0.1 if args.task == "translate" else 0.0
    if args.worker:
        torch_worker(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.task == "classify" and args.images is None:
            args.images = os.path.join(tmp, "images.bin")
            write_images(args.images, args.batch)
        row = compare(args)
    if on_gpu(args):
        print_gpu_row(row)
    else:
        print_cpu_row(row)
    if not row["params_match"]:
        print("parameter counts differ: the two models are not the same", file=sys.stderr)
        return 1
    return 0


def print_cpu_row(row):
    m, t = row["mixlab"], row["torch"]
    print(f"mixlab: median step {m['median_ms']:.2f} ms, {m['examples_per_s']:.1f} examples/s, "
          f"params {m['params']}, peak RSS {m['peak_rss_kib'] / 1024:.1f} MiB, matrix products "
          f"{100 * row['products_share']:.0f}% of kernel time "
          f"({100 * row['kernel_share']:.0f}% in whole product kernels, the rest inside fused "
          f"kernels; next: {row['top_other']})")
    print(f"torch {t['version']} threads={t['threads']}: median step {t['median_ms']:.2f} ms, "
          f"{t['examples_per_s']:.1f} examples/s, params {t['params']}, "
          f"peak RSS {t['peak_rss_kib'] / 1024:.1f} MiB ({t['rss_after_import_kib'] / 1024:.1f} MiB "
          f"of it right after `import torch`)")
    print(f"ratio mixlab/torch (examples/s): {row['ratio']:.2f}")


def print_gpu_row(row):
    m, t = row["mixlab"], row["torch"]
    mib = 1024 * 1024
    device_peak = (f"{m['peak_device_bytes'] / mib:.1f} MiB" if "peak_device_bytes" in m
                   else "n/a")
    print(f"mixlab ({m.get('device', '?')}): median step {m['median_ms']:.2f} ms, "
          f"{m['examples_per_s']:.1f} examples/s, params {m['params']}, peak device memory "
          f"{device_peak} (its allocator's peak in use), "
          f"peak RSS {m['peak_rss_kib'] / 1024:.1f} MiB, matrix products n/a, "
          f"host waits a step {m.get('host_waits_per_step', 'n/a')}, "
          f"queued by the host in {m.get('host_queue_ms', float('nan')):.2f} ms")
    print(f"torch {t['version']} ({t['device']}, {t['device_name']}): median step "
          f"{t['median_ms']:.2f} ms, {t['examples_per_s']:.1f} examples/s, params {t['params']}, "
          f"peak device memory {t['peak_device_bytes'] / mib:.1f} MiB (max_memory_allocated; "
          f"reserved {t['peak_device_reserved_bytes'] / mib:.1f}), "
          f"peak RSS {t['peak_rss_kib'] / 1024:.1f} MiB, "
          f"queued by the host in {t.get('host_queue_ms', float('nan')):.2f} ms")
    print(f"ratio mixlab/torch (examples/s): {row['ratio']:.2f}")
    print("json: " + json.dumps({
        "device": m.get("device"), "device_name": t["device_name"],
        "mixlab_examples_per_s": m["examples_per_s"], "torch_examples_per_s": t["examples_per_s"],
        "ratio": row["ratio"], "mixlab_median_ms": m["median_ms"], "torch_median_ms": t["median_ms"],
        "mixlab_peak_device_bytes": m.get("peak_device_bytes"),
        "mixlab_host_waits_per_step": m.get("host_waits_per_step"),
        "mixlab_host_queue_ms": m.get("host_queue_ms"), "torch_host_queue_ms": t.get("host_queue_ms"),
        "torch_peak_device_bytes": t["peak_device_bytes"],
        "mixlab_peak_rss_kib": m["peak_rss_kib"], "torch_peak_rss_kib": t["peak_rss_kib"],
        "mixlab_params": m["params"], "torch_params": t["params"],
        "params_match": row["params_match"]}))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as error:  # a side failed: say which and why, without a traceback
        sys.exit(f"vs_torch.py: {error}")
