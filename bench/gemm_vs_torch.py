#!/usr/bin/env python3
"""The matrix products alone: mixlab's OpenBLAS against the BLAS inside PyTorch, same shapes.

Every row of the speed table spends most of mixlab's step in products (its `matmul %` column),
so how fast the BLAS under each side multiplies bounds the table's ratios. This times the
image classifier's product shapes (6272 rows: 128 images of 49 patches, d = 128, FFN 512) on
both: `bench_matmul --threads N` times raw cblas_sgemm on OpenBLAS (as mixlab links it) and
mixlab's engine matmul; this script times `torch.matmul` on the same shapes and threads
(PyPI's torch links Intel MKL on x86-64), best of several runs, and prints per shape both
times, PyTorch / OpenBLAS (above 1: OpenBLAS is faster) and the two sides' GFLOP/s.

    python3 bench/gemm_vs_torch.py [--threads 1,2] [--build DIR]

scripts/bench-speed.sh sets up .venv/ with PyTorch; run this with .venv/bin/python.
"""
import argparse
import os
import re
import subprocess
import sys
import time


def torch_times(shapes, threads, budget=0.5):
    import torch
    torch.set_num_threads(threads)
    out = {}
    for m, k, n in shapes:
        a, b = torch.rand(m, k) * 2 - 1, torch.rand(k, n) * 2 - 1
        a @ b  # warm-up
        best, spent, runs = float("inf"), 0.0, 0
        while (spent < budget or runs < 5) and runs < 1000:
            t0 = time.perf_counter()
            a @ b
            dt = time.perf_counter() - t0
            best, spent, runs = min(best, dt), spent + dt, runs + 1
        out[(m, k, n)] = best * 1e6
    return out


def openblas_times(build, threads):
    """bench_matmul's third table: {(m, k, n): (raw us, engine us)}."""
    text = subprocess.run([os.path.join(build, "bench_matmul"), "--threads", str(threads)],
                          check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in text.split("the classifier's products")[1].splitlines():
        hit = re.match(r"\s*(\d+)x(\d+)@(\d+)x(\d+)\s+([\d.]+)\s+([\d.]+)", line)
        if hit:
            m, k, _, n = (int(hit.group(i)) for i in range(1, 5))
            rows[(m, k, n)] = (float(hit.group(5)), float(hit.group(6)))
    if len(rows) < 5:
        raise SystemExit(f"bench_matmul --threads {threads}: expected 5 product shapes in its "
                         f"third table, found {len(rows)}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--build", default=os.environ.get("MIXLAB_BUILD_DIR", "build"))
    args = p.parse_args()
    import torch
    print(f"products, float32: OpenBLAS (mixlab) vs torch {torch.__version__} matmul "
          f"({'MKL' if torch.backends.mkl.is_available() else 'its BLAS'})")
    print(f"{'thr':>3} {'shape (m x k @ k x n)':>22} {'OpenBLAS us':>12} {'engine us':>10} "
          f"{'torch us':>9} {'torch/OpenBLAS':>15} {'OpenBLAS GF/s':>14} {'torch GF/s':>11}")
    for threads in (int(t) for t in args.threads.split(",")):
        ours = openblas_times(args.build, threads)
        theirs = torch_times(list(ours), threads)
        for (m, k, n), (raw, engine) in ours.items():
            flops = 2.0 * m * k * n
            t = theirs[(m, k, n)]
            print(f"{threads:>3} {f'{m}x{k}@{k}x{n}':>22} {raw:>12.1f} {engine:>10.1f} {t:>9.1f} "
                  f"{t / raw:>15.2f} {flops / raw / 1e3:>14.0f} {flops / t / 1e3:>11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
