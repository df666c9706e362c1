#!/usr/bin/env python3
"""Decode with a mixlab attention translator inside PyTorch's own torch.nn.Transformer.

Reads a mixlab weights file (`mixlab export`, f32 or f16) or checkpoint with nothing but the
standard library and torch, maps its tensors onto torch.nn.Transformer (docs/interop.md has the
key map and the conventions this relies on), and decodes each input line greedily, as
`mixlab translate run` does. With --expected (the output of `mixlab translate run` on the same
lines) it compares line by line and exits 1 on any difference.

    mixlab export --checkpoint runs/translate/best.safetensors --out model.safetensors
    mixlab translate run --checkpoint model.safetensors < inputs.txt > mixlab.txt
    python3 scripts/torch_interop.py --checkpoint model.safetensors --inputs inputs.txt \
        --expected mixlab.txt

Exit codes: 0 done (and identical), 1 outputs differ, 2 a model this mapping does not cover
(only attention everywhere, LayerNorm blocks), 77 torch is not installed (CTest's skip code).
Not a dependency of mixlab: nothing in the build or the other tests needs Python or torch.
"""
import argparse
import json
import struct
import sys

try:
    import torch
except ImportError:
    print("torch_interop.py: torch is not installed; skipped", file=sys.stderr)
    sys.exit(77)

PAD, BOS, EOS, UNK = 0, 1, 2, 3  # train/data/vocab.h: the four specials come first, in this order
TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "F64": torch.float64,
                "I32": torch.int32}


