#!/usr/bin/env python3
"""The CUDA backend's kernels against PyTorch's on the same GPU, shapes and dtype (float32).

Runs bench_cuda (mixlab's GEMM and row kernels, timed with CUDA events on the backend's stream)
and times the PyTorch operations a user would call for the same work, the same way (CUDA events
around `repeats` back-to-back calls after one warm-up call), then prints one table: mixlab's
time, PyTorch's, and the ratio PyTorch time / mixlab time (above 1: mixlab is faster).

    python3 bench/cuda_vs_torch.py --bench build-gpu/bench_cuda [--quick]

PyTorch runs full FP32 products (TF32 off), as bench_cuda's cuBLAS calls do. Its cross-entropy
is what `F.cross_entropy(..., label_smoothing=0.1, reduction="none")` runs (log-softmax, the
gather and the smoothing term: several kernels), and its backward is autograd's over that, so
those rows compare what each library does for the call a user makes, not one kernel with one.
PyTorch is a baseline here only, never a dependency of the engine.
"""
import argparse
import re
import subprocess
import sys


def parse_bench(out):
    """bench_cuda's rows: {(section, name, shape): microseconds, or TFLOP/s for GEMM}.

    >>> t = parse_bench('''GEMM float32 (full FP32, no TF32): engine vs raw cuBLAS
    ... case                                      raw     kernel     matmul   kernel   matmul
    ... square 1024                              37.8       37.9       37.9    1.003    1.001
    ... Row kernels, float32: achieved bandwidth (compulsory bytes) and fraction of peak 4814 GB/s
    ... kernel                     rows x cols            us       GB/s  of peak
    ... layer_norm backward        65536x128            40.1     2525.4    0.525
    ... allocator: 52 cudaMalloc calls, 404 cache hits, peak 1000.8 MiB in use''')
    >>> sorted(t.items())
    [(('gemm', 'square 1024', ''), 37.9), (('rows', 'layer_norm backward', '65536x128'), 40.1)]
    """
    times = {}
    section = None
    for line in out.splitlines():
        if line.startswith("GEMM"):
            section = "gemm"
        elif line.startswith("Row kernels"):
            section = "rows"
        elif section == "gemm":
            # name, then raw / kernel / matmul TFLOP/s and two ratios
            m = re.match(r"^(.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
            if m and not line.startswith("case"):
                times[("gemm", m.group(1).strip(), "")] = float(m.group(4))  # matmul TFLOP/s
        elif section == "rows":
            m = re.match(r"^(.*?)\s+(\d+x\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
            if m:
                times[("rows", m.group(1).strip(), m.group(2))] = float(m.group(3))
    return times


def time_us(torch, fn, repeats=20):
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / repeats


GEMM_CASES = {  # bench_cuda's names: batch, m, n, k, trans_a, trans_b
    "square 1024": (1, 1024, 1024, 1024, False, False),
    "square 2048": (1, 2048, 2048, 2048, False, False),
    "square 4096": (1, 4096, 4096, 4096, False, False),
    "linear x W^T 8192x1024x4096": (1, 8192, 4096, 1024, False, True),
    "grad W = dY^T X 4096x1024x8192": (1, 4096, 1024, 8192, True, False),
    "attention QK^T 64x(256x256x64)": (64, 256, 256, 64, False, True),
    "attention PV 64x(256x64x256)": (64, 256, 64, 256, False, False),
}


def torch_gemm_tflops(torch, case):
    b, m, n, k, ta, tb = case
    a = torch.rand((b, k, m) if ta else (b, m, k), device="cuda") * 2 - 1
    w = torch.rand((b, n, k) if tb else (b, k, n), device="cuda") * 2 - 1
    av = a.transpose(1, 2) if ta else a
    wv = w.transpose(1, 2) if tb else w
    repeats = 10 if b * m * n * k >= (1 << 33) else 50
    us = time_us(torch, lambda: torch.matmul(av, wv), repeats)
    return 2.0 * b * m * n * k / (us * 1e-6) / 1e12


def torch_row_us(torch, name, rows, cols):
    F = torch.nn.functional
    x = torch.rand(rows, cols, device="cuda") * 6 - 3
    dy = torch.rand(rows, cols, device="cuda") * 2 - 1
    gamma, beta = torch.ones(cols, device="cuda"), torch.zeros(cols, device="cuda")
    targets = torch.randint(0, cols, (rows,), device="cuda")
    if name == "add (x + dy)":
        out = torch.empty_like(x)
        return time_us(torch, lambda: torch.add(x, dy, out=out))
    if name == "softmax":
        return time_us(torch, lambda: torch.softmax(x, -1))
    if name == "log_softmax":
        return time_us(torch, lambda: torch.log_softmax(x, -1))
    if name == "softmax backward":
        y = torch.softmax(x, -1)
        return time_us(torch, lambda: torch._softmax_backward_data(dy, y, -1, torch.float32))
    if name == "layer_norm":
        return time_us(torch, lambda: torch.native_layer_norm(x, [cols], gamma, beta, 1e-5))
    if name == "layer_norm backward":
        _, mean, rstd = torch.native_layer_norm(x, [cols], gamma, beta, 1e-5)
        return time_us(torch, lambda: torch.ops.aten.native_layer_norm_backward(
            dy, x, [cols], mean, rstd, gamma, beta, [True, True, True]))
    if name == "cross_entropy":
        return time_us(torch, lambda: F.cross_entropy(x, targets, label_smoothing=0.1,
                                                      reduction="none"))
    if name == "cross_entropy backward":
        xg = x.clone().requires_grad_(True)
        loss = F.cross_entropy(xg, targets, label_smoothing=0.1, reduction="none")
        scale = torch.full((rows,), 1.0 / rows, device="cuda")
        return time_us(torch, lambda: torch.autograd.grad(loss, xg, scale, retain_graph=True))
    raise ValueError(name)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True, help="path of bench_cuda")
    p.add_argument("--quick", action="store_true", help="bench_cuda --quick: fewer shapes")
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        print("cuda_vs_torch: skipped: PyTorch is not installed for", sys.executable)
        return 77
    if not torch.cuda.is_available():
        print("cuda_vs_torch: skipped: PyTorch sees no CUDA GPU")
        return 77
    run = subprocess.run([args.bench] + (["--quick"] if args.quick else []),
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        return 1
    mixlab = parse_bench(run.stdout)
    if not mixlab:
        sys.stderr.write("cuda_vs_torch: bench_cuda printed no rows:\n" + run.stdout)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"mixlab (bench_cuda) vs PyTorch {torch.__version__} on {torch.cuda.get_device_name()}, "
          "float32; ratio = PyTorch time / mixlab time (above 1: mixlab faster)")
    print(f"\n{'GEMM (TFLOP/s)':40} {'mixlab':>10} {'PyTorch':>10} {'ratio':>7}")
    for (section, name, _), tflops in mixlab.items():
        if section == "gemm" and name in GEMM_CASES:
            t = torch_gemm_tflops(torch, GEMM_CASES[name])
            print(f"{name:40} {tflops:10.1f} {t:10.1f} {tflops / t:7.2f}")
    print(f"\n{'row kernel (us)':26} {'rows x cols':14} {'mixlab':>10} {'PyTorch':>10} {'ratio':>7}")
    for (section, name, shape), us in mixlab.items():
        if section != "rows":
            continue
        rows, cols = (int(v) for v in shape.split("x"))
        t = torch_row_us(torch, name, rows, cols)
        print(f"{name:26} {shape:14} {us:10.1f} {t:10.1f} {t / us:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
