#!/usr/bin/env python3
"""How each mixer's cost grows with the sequence length N: one training step of every
registered mixer's classifier on token sequences, in mixlab and in PyTorch eager.

For N = 64, 128, ..., 4,096 tokens (d = 128, 2 blocks, the batch B = tokens-per-batch / N so
that each step sees the same number of tokens), each side times the classifier's training step
(bench_train_step --input tokens; bench/torch_models.py's TokenClassifier: label-smoothed
cross-entropy, clipping at 1, AdamW, dropout 0) and reports its peak resident memory. A step is
timed by the process's CPU time (--clock cpu, the default: on a machine shared with other work
it leaves out the waits for a core) or by the wall clock (--clock wall). Each point runs in a
process of its own (PyTorch's forked from one worker that imports torch once) under an
address-space cap (RLIMIT_AS, --mem-cap-gib beyond the process's start-up mappings) and a
timeout, so a point that does not fit is reported "over cap" (or "timeout") instead of taking
the machine's memory; once a side is over the cap or out of time for a mixer, its longer
lengths are not tried. Every registered mixer is covered (bench_train_step --list-mixers); one
that bench/torch_models.py cannot build is timed on mixlab's side alone.

What is fitted: the time per sequence (step time / B) against N, log-log, least squares over
the points that ran, per mixer and side. That is the cost of one sequence, which the spec's
complexity describes (attention's mixing grows as N², linear attention's as N, FNet's as
N log N: docs/mixers.md); at a fixed number of tokens per step the step time itself grows one
power of N slower. The whole step is timed, so the embedding, the FFN and the projections,
linear in N, pull a quadratic mixer's fit below 2 at short lengths: the slope between the two
longest lengths that ran is printed beside the fit. Mixers whose parameters grow as ℓ² (ℓ = N
here: synth-random, mlp-mixer, resmlp, ffonly, gMLP, aMLP) also update ℓ² parameters
once per step, a cost spread over B = tokens / N sequences.

Headline numbers are ratios against PyTorch measured in this script: each point is timed
--rounds times per side, the sides alternating; each side keeps its fastest run (a neighbour's
load only slows a run down) and the per-round ratios give the spread.

    python3 bench/scaling.py [--quick] [--out DIR] [--mixers a,b] [--lengths 64,...]
        [--tokens T] [--rounds R] [--mem-cap-gib G] [--timeout S] [--max-minutes M]
        [--build DIR] [--python PATH] [--threads 1] [--layers L] [--steps K] [--clock cpu|wall]
    python3 bench/scaling.py --replot [--out DIR] --layers L   # figures again from results.csv

Writes DIR/results.csv (one row per mixer and length), DIR/exponents.csv (the fits) and three
log-log figures: DIR/time-mixlab.svg, DIR/time-torch.svg (time per sequence against N, each
mixer's fitted exponent and the spec's in the legend) and DIR/memory.svg (mixlab's and
PyTorch's peak resident memory). --quick: two mixers, N up to 256, one round (the pipeline
end to end; its numbers mean little); it checks its figures for tick labels (check_svg).
"""
import argparse
import csv
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import speed_table  # noqa: E402  (registered_mixers)
import vs_torch  # noqa: E402  (parse_json_line, current_rss_kib)

QUICK_MIXERS = ["attention", "fnet"]
# Options that keep a mixer's cost what its name promises at every length: Linformer's default
# projected length is ℓ/4, which grows with N; the spec's "linear" Linformer has a fixed one.
MIXER_OPTIONS = {"linformer": {"proj-len": "64"}}
GIB = 1 << 30
# What a mixlab process maps before any model: the binary, OpenBLAS, FFTW, thread stacks. Its
# cap is --mem-cap-gib beyond this; the PyTorch worker measures its own after `import torch`.
MIXLAB_START_UP_BYTES = 1 * GIB


# ---- what the spec predicts ----