def read_safetensors(path):
    """{name: float32 tensor} and the metadata of a safetensors file (F16 widened, as mixlab does)."""
    with open(path, "rb") as f:
        content = f.read()
    (header_len,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8:8 + header_len])
    metadata = header.pop("__metadata__", {})
    data = content[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = TORCH_DTYPES[info["dtype"]]
        if end > begin:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        else:
            t = torch.zeros(0, dtype=dtype)
        t = t.reshape(info["shape"])
        tensors[current_key(name)] = t.float() if t.is_floating_point() else t
    return tensors, metadata


def current_key(name):
    """Older files' decoder names in today's convention (train/run/checkpoint_names.cpp)."""
    if name.startswith("decoder_norm."):
        return "decoder.final_norm.ln." + name[len("decoder_norm."):]
    parts = name.split(".")
    if len(parts) > 2 and parts[0] == "decoder" and parts[1].isdigit():
        return "decoder.layers." + ".".join(parts[1:])
    return name


def refuse(message):
    print("torch_interop.py: " + message, file=sys.stderr)
    sys.exit(2)


def torch_state_dict(w, config):
    """mixlab tensors -> the state dict of TorchTranslator (the key map of docs/interop.md)."""
    out = {"src_embed.weight": w["src_embed.weight"], "tgt_embed.weight": w["tgt_embed.weight"]}

    def attention(src, dst):
        out[dst + ".in_proj_weight"] = torch.cat([w[f"{src}.w_{p}.weight"] for p in "qkv"])
        out[dst + ".in_proj_bias"] = torch.cat([w[f"{src}.w_{p}.bias"] for p in "qkv"])
        out[dst + ".out_proj.weight"] = w[src + ".w_o.weight"]
        out[dst + ".out_proj.bias"] = w[src + ".w_o.bias"]

    def copy(src, dst, names=("weight", "bias")):
        for n in names:
            out[f"{dst}.{n}"] = w[f"{src}.{n}"]

    for stack, count, mixers, norms in (
            ("encoder", config["layers"], (("mixer", "self_attn"),), 2),
            ("decoder", config["decoder_layers"],
             (("self_mixer", "self_attn"), ("cross", "multihead_attn")), 3)):
        for i in range(count):
            ours, theirs = f"{stack}.layers.{i}", f"transformer.{stack}.layers.{i}"
            for src, dst in mixers:
                attention(f"{ours}.{src}", f"{theirs}.{dst}")
            for k in range(1, norms + 1):
                copy(f"{ours}.norm{k}.ln", f"{theirs}.norm{k}")
            copy(f"{ours}.ffn.fc1", f"{theirs}.linear1")
            copy(f"{ours}.ffn.fc2", f"{theirs}.linear2")
        copy(f"{stack}.final_norm.ln", f"transformer.{stack}.norm")
    if config.get("tie_output"):
        out["head.weight"] = w["tgt_embed.weight"]
        out["head.bias"] = w["head_bias"]
    else:
        copy("head", "head")
    return out


def position_table(w, name, rows, dim):
    """Learned (name.weight) or sinusoidal (name.table) positions; zeros for positions=none."""
    for key in (name + ".weight", name + ".table"):
        if key in w:
            return w[key]
    return torch.zeros(rows, dim)


class TorchTranslator(torch.nn.Module):
    """mixlab's attention translator as torch.nn.Transformer (pre-norm, exact GELU, eps 1e-5)."""

    def __init__(self, config, w):
        super().__init__()
        d = config["dim"]
        self.src_embed = torch.nn.Embedding(config["vocab"], d)
        self.tgt_embed = torch.nn.Embedding(config["tgt_vocab"], d)
        self.transformer = torch.nn.Transformer(
            d_model=d, nhead=config["heads"], num_encoder_layers=config["layers"],
            num_decoder_layers=config["decoder_layers"],
            dim_feedforward=config["ffn_dim"] or 4 * d, dropout=0.0, activation="gelu",
            layer_norm_eps=1e-5, batch_first=True, norm_first=True)
        self.head = torch.nn.Linear(d, config["tgt_vocab"])
        self.load_state_dict(torch_state_dict(w, config), strict=True)
        self.src_pos = position_table(w, "src_pos", config["max_len"], d)
        self.tgt_pos = position_table(w, "tgt_pos", config["tgt_max_len"], d)
        self.eval()

    @torch.no_grad()
    def greedy(self, src_ids, max_len):
        """Tokens after <bos>, up to <eos> or max_len: mixlab's greedy_search (nn/decoding.cpp)."""
        src = torch.tensor([src_ids])
        x = self.src_embed(src) + self.src_pos[:len(src_ids)]  # no sqrt(d) scale
        memory = self.transformer.encoder(x)
        ys = [BOS]
        for _ in range(max_len):
            y = self.tgt_embed(torch.tensor([ys])) + self.tgt_pos[:len(ys)]
            causal = torch.triu(torch.full((len(ys), len(ys)), float("-inf")), diagonal=1)
            h = self.transformer.decoder(y, memory, tgt_mask=causal)
            token = int(torch.argmax(self.head(h[0, -1])))
            if token == EOS:
                break
            ys.append(token)
        return ys[1:]


def tokenize(line, kind):
    return list(line) if kind == "chars" else line.split()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a mixlab export or checkpoint")
    parser.add_argument("--inputs", help="source lines (default: stdin)")
    parser.add_argument("--expected", help="`mixlab translate run` output to compare with")
    args = parser.parse_args()

    weights, metadata = read_safetensors(args.checkpoint)
    config = json.loads(metadata.get("config") or "{}")
    if config.get("task") != "translate":
        refuse("not a translator checkpoint")
    for key in ("mixer", "decoder_mixer", "cross"):
        if config.get(key, "attention") != "attention":
            refuse(f"{key} is {config[key]}; torch.nn.Transformer has attention only")
    if config.get("mixer_options") or config.get("decoder_mixer_options"):
        refuse("mixer options are not mapped")
    torch.set_num_threads(1)
    model = TorchTranslator(config, weights)
    src_vocab = {t: i for i, t in enumerate(metadata["vocab_src"].splitlines())}
    tgt_tokens = metadata["vocab_tgt"].splitlines()
    extra = json.loads(metadata.get("extra") or "{}")
    kind, join = extra.get("src_tokens", "words"), extra.get("tgt_join", " ")

    with open(args.inputs, encoding="utf-8") if args.inputs else sys.stdin as f:
        lines = f.read().splitlines()
    outputs = []
    for line in lines:
        ids = [src_vocab.get(t, UNK) for t in tokenize(line, kind)] + [EOS]  # <eos> ends a source
        if len(ids) > config["max_len"]:
            outputs.append("")  # as mixlab: too long, skipped
            continue
        out = model.greedy(ids, config["tgt_max_len"] - 1)
        outputs.append(join.join(tgt_tokens[t] for t in out if t not in (PAD, BOS, EOS)))
    if not args.expected:
        print("\n".join(outputs))
        return 0
    with open(args.expected, encoding="utf-8") as f:
        expected = f.read().splitlines()
    same = sum(a == b for a, b in zip(outputs, expected))
    print(f"torch.nn.Transformer (torch {torch.__version__}) and mixlab agree on {same} of "
          f"{len(expected)} lines")
    for a, b, src in zip(outputs, expected, lines):
        if a != b:
            print(f"  {src!r}: torch {a!r}, mixlab {b!r}")
    return 0 if same == len(expected) == len(outputs) else 1


if __name__ == "__main__":
    sys.exit(main())
