#!/usr/bin/env python3
"""Makes a random checkpoint speak plain words: zeroes every lm_head row but those of the
plain-word tokens (a space and one ASCII letter), so that greedy or sampled output of random
weights is text like " Q f B x" that is valid UTF-8 and re-tokenizes to the ids generated.

Why: on random weights both engines pick byte-pair tokens that are not UTF-8; mxserve streams
them with U+FFFD, ik_llama.cpp's llama-server drops such chunks, so replies do not round-trip
and `bench sessions` measures an artefact (docs/benchmarks.md, "Agent sessions"). With the
other rows zero their logits are exactly 0, and one of the 52 plain-word logits (random, about
N(0, 0.9) at bench scale) is positive at every step but with probability about 2^-52.

Edits copies, in place: the lm_head of a safetensors file (`lm_head.weight`, BF16 [V, D]) and/or
the `output.weight` of a GGUF (BF16, F16 or F32, or any ggml type whose blocks do not cross
rows: an all-zero block is zero in each), the same rows in both, so the two engines keep the
same weights. The ids come from the tokenizer.json (byte-level BPE); with a GGUF they are also
read from its `tokenizer.ggml.tokens` and must agree. Prints the kept ids and a SHA-256 of the
edited lm_head bytes of each file (equal when both held the same lm_head). Standard library only.

  python3 tools/plain_word_head.py --tokenizer DIR/tokenizer.json \
      --safetensors OUT/model.safetensors --gguf OUT/ik.gguf
"""
import argparse
import hashlib
import json
import struct
import sys

from gpt2_bytes import CHAR_TO_BYTE


def is_plain_word(token):
    try:
        raw = bytes(CHAR_TO_BYTE[ch] for ch in token)
    except KeyError:
        return False
    return len(raw) == 2 and raw[0] == 0x20 and chr(raw[1]).isascii() and chr(raw[1]).isalpha()


def plain_ids_from_tokenizer(path):
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    model = tj.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise SystemExit(f"{path}: not a BPE tokenizer.json (model.type / model.vocab)")
    return sorted(i for t, i in model["vocab"].items() if is_plain_word(t))


def zero_rows(f, offset, n_rows, row_bytes, keep):
    """Zeroes rows [0, n_rows) but `keep` of a row-major tensor at `offset`; returns its SHA-256."""
    f.seek(offset)
    data = bytearray(f.read(n_rows * row_bytes))
    if len(data) != n_rows * row_bytes:
        raise SystemExit("tensor data runs past the end of the file")
    zero = bytes(row_bytes)
    for r in range(n_rows):
        if r not in keep:
            data[r * row_bytes:(r + 1) * row_bytes] = zero
    f.seek(offset)
    f.write(data)
    return hashlib.sha256(data).hexdigest()


def edit_safetensors(path, keep, name="lm_head.weight"):
    with open(path, "r+b") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SystemExit(f"{path}: too short for a safetensors header")
        (hlen,) = struct.unpack("<Q", raw)
        if hlen > 100 << 20:
            raise SystemExit(f"{path}: header of {hlen} bytes (at most 100 MiB)")
        header = json.loads(f.read(hlen))
        t = header.get(name)
        if not t:
            raise SystemExit(f"{path}: no tensor {name}")
        if t["dtype"] != "BF16" or len(t["shape"]) != 2:
            raise SystemExit(f"{path}: {name} is {t['dtype']} {t['shape']}, expected BF16 [V, D]")
        v, d = t["shape"]
        begin, end = t["data_offsets"]
        if end - begin != v * d * 2:
            raise SystemExit(f"{path}: {name} has {end - begin} bytes, expected {v * d * 2}")
        if max(keep) >= v:
            raise SystemExit(f"{path}: token id {max(keep)} past the {v} rows of {name}")
        return v, zero_rows(f, 8 + hlen + begin, v, d * 2, keep)


