#!/usr/bin/env python3
"""mixlab against PyTorch on one training step of the same translator, same threads.

The model is the one bench_train_step builds: a pre-LN attention encoder-decoder (GELU FFN of
width 4d, learned positions, final LayerNorms), label-smoothed cross-entropy (0.1), gradient
clipping at 1 and AdamW, on the same synthetic batch (lengths vary like CMUdict words). Both run
in turn from this script; it prints each one's median step and the ratio mixlab / PyTorch in
examples per second (above 1: mixlab is faster).

    python3 bench/vs_torch.py [--threads N] [--dim D] [--layers L] [--batch B] [--len T]

PyTorch is only a baseline here (Debian's python3-torch: `apt-get install python3-torch`),
never a dependency of the engine.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import torch
    from torch import nn
except ImportError:
    # Debian's python3-torch lives in the system Python, which a pyenv or venv python3 hides.
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath(
            "/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("vs_torch.py needs PyTorch: apt-get install python3-torch (or pip install torch)")


def synthetic_batch(batch, length, src_vocab=31, tgt_vocab=43):
    """The batch of bench_train_step.cpp: example i has len - i % (len // 2) tokens."""
    src = torch.zeros(batch, length, dtype=torch.long)
    tgt = torch.zeros(batch, length, dtype=torch.long)
    for i in range(batch):
        n = length - i % (length // 2)
        for t in range(n):
            src[i, t] = 3 + (i * 7 + t * 3) % (src_vocab - 3)
            tgt[i, t] = 3 + (i * 5 + t * 11) % (tgt_vocab - 3)
        tgt[i, 0] = 1
        tgt[i, n - 1] = 2
    return src, tgt


class Translator(nn.Module):
    def __init__(self, dim, layers, length, src_vocab=31, tgt_vocab=43):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, dim)
        self.tgt_embed = nn.Embedding(tgt_vocab, dim)
        self.src_pos = nn.Parameter(torch.randn(length, dim) * 0.02)
        self.tgt_pos = nn.Parameter(torch.randn(length, dim) * 0.02)
        self.core = nn.Transformer(d_model=dim, nhead=4, num_encoder_layers=layers,
                                   num_decoder_layers=layers, dim_feedforward=4 * dim,
                                   dropout=0.1, activation="gelu", batch_first=True,
                                   norm_first=True)
        self.head = nn.Linear(dim, tgt_vocab)

    def forward(self, src, tgt_in):
        s, t = src.size(1), tgt_in.size(1)
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.core(self.src_embed(src) + self.src_pos[:s], self.tgt_embed(tgt_in) + self.tgt_pos[:t],
                      tgt_mask=causal, src_key_padding_mask=src.eq(0),
                      tgt_key_padding_mask=tgt_in.eq(0), memory_key_padding_mask=src.eq(0))
        return self.head(h)


def torch_step_seconds(args):
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = Translator(args.dim, args.layers, args.len).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    src, tgt = synthetic_batch(args.batch, args.len)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    times = []
    for step in range(args.steps + 3):  # 3 warm-up steps
        t0 = time.perf_counter()
        logits = model(src, tgt_in)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    params = sum(p.numel() for p in model.parameters())
    return statistics.median(times), params


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--len", type=int, default=12)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--build", default=os.environ.get("MIXLAB_BUILD_DIR", "build"))
    args = p.parse_args()
    flags = ["--threads", args.threads, "--dim", args.dim, "--layers", args.layers,
             "--batch", args.batch, "--len", args.len, "--steps", args.steps]
    out = subprocess.run([os.path.join(args.build, "bench_train_step")] + [str(f) for f in flags],
                         check=True, capture_output=True, text=True).stdout
    print(out.strip())
    mixlab_ms = float(re.search(r"median step ([0-9.]+) ms", out).group(1))
    secs, params = torch_step_seconds(args)
    print(f"torch  {torch.__version__} threads={torch.get_num_threads()} params={params}: "
          f"median step {secs * 1e3:.2f} ms, {args.batch / secs:.1f} examples/s")
    print(f"ratio mixlab/torch (examples/s): {secs * 1e3 / mixlab_ms:.2f}")


if __name__ == "__main__":
    main()
