#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ (except checkpoint/, which the checkpoint target writes
itself: MIXLAB_FUZZ_WRITE_SEEDS=fuzz/corpus/checkpoint build-sanitize/fuzz_checkpoint). Each file
is a small valid input; a target's first byte, where it has one, selects the reader's mode (see the
target's header comment). Run from the repository root; rewrites the files in place."""
import gzip
import os
import struct


def put(target, name, data):
    os.makedirs(f"fuzz/corpus/{target}", exist_ok=True)
    with open(f"fuzz/corpus/{target}/{name}", "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def idx(dims, payload):
    return struct.pack(">I", 0x0800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


put("json", "object", '{"mixer": "synth-mix:R+V", "dim": 64, "opts": {"rank": "8"}, "x": [1, -2.5e-3, true, null]}')
put("json", "escapes", '["tab\\t", "quote\\"", "\\u00e9\\ud83d\\ude00", "caf\u00e9", 1e308, -0.0, []]')
put("json", "nested", '{"a": {"b": {"c": [[[]], {}]}}, "n": 12345678901234}')

labels = idx([5], bytes([0, 1, 2, 9, 3]))
images = idx([2, 3, 3], bytes(range(18)))
put("idx", "labels", b"\x00" + labels)
put("idx", "images", b"\x00" + images)
put("idx", "labels-gz", b"\x00" + gzip.compress(labels))  # a gzip file read as such
put("idx", "images-gzip-mode", b"\x01" + images)  # the target compresses it

pairs = "walk twice\tWALK WALK\njump left\tLTURN JUMP\r\n\n  \nlook\tLOOK\n"
labelled = "pos\tgood film\nneg\tbad \u00e9t\u00e9 film\n\nneg\tawful\n"
put("text_files", "pairs-words", b"\x01" + pairs.encode())
put("text_files", "pairs-chars", b"\x03" + pairs.encode())
put("text_files", "pairs-gz", b"\x05" + pairs.encode())
put("text_files", "labelled-words", b"\x00" + labelled.encode())
put("text_files", "labelled-chars-gz", b"\x06" + labelled.encode())

put("cmudict", "cmudict", b"\x00" + b";;; comment\nABLE  EY1 B AH0 L\nABLE(1)  EY1 B L # alt\nO'BRIEN  OW0 B R AY1 AH0 N\n")
put("cmudict", "g2p-train", b"\x01" + b"ABLE\tEY B AH L\nABLE\tEY B L\nZOO\tZ UW\n")
put("cmudict", "g2p-ref", b"\x02" + b"ABLE\tEY B AH L\tEY B L\nZOO\tZ UW\n")
put("cmudict", "cmudict-gz", b"\x04" + b"ZOO  Z UW1\n")

put("ini_config", "run-config", "data=\"pairs.tsv\"\nout=\"runs/x\"\nseed=3\n[translate.train]\nmixer=\"attention\"\ndim=16\nmixer-opt=[\"rank=4\", \"fd-a=2\"]\nresume=false\n")
put("ini_config", "comments", "; comment\n# another\n[classify]\n[classify.train]\nlr = 3e-3\nquiet = true\nname = 'single quoted'\n")

for name, spec in {
    "attention": "attention\n",
    "synth-mix": "synth-mix:R+V+D\nrank=4\n",
    "synth-fdense": "synth-fdense\nfd-a=2\n",
    "lightconv": "lightconv\nkernel=3\n",
    "amlp": "amlp\nhidden=16\nattn-dim=8\n",
    "external": "external\nslots=4\nexpansion=1\n",
    "linformer": "linformer\nproj-len=2\n",
    "fnet": "fnet\nfnet-padded=true\n",
}.items():
    put("mixer_spec", name, spec)