def predicted(mixer):
    """(label, exponent or None) of the cost of one sequence's mixing in N (docs/mixers.md).

    >>> predicted("attention"), predicted("synth-mix:R+V")[0], predicted("fnet")[0]
    (('2', 2.0), '2', 'N log N')
    >>> predicted("linformer"), predicted("no-such-mixer")
    (('1 (fixed p = 64)', 1.0), ('? (not in the table)', None))
    """
    if mixer.startswith("synth-"):
        return "2", 2.0  # N×N logits, softmax and product with V, whatever the component
    table = {
        "attention": ("2", 2.0), "retnet": ("2 (parallel form)", 2.0),
        "mlp-mixer": ("2", 2.0), "resmlp": ("2", 2.0), "ffonly": ("2", 2.0),
        "gmlp": ("2", 2.0), "amlp": ("2", 2.0), "hcsa": ("2 (dense N×N weights)", 2.0),
        "external": ("1", 1.0), "lightconv": ("1", 1.0), "dynconv": ("1", 1.0),
        "linear-attention": ("1", 1.0), "mamba": ("1", 1.0),
        "linformer": ("1 (fixed p = 64)", 1.0),
        "fnet": ("N log N", None), "s4d": ("N log N", None), "hyena": ("N log N", None)}
    return table.get(mixer, ("? (not in the table)", None))


def predicted_exponent(mixer, ns):
    """The exponent the spec predicts, with N log N turned into the least-squares exponent that
    N log N itself has over the lengths `ns` (about 1.17 over 64..4096).

    >>> round(predicted_exponent("fnet", [64, 128, 256, 512, 1024, 2048, 4096]), 2)
    1.17
    >>> predicted_exponent("attention", [64, 128])
    2.0
    """
    label, value = predicted(mixer)
    if value is None and label == "N log N" and len(ns) >= 2:
        return fit_exponent(ns, [n * math.log(n) for n in ns])
    return value


def fit_exponent(xs, ys):
    """Least-squares slope of log y on log x.

    >>> round(fit_exponent([64, 128, 256, 512], [3 * n ** 2 for n in [64, 128, 256, 512]]), 6)
    2.0
    >>> fit_exponent([64], [1.0]) is None
    True
    """
    if len(xs) < 2:
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sxx


# ---- one point, one side, in a child process under a memory cap and a timeout ----

def cap_address_space(limit_bytes):
    """For preexec_fn: the child may map at most limit_bytes."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return apply


def looks_out_of_memory(text, returncode):
    markers = ("bad_alloc", "out of memory", "cannot allocate", "can't allocate",
               "Cannot allocate", "MemoryError", "mmap", "std::length_error")
    return any(m in text for m in markers) or returncode in (-9, -6, -11, 134, 137, 139)


def run_child(cmd, timeout, preexec=None, env=None):
    """{"status": "ok", ...json line...} or {"status": "over cap" | "timeout" | "failed", ...}."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=preexec, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    if done.returncode == 0:
        try:
            report = vs_torch.parse_json_line(done.stdout, cmd[0])
        except RuntimeError:
            return {"status": "failed", "error": done.stdout[-300:]}
        report.setdefault("status", "ok")
        return report
    text = done.stderr + done.stdout
    if looks_out_of_memory(text, done.returncode):
        return {"status": "over cap", "error": text.strip().splitlines()[-1][:200] if text.strip()
                else f"exit {done.returncode}"}
    return {"status": "failed", "error": (text.strip().splitlines() or ["?"])[-1][:300]}


def mixlab_point(args, mixer, n, batch):
    cmd = [os.path.join(args.build, "bench_train_step"), "--task", "classify", "--input", "tokens",
           "--mixer", mixer, "--len", n, "--batch", batch, "--dim", args.dim,
           "--layers", args.layers, "--threads", args.threads, "--steps", args.steps,
           "--warmup", args.warmup, "--dropout", 0]
    for key, value in MIXER_OPTIONS.get(mixer, {}).items():
        cmd += ["--mixer-opt", f"{key}={value}"]
    limit = int(args.mem_cap_gib * GIB) + MIXLAB_START_UP_BYTES
    env = dict(os.environ)
    env.pop("MIXLAB_DEBUG", None)
    return run_child([str(c) for c in cmd], args.timeout, cap_address_space(limit), env)


