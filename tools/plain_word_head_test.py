#!/usr/bin/env python3
"""Tests of tools/plain_word_head.py on tiny hand-built files (standard library only): the rows
it keeps and zeroes in a safetensors file and a GGUF, every other byte left as it was, and the
malformed inputs it refuses. Run by ctest (bench.plain_word_head) or directly."""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plain_word_head.py")

# Byte-level texts: "Ġ" is the space byte, "Ã©" the two bytes of "é".
VOCAB = ["a", "b", "Ġ", "Ġa", "Ġb", "ab", "ĠZ", "Ġ1", "aĠ", "ĠÃ©", "ĠĠ", "Ġab"]
PLAIN = {3, 4, 6}  # " a", " b", " Z": a space and one ASCII letter
V, D = len(VOCAB), 8


def row_bytes(v, width=D * 2):
    return bytes((v * 7 + i) % 251 + 1 for i in range(width))  # no zero byte


def lm_head():
    return b"".join(row_bytes(v) for v in range(V))


def write_tokenizer(path, vocab=VOCAB):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(vocab)},
                             "merges": []}}, f)


def write_safetensors(path, head=None, dtype="BF16"):
    head = lm_head() if head is None else head
    other = bytes(range(1, 17))  # a tensor before lm_head: its offsets do not start at 0
    header = {"model.norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
              "lm_head.weight": {"dtype": dtype, "shape": [V, D],
                                 "data_offsets": [16, 16 + len(head)]}}
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + other + head)


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, tokens=VOCAB, head=None, ttype=30, d=D):
    head = lm_head() if head is None else head
    embd = bytes(range(1, 41))  # the first tensor: output.weight's offset is past it
    kv = [gguf_str("general.architecture") + struct.pack("<I", 8) + gguf_str("glm-dsa"),
          gguf_str("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) +
          b"".join(gguf_str(t) for t in tokens)]
    infos = [gguf_str("token_embd.weight") + struct.pack("<I2QIQ", 2, 4, 5, 30, 0),
             gguf_str("output.weight") + struct.pack("<I2QIQ", 2, d, V, ttype, 64)]
    out = b"GGUF" + struct.pack("<IQQ", 3, 2, len(kv)) + b"".join(kv) + b"".join(infos)
    out += bytes(-len(out) % 32)
    data = embd + bytes(64 - len(embd)) + head
    with open(path, "wb") as f:
        f.write(out + data)
    return len(out)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class PlainWordHeadTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.tok = os.path.join(self.d, "tokenizer.json")
        self.st = os.path.join(self.d, "model.safetensors")
        self.gg = os.path.join(self.d, "ik.gguf")
        write_tokenizer(self.tok)

    def tearDown(self):
        self.tmp.cleanup()

    def test_keeps_plain_word_rows_in_both_files_and_nothing_else_changes(self):
        write_safetensors(self.st)
        data_start = write_gguf(self.gg)
        st_before, gg_before = read(self.st), read(self.gg)
        r = run("--tokenizer", self.tok, "--safetensors", self.st, "--gguf", self.gg)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = b"".join(row_bytes(v) if v in PLAIN else bytes(D * 2) for v in range(V))
        st_after, gg_after = read(self.st), read(self.gg)
        head_at = len(st_before) - len(want)
        self.assertEqual(st_after[head_at:], want)
        self.assertEqual(st_after[:head_at], st_before[:head_at])
        head_at = data_start + 64
        self.assertEqual(gg_after[head_at:head_at + len(want)], want)
        self.assertEqual(gg_after[:head_at], gg_before[:head_at])
        self.assertEqual(len(gg_after), len(gg_before))
        digest = hashlib.sha256(want).hexdigest()
        self.assertEqual(r.stdout.count(digest), 2, r.stdout)
        self.assertIn("keeping 3 rows: ids [3, 4, 6]", r.stdout)
        self.assertIn(f"zeroed {V - 3} of {V} lm_head rows", r.stdout)

    def test_quantized_gguf_head_zeroes_whole_blocks(self):
        # q8_0: 34 bytes per 32 elements; a row of 32 elements is one block.
        head = b"".join(row_bytes(v, 34) for v in range(V))
        data_start = write_gguf(self.gg, head=head, ttype=8, d=32)
        r = run("--tokenizer", self.tok, "--gguf", self.gg)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = read(self.gg)[data_start + 64:]
        want = b"".join(row_bytes(v, 34) if v in PLAIN else bytes(34) for v in range(V))
        self.assertEqual(got, want)

    def test_gguf_vocabulary_must_agree_with_the_tokenizer(self):
        write_gguf(self.gg, tokens=["bb" if t == "Ġb" else t for t in VOCAB])
        before = read(self.gg)
        r = run("--tokenizer", self.tok, "--gguf", self.gg)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("plain-word ids differ", r.stderr)
        self.assertEqual(read(self.gg), before)  # refused before any write

    def test_malformed_inputs_are_refused_naming_what(self):
        def raw(path, data):
            def write():
                with open(path, "wb") as f:
                    f.write(data)
            return write

        def truncated_gguf():
            write_gguf(self.gg)
            with open(self.gg, "r+b") as f:
                f.truncate(40)

        cases = [
            (lambda: write_safetensors(self.st, dtype="F32"), "--safetensors", "expected BF16"),
            (raw(self.st, b"\x05\x00"), "--safetensors", "too short"),
            (raw(self.st, struct.pack("<Q", 1 << 40)), "--safetensors", "at most 100 MiB"),
            (lambda: write_safetensors(self.st, head=lm_head()[:-2]), "--safetensors",
             "expected 192"),
            (raw(self.gg, b"GGML" + bytes(20)), "--gguf", "not a GGUF"),
            (truncated_gguf, "--gguf", "truncated"),
            (lambda: write_gguf(self.gg, ttype=12), "--gguf", "not editable by rows"),  # q4_K
        ]
        for write, flag, msg in cases:
            write()
            path = self.st if flag == "--safetensors" else self.gg
            r = run("--tokenizer", self.tok, flag, path)
            self.assertNotEqual(r.returncode, 0, msg)
            self.assertIn(msg, r.stderr, msg)
        write_tokenizer(self.tok, vocab=["a", "b", "ab"])
        write_safetensors(self.st)
        r = run("--tokenizer", self.tok, "--safetensors", self.st)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no plain-word tokens", r.stderr)
        with open(self.tok, "w") as f:
            f.write('{"model": {"type": "Unigram"}}')
        r = run("--tokenizer", self.tok, "--safetensors", self.st)
        self.assertIn("not a BPE tokenizer.json", r.stderr)


if __name__ == "__main__":
    unittest.main()