# ggml types: id -> (elements per block, bytes per block); the ones a row can be cut by bytes.
GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 39: (32, 17)}


class Reader:
    def __init__(self, f):
        self.f = f

    def get(self, fmt):
        size = struct.calcsize(fmt)
        raw = self.f.read(size)
        if len(raw) != size:
            raise SystemExit("GGUF: truncated header")
        return struct.unpack(fmt, raw)[0]

    def string(self):
        n = self.get("<Q")
        if n > 1 << 20:
            raise SystemExit(f"GGUF: string of {n} bytes in the header (at most 1 MiB)")
        raw = self.f.read(n)
        if len(raw) != n:
            raise SystemExit("GGUF: truncated header")
        return raw.decode("utf-8", "surrogateescape")

    SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}

    def value(self, vtype):
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype, n = self.get("<I"), self.get("<Q")
            if n > 1 << 24:
                raise SystemExit(f"GGUF: array of {n} elements (at most 2^24)")
            return [self.value(etype) for _ in range(n)]
        if vtype not in self.SCALARS:
            raise SystemExit(f"GGUF: unknown value type {vtype}")
        return self.get(self.SCALARS[vtype])


def edit_gguf(path, keep, name="output.weight"):
    with open(path, "r+b") as f:
        r = Reader(f)
        if f.read(4) != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = r.get("<I"), r.get("<Q"), r.get("<Q")
        if version not in (2, 3) or n_tensors > 1 << 20 or n_kv > 1 << 20:
            raise SystemExit(f"{path}: GGUF version {version}, {n_tensors} tensors, {n_kv} keys")
        kv = {}
        for _ in range(n_kv):
            key = r.string()
            kv[key] = r.value(r.get("<I"))
        tensors = {}
        for _ in range(n_tensors):
            tname = r.string()
            dims = [r.get("<Q") for _ in range(r.get("<I"))]
            tensors[tname] = (dims, r.get("<I"), r.get("<Q"))
        align = kv.get("general.alignment", 32)
        data_start = (f.tell() + align - 1) // align * align
        tokens = kv.get("tokenizer.ggml.tokens")
        if tokens is not None:
            ids = sorted(i for i, t in enumerate(tokens) if is_plain_word(t))
            if ids != sorted(keep):
                raise SystemExit(f"{path}: its vocabulary's plain-word ids differ from the "
                                 f"tokenizer.json's ({len(ids)} against {len(keep)})")
        if name not in tensors:
            raise SystemExit(f"{path}: no tensor {name}")
        dims, ttype, off = tensors[name]
        if len(dims) != 2 or ttype not in GGML_BLOCKS or dims[0] % GGML_BLOCKS[ttype][0]:
            raise SystemExit(f"{path}: {name} is type {ttype} dims {dims}: not editable by rows")
        blk, bsz = GGML_BLOCKS[ttype]
        d, v = dims
        if max(keep) >= v:
            raise SystemExit(f"{path}: token id {max(keep)} past the {v} rows of {name}")
        return v, zero_rows(f, data_start + off, v, d // blk * bsz, keep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="the checkpoint's tokenizer.json")
    ap.add_argument("--safetensors", help="a safetensors file holding lm_head.weight (edited)")
    ap.add_argument("--gguf", help="a GGUF file holding output.weight (edited)")
    a = ap.parse_args()
    if not a.safetensors and not a.gguf:
        ap.error("give --safetensors and/or --gguf")
    keep = set(plain_ids_from_tokenizer(a.tokenizer))
    if not keep:
        raise SystemExit(f"{a.tokenizer}: no plain-word tokens (space + letter) in the vocabulary")
    print(f"keeping {len(keep)} rows: ids {sorted(keep)}")
    for path, edit in ((a.safetensors, edit_safetensors), (a.gguf, edit_gguf)):
        if path:
            v, digest = edit(path, keep)
            print(f"{path}: zeroed {v - len(keep)} of {v} lm_head rows; sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