class TorchServer:
    """The PyTorch side of the whole run in one process (--worker): it imports torch once (many
    seconds on a busy machine) and runs each point in a child forked from it, under the cap and
    the timeout, so each point's peak RSS is that point's own (the library's footprint included,
    as a fresh process would have it)."""

    def __init__(self, args):
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(args.threads)
        self.proc = subprocess.Popen(
            [args.python, os.path.abspath(__file__), "--worker", "--threads", str(args.threads),
             "--dim", str(args.dim), "--layers", str(args.layers), "--steps", str(args.steps),
             "--warmup", str(args.warmup), "--mem-cap-gib", str(args.mem_cap_gib)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.timeout = args.timeout
        self.version = self._answer()["version"]  # once torch is imported

    def _answer(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the PyTorch worker stopped (exit {self.proc.wait()})")
        return json.loads(line)

    def knows(self, mixer):
        """Whether bench/torch_models.py builds this mixer."""
        self.proc.stdin.write(json.dumps({"knows": mixer}) + "\n")
        self.proc.stdin.flush()
        return self._answer()["knows"]

    def point(self, mixer, n, batch):
        self.proc.stdin.write(json.dumps({"mixer": mixer, "n": n, "batch": batch,
                                          "timeout": self.timeout}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def vm_size_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def torch_server(args):
    """--worker: one json request per stdin line, one json answer per stdout line; each point in
    a forked child (torch_point_in_child), killed at the request's timeout."""
    import signal
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning)
    import torch
    import torch_models  # imported once, before the forks
    torch.set_num_threads(args.threads)
    rss_after_import = vs_torch.current_rss_kib()
    print(json.dumps({"version": torch.__version__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "knows" in request:
            try:
                torch_models.make_mixer(request["knows"], 8, 2, 4, {}, 32)
                print(json.dumps({"knows": True}), flush=True)
            except (KeyError, ValueError):
                print(json.dumps({"knows": False}), flush=True)
            continue
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one point, its answer on the pipe, then gone
            os.close(read_end)
            try:
                answer = torch_point_in_child(args, request, rss_after_import)
            except BaseException as error:  # noqa: B036 (the child must always answer)
                answer = {"status": "failed", "error": f"{type(error).__name__}: {error}"[:300]}
            os.write(write_end, (json.dumps(answer) + "\n").encode())
            os._exit(0)
        os.close(write_end)
        deadline = time.time() + request["timeout"]
        timed_out, status = False, 0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.time() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                timed_out = True
                break
            time.sleep(0.02)
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        os.close(read_end)
        text = b"".join(chunks).decode().strip()
        if timed_out:
            answer = {"status": "timeout"}
        elif text:
            answer = json.loads(text)
        else:
            answer = {"status": "failed", "error": f"the point's process ended with status {status}"}
        print(json.dumps(answer), flush=True)
    return 0


def torch_point_in_child(args, request, rss_after_import):
    """One PyTorch point: the TokenClassifier's training step, timed as bench_train_step times
    mixlab's (wall and the process's CPU time); status "over cap" when an allocation fails under
    the cap."""
    import torch
    from torch import nn
    import torch_models
    # The cap counts from here: what the library itself maps is not the model's.
    limit = vm_size_bytes() + int(args.mem_cap_gib * GIB)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    mixer, n, batch = request["mixer"], request["n"], request["batch"]
    torch.manual_seed(0)
    try:
        model = torch_models.TokenClassifier(mixer, args.dim, args.layers, n, 0.0,
                                             options=MIXER_OPTIONS.get(mixer, {}))
        ids, labels = torch_models.synthetic_token_batch(batch, n)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        model.train()
        times, cpu_times = [], []
        for step in range(args.steps + args.warmup):
            t0, c0 = time.perf_counter(), time.process_time()
            loss_fn(model(ids), labels).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
                cpu_times.append(time.process_time() - c0)
    except (RuntimeError, MemoryError) as error:
        text = str(error)
        if isinstance(error, MemoryError) or "alloc" in text or "memory" in text:
            return {"status": "over cap",
                    "error": (text.splitlines() or [type(error).__name__])[0][:200]}
        raise
    return {"status": "ok", "median_ms": statistics.median(times) * 1e3,
            "median_cpu_ms": statistics.median(cpu_times) * 1e3,
            "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
            # The forked process's peak: the library's pages it touched and the point's own
            # memory (pages of the library it never touches are not counted).
            "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "rss_after_import_kib": rss_after_import, "version": torch.__version__}


# ---- the figures: log-log SVG, written by hand (no plotting library needed) ----

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aa6600", "#393b79", "#637939",
           "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363",
           "#de9ed6", "#8c6d31", "#6baed6"]
DASHES = ["", "6,3", "2,2", "8,3,2,3"]


def log_ticks(lo, hi):
    """Tick values for a log axis over [lo, hi]: powers of ten, with 2 and 5 times them when
    fewer than three powers fall inside; always at least two ticks.

    >>> log_ticks(0.3, 4000)
    [1, 10, 100, 1000]
    >>> log_ticks(0.3, 40)
    [0.5, 1, 2, 5, 10, 20]
    >>> log_ticks(1347, 1957)
    [1347, 1957]
    >>> log_ticks(3, 30)
    [5, 10, 20]
    """
    def inside(values):
        return [v for v in values if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = inside([10 ** k for k in range(k0, k1 + 1)])
    if len(ticks) < 3:
        ticks = inside(sorted(m * 10 ** k for k in range(k0, k1 + 1) for m in (1, 2, 5)))
    if len(ticks) < 2:  # no round value in the range: label its ends
        ticks = [lo, hi]
    return [int(t) if float(t).is_integer() else t for t in ticks]


def tick_text(v):
    if v >= 1e5 or v < 1e-2:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


def loglog_svg(path, title, xlabel, ylabel, series, x_ticks=None, guides=()):
    """series: [(label, [(x, y), ...], dashed)] or (label, points, dashed, colour index); one
    line and marker per series, a legend with each label on the right (None: no legend line).
    Dashed series take the colour of the solid one before them unless given one. Ticks on both axes, each with its label. guides: exponents k drawn
    as grey dotted lines ∝ x^k from the middle of the first column of points, to read slopes by."""
    points = [p for entry in series for p in entry[1]]
    labelled = [s for s in series if s[0] is not None]
    width, height = 980, max(560, 70 + 15 * len(labelled))  # room for every legend line
    left, right, top, bottom = 80, 400, 40, 60
    pw, ph = width - left - right, height - top - bottom
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="15">{esc(title)}</text>']
    if not points:  # the axes still, and why they are empty
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" text-anchor="middle">'
                   'no point ran</text>')
    xs = [p[0] for p in points] or list(x_ticks or [1, 10])
    ys = [p[1] for p in points] or [1, 10]
    x_lo, x_hi = min(xs), max(xs)
    y_lo, y_hi = min(ys), max(ys)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo / 2, x_hi * 2
    if y_hi <= y_lo * 1.01:
        y_lo, y_hi = y_lo / 1.5, y_hi * 1.5
    lx0, lx1 = math.log(x_lo) - 0.05, math.log(x_hi) + 0.05
    ly0, ly1 = math.log(y_lo) - 0.1, math.log(y_hi) + 0.1

    def px(x):
        return left + (math.log(x) - lx0) / (lx1 - lx0) * pw

    def py(y):
        return top + ph - (math.log(y) - ly0) / (ly1 - ly0) * ph
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    for t in x_ticks or log_ticks(x_lo, x_hi):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="black"/>')
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>')
        out.append(f'<text class="xtick" x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">'
                   f'{tick_text(t)}</text>')
    for t in log_ticks(y_lo, y_hi):
        y = py(t)
        out.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="black"/>')
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text class="ytick" x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{tick_text(t)}</text>')
    first = sorted(y for x, y in points if x == x_lo)
    out.append(f'<clipPath id="plot"><rect x="{left}" y="{top}" width="{pw}" height="{ph}"/></clipPath>')
    for k in guides if first else ():
        y0 = first[len(first) // 2]
        x1, y1 = px(x_lo), py(y0)
        x2, y2 = px(x_hi), py(y0 * (x_hi / x_lo) ** k)
        out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#999" '
                   f'stroke-dasharray="1,3" clip-path="url(#plot)"/>')
        tx, ty = min(x2, left + pw - 4), max(y2, top + 12)
        out.append(f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="end" fill="#777">∝ N'
                   f'{"" if k == 1 else "²" if k == 2 else "^" + str(k)}</text>')
    out.append(f'<text class="xlabel" x="{left + pw / 2}" y="{height - 18}" text-anchor="middle">'
               f'{esc(xlabel)}</text>')
    out.append(f'<text class="ylabel" transform="translate(20,{top + ph / 2}) rotate(-90)" '
               f'text-anchor="middle">{esc(ylabel)}</text>')
    legend_step = min(18, (height - top - 10) / max(1, len(labelled)))  # 15 or more
    legend_line = 0
    for i, (label, pts, dashed, *given) in enumerate(series):
        c = given[0] if given else i
        colour = COLOURS[c % len(COLOURS)]
        # Past the palette, the pattern tells series of one colour apart; dashed adds one step.
        dash = DASHES[(c // len(COLOURS) + (1 if dashed else 0)) % len(DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        pts = sorted(pts)
        if len(pts) > 1:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                       f'stroke-width="1.6"{dash_attr}/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>')
        if label is None:
            continue
        ly = top + 6 + legend_line * legend_step
        legend_line += 1
        lx = left + pw + 15
        out.append(f'<line x1="{lx}" y1="{ly:.1f}" x2="{lx + 24}" y2="{ly:.1f}" stroke="{colour}" '
                   f'stroke-width="2"{dash_attr}/>')
        out.append(f'<text class="legend" x="{lx + 30}" y="{ly + 4:.1f}">{esc(label)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def check_svg(path):
    """What a reader would miss in a figure: fewer than two labelled ticks on an axis, or an
    axis without its label. Returns the problems (empty: the figure reads).

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> loglog_svg(d + "/a.svg", "t", "N", "ms", [("x", [(64, 1.0), (4096, 900.0)], False)])
    >>> check_svg(d + "/a.svg")
    []
    >>> with open(d + "/b.svg", "w") as f:
    ...     _ = f.write('<svg xmlns="http://www.w3.org/2000/svg"><text class="xtick">1</text></svg>')
    >>> check_svg(d + "/b.svg")
    ['b.svg: 1 tick labels on the x axis', 'b.svg: 0 tick labels on the y axis', 'b.svg: no x axis label', 'b.svg: no y axis label']
    """
    root = ET.parse(path).getroot()
    texts = [(e.get("class"), (e.text or "").strip()) for e in root.iter()
             if e.tag.endswith("text")]
    problems = []
    name = os.path.basename(path)
    for axis in ("x", "y"):
        labels = [t for c, t in texts if c == f"{axis}tick" and t]
        if len(labels) < 2:
            problems.append(f"{name}: {len(labels)} tick labels on the {axis} axis")
    for axis in ("x", "y"):
        if not any(c == f"{axis}label" and t for c, t in texts):
            problems.append(f"{name}: no {axis} axis label")
    return problems


# ---- the benchmark ----

def side_summary(runs, key):
    """Best run (least `key`) of one side at one point, and its status: "ok" when any round ran."""
    ok = [r for r in runs if r.get("status") == "ok"]
    if ok:
        return min(ok, key=lambda r: r[key]), "ok"
    return None, (runs[0].get("status", "failed") if runs else "not run")


CSV_FIELDS = ["mixer", "n", "batch", "tokens_per_batch", "predicted", "clock",
              "mixlab_status", "mixlab_step_ms", "mixlab_step_ms_rounds", "mixlab_ms_per_sequence",
              "mixlab_step_wall_ms", "mixlab_peak_rss_mib", "torch_status", "torch_step_ms",
              "torch_step_ms_rounds", "torch_ms_per_sequence", "torch_step_wall_ms", "torch_peak_rss_mib", "torch_library_rss_mib",
              "ratio_torch_over_mixlab", "ratio_min", "ratio_max", "mixlab_params", "torch_params",
              "note"]


def csv_row(mixer, n, batch, tokens, mixlab_runs, torch_runs, note, key):
    """One row of results.csv; times by `key` (median_cpu_ms or median_ms, the wall clock)."""
    m, m_status = side_summary(mixlab_runs, key)
    t, t_status = side_summary(torch_runs, key)
    row = {"mixer": mixer, "n": n, "batch": batch, "tokens_per_batch": tokens,
           "clock": "cpu" if key == "median_cpu_ms" else "wall",
           "predicted": predicted(mixer)[0], "mixlab_status": m_status, "torch_status": t_status,
           "note": note}
    for side, best, runs in (("mixlab", m, mixlab_runs), ("torch", t, torch_runs)):
        if best:
            row[f"{side}_step_ms"] = f"{best[key]:.3f}"
            row[f"{side}_step_ms_rounds"] = ";".join(f"{r[key]:.3f}" for r in runs
                                                     if r.get("status") == "ok")
            row[f"{side}_ms_per_sequence"] = f"{best[key] / batch:.4f}"
            row[f"{side}_step_wall_ms"] = f"{best['median_ms']:.3f}"
            row[f"{side}_peak_rss_mib"] = f"{best['peak_rss_kib'] / 1024:.0f}"
            row[f"{side}_params"] = best["params"]
    if t:
        row["torch_library_rss_mib"] = f"{t['rss_after_import_kib'] / 1024:.0f}"
    if m and t:
        row["ratio_torch_over_mixlab"] = f"{t[key] / m[key]:.3f}"
        pairs = [tr[key] / mr[key] for mr, tr in zip(mixlab_runs, torch_runs)
                 if mr.get("status") == "ok" and tr.get("status") == "ok"]
        if pairs:
            row["ratio_min"], row["ratio_max"] = f"{min(pairs):.3f}", f"{max(pairs):.3f}"
    return row


def describe(row):
    """One printed line per point: the ratio first, never a bare time as the headline."""
    head = f"{row['mixer']:<22} N={row['n']:<5} B={row['batch']:<4}"
    if row.get("ratio_torch_over_mixlab"):
        spread = (f" (per round {row['ratio_min']}-{row['ratio_max']})"
                  if row.get("ratio_min") != row.get("ratio_max") else "")
        text = (f"mixlab/PyTorch speed {float(row['ratio_torch_over_mixlab']):.2f}x{spread}; "
                f"peak RSS mixlab {row['mixlab_peak_rss_mib']} MiB, PyTorch "
                f"{row['torch_peak_rss_mib']} MiB")
    else:
        text = (f"mixlab {row['mixlab_status']}"
                + (f" (peak {row['mixlab_peak_rss_mib']} MiB)" if row.get("mixlab_peak_rss_mib") else "")
                + f", PyTorch {row['torch_status']}"
                + (f" (peak {row['torch_peak_rss_mib']} MiB)" if row.get("torch_peak_rss_mib") else ""))
    if row.get("mixlab_params") and row.get("torch_params") and \
            row["mixlab_params"] != row["torch_params"]:
        text += f"; PARAMETERS DIFFER {row['mixlab_params']}/{row['torch_params']}"
    return f"{head} {text}" + (f" [{row['note']}]" if row.get("note") else "")


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})


def end_slope(pts):
    """Slope between the two longest lengths that ran."""
    return fit_exponent([p[0] for p in pts[-2:]], [p[1] for p in pts[-2:]])


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def exponents(rows, mixers, lengths):
    """{mixer: fit summary} from the rows (time per sequence against N)."""
    table = {}
    for m in mixers:
        entry = {"mixer": m, "predicted": predicted(m)[0],
                 "predicted_exponent": fmt(predicted_exponent(m, lengths))}
        for side in ("mixlab", "torch"):
            pts = sorted((r["n"], float(r[f"{side}_ms_per_sequence"])) for r in rows
                         if r["mixer"] == m and r.get(f"{side}_ms_per_sequence"))
            entry[f"{side}_points"] = pts
            entry[f"{side}_exponent"] = fmt(fit_exponent([p[0] for p in pts], [p[1] for p in pts]))
            entry[f"{side}_end_slope"] = fmt(end_slope(pts)) if len(pts) >= 2 else "-"
            entry[f"{side}_lengths"] = f"{pts[0][0]}-{pts[-1][0]}" if pts else "-"
            stops = [r for r in rows if r["mixer"] == m and r[f"{side}_status"] != "ok"]
            entry[f"{side}_stopped"] = (f"{stops[0][f'{side}_status']} at N={stops[0]['n']}"
                                        if stops else "")
        table[m] = entry
    return table


EXPONENT_FIELDS = ["mixer", "predicted", "predicted_exponent", "mixlab_exponent",
                   "mixlab_end_slope", "mixlab_lengths", "mixlab_stopped", "torch_exponent",
                   "torch_end_slope", "torch_lengths", "torch_stopped"]


def figures(out, table, args):
    lengths = args.lengths_list
    for side, name in (("mixlab", "mixlab"), ("torch", "PyTorch eager")):
        series = [(f"{m}: {e[f'{side}_exponent']} (spec {e['predicted']})", e[f"{side}_points"], False)
                  for m, e in table.items() if e[f"{side}_points"]]
        loglog_svg(os.path.join(out, f"time-{side}.svg"),
                   f"{name}: one training step per sequence, d={args.dim}, {blocks(args)}, "
                   f"{args.tokens} tokens a step",
                   "sequence length N (tokens)", "time per sequence (ms)", series, lengths,
                   guides=(1, 2))
    rows = read_rows(os.path.join(out, "results.csv"))
    series = []  # one colour per mixer: solid mixlab, dashed PyTorch, one legend line
    for i, m in enumerate(table):
        for side, dashed in (("mixlab", False), ("torch", True)):
            pts = [(int(r["n"]), float(r[f"{side}_peak_rss_mib"])) for r in rows
                   if r["mixer"] == m and r[f"{side}_peak_rss_mib"]]
            if pts:
                series.append((None if dashed else m, pts, dashed, i))
    loglog_svg(os.path.join(out, "memory.svg"),
               f"peak RSS of one training step ({args.tokens} tokens a step): "
               "mixlab solid, PyTorch dashed",
               "sequence length N (tokens)", "peak RSS (MiB)", series, lengths)


def report_fits(out, rows, mixers, args):
    """exponents.csv, the figures and the printed table of fits; the figures' problems."""
    table = exponents(rows, mixers, args.lengths_list)
    write_csv(os.path.join(out, "exponents.csv"), table.values(), EXPONENT_FIELDS)
    figures(out, table, args)
    print("# fitted exponent of the time per sequence in N (least squares of log time on log N "
          "over the lengths that ran; end: the slope between the two longest)")
    print(f"{'mixer':<26} {'spec':>20} {'mixlab fit':>10} {'end':>5} {'PyTorch fit':>11} "
          f"{'end':>5}  lengths (mixlab; PyTorch)")
    for e in table.values():
        spec = f"{e['predicted']} ({e['predicted_exponent']})" if e["predicted"] == "N log N" \
            else e["predicted"]
        print(f"{e['mixer']:<26} {spec:>20} {e['mixlab_exponent']:>10} {e['mixlab_end_slope']:>5} "
              f"{e['torch_exponent']:>11} {e['torch_end_slope']:>5}  {e['mixlab_lengths']}"
              f"{' ' + e['mixlab_stopped'] if e['mixlab_stopped'] else ''}; {e['torch_lengths']}"
              f"{' ' + e['torch_stopped'] if e['torch_stopped'] else ''}")
    problems = [q for f in ("time-mixlab.svg", "time-torch.svg", "memory.svg")
                for q in check_svg(os.path.join(out, f))]
    for q in problems:
        print(f"FIGURE: {q}")
    return problems


def replot(out, args):
    """--replot: the fits and figures of a results.csv written before (a run stopped early)."""
    rows = read_rows(os.path.join(out, "results.csv"))
    for r in rows:
        r["n"] = int(r["n"])
    mixers = list(dict.fromkeys(r["mixer"] for r in rows))
    args.lengths_list = sorted({r["n"] for r in rows})
    args.tokens = int(rows[0]["tokens_per_batch"]) if rows else args.tokens
    return 1 if report_fits(out, rows, mixers, args) else 0


def blocks(args):
    return f"{args.layers} block" + ("s" if args.layers != 1 else "")


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def find_torch_python():
    """.venv/bin/python (scripts/bench-speed.sh's) or python3, whichever has torch installed
    (found, not imported: importing it takes seconds; the worker imports it once)."""
    root = os.path.dirname(HERE)
    for py in (os.path.join(root, ".venv", "bin", "python"), "python3"):
        try:
            if subprocess.run([py, "-c", "import importlib.util, sys; "
                               "sys.exit(importlib.util.find_spec('torch') is None)"],
                              capture_output=True, timeout=60).returncode == 0:
                return py
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def machine():
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} CPUs"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="two mixers, N up to 256, one round")
    p.add_argument("--out", default=None, help="output folder (default docs/study/scaling/)")
    p.add_argument("--mixers", default="", help="comma-separated (default: every registered one)")
    p.add_argument("--lengths", default="", help="comma-separated N (default 64,...,4096)")
    p.add_argument("--tokens", type=int, default=0, help="tokens per batch (default 4096)")
    p.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)  # --worker's
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="timed steps per run (default 2)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps before them")
    p.add_argument("--rounds", type=int, default=0, help="runs per side, alternating (default 2)")
    p.add_argument("--mem-cap-gib", type=float, default=6.0,
                   help="address space a point may map beyond its start-up (default 6)")
    p.add_argument("--timeout", type=float, default=0, help="seconds per run (default 300)")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="time a step by the process's CPU time (default: on a shared machine it "
                        "leaves out the waits for a core) or by the wall clock")
    p.add_argument("--max-minutes", type=float, default=0,
                   help="stop starting points after this long; the rest are 'not run'")
    p.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    p.add_argument("--python", default="", help="a Python with torch (default: found)")
    p.add_argument("--skip-without-torch", action="store_true",
                   help="exit 77 (CTest's skipped) when no Python here imports torch")
    p.add_argument("--replot", action="store_true",
                   help="run nothing: the fits and figures again from DIR/results.csv (give the "
                        "--dim and --layers it was run with)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.steps = args.steps or 2
    if args.worker:
        return torch_server(args)
    args.timeout = args.timeout or (60 if args.quick else 300)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.tokens = args.tokens or (512 if args.quick else 4096)
    if args.quick and args.layers == 2:
        args.layers = 1
    args.lengths_list = ([int(n) for n in args.lengths.split(",")] if args.lengths else
                         [64, 128, 256] if args.quick else [64 << i for i in range(7)])
    out = args.out or os.path.join(os.path.dirname(HERE), "docs", "study", "scaling")
    if args.replot:
        return replot(out, args)
    args.python = args.python or find_torch_python()
    if not args.python:
        if args.skip_without_torch:
            print("SKIP: no PyTorch (.venv/ or python3); scripts/bench-speed.sh installs it")
            return 77
        sys.exit("scaling.py: no Python with torch: scripts/bench-speed.sh installs it in .venv/, "
                 "or name one with --python")
    exe = os.path.join(args.build, "bench_train_step")
    if not os.access(exe, os.X_OK):
        sys.exit(f"scaling.py: no {exe}: build the bench_train_step target first")
    registered = speed_table.registered_mixers(args.build)
    mixers = (args.mixers.split(",") if args.mixers else
              QUICK_MIXERS if args.quick else registered)
    os.makedirs(out, exist_ok=True)
    started = time.time()
    server = TorchServer(args)
    version = server.version
    print(f"# cost against length: mixlab vs PyTorch {version} eager, {machine()}, "
          f"{args.threads} thread(s); d={args.dim}, {blocks(args)}, {args.tokens} tokens a "
          f"step (B = {args.tokens}/N), {args.rounds} round(s) of {args.steps} timed steps per "
          f"side, cap {args.mem_cap_gib:g} GiB per run"
          + (" (--quick: numbers not meaningful)" if args.quick else ""))
    print(f"# timings taken beside other work on a shared machine: each step timed by "
          f"{'the process CPU time' if args.clock == 'cpu' else 'the wall clock'}, the best of "
          f"the rounds kept; ratio = PyTorch time / mixlab time (above 1: mixlab is faster)")
    key = "median_cpu_ms" if args.clock == "cpu" else "median_ms"
    sides = (("mixlab", lambda m, n, b: mixlab_point(args, m, n, b)), ("torch", server.point))
    for mixer in mixers:
        if mixer not in registered:
            print(f"{mixer}: not a registered mixer ({', '.join(registered)})")
            return 2
    # Why a side stops for a mixer (over the cap, out of time, no PyTorch model): its longer
    # lengths are not tried.
    given_up = {m: {"mixlab": "", "torch": "" if server.knows(m) else "no PyTorch model"}
                for m in mixers}
    # Lengths outermost: should --max-minutes stop the run, every mixer has the same lengths.
    rows = []
    for n in args.lengths_list:
        batch = max(1, args.tokens // n)
        for mixer in mixers:
            note = ""
            runs = {"mixlab": [], "torch": []}
            if args.max_minutes and time.time() - started > args.max_minutes * 60:
                note = "not run: time budget"
            else:
                for _ in range(args.rounds):
                    for side, point in sides:
                        if given_up[mixer][side]:
                            continue
                        result = point(mixer, n, batch)
                        runs[side].append(result)
                        if result["status"] != "ok":
                            given_up[mixer][side] = f"{result['status']} at N={n}"
                            if result["status"] == "failed":
                                print(f"  {side} failed at N={n}: {result.get('error')}")
            row = csv_row(mixer, n, batch, args.tokens, runs["mixlab"], runs["torch"], note, key)
            for side in ("mixlab", "torch"):
                reason = given_up[mixer][side]
                if not runs[side] and reason and not note:
                    row[f"{side}_status"] = (reason if reason == "no PyTorch model"
                                             else f"not run ({reason})")
            rows.append(row)
            print(describe(row), flush=True)
            write_csv(os.path.join(out, "results.csv"), rows, CSV_FIELDS)
    server.close()
    problems = report_fits(out, rows, mixers, args)
    failed = [r for r in rows if "failed" in (r["mixlab_status"], r["torch_status"])]
    differ = [r for r in rows if r.get("mixlab_params") and r.get("torch_params")
              and r["mixlab_params"] != r["torch_params"]]
    print(f"# {time.time() - started:.0f} s; wrote {out}/results.csv, exponents.csv, "
          "time-mixlab.svg, time-torch.svg, memory.svg")
    return 1 if problems or failed or differ else 0


if __name__ == "__main__":
    sys.exit(main())
