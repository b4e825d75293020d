#!/usr/bin/python3
"""Independent reference for mxserve's byte-level BPE tokenizer (src/tokenizer/).

Written from the published Hugging Face `tokenizers` algorithm, sharing no code with the C++:
the GPT-2 "merge the lowest-ranked pair everywhere, repeat" loop (not a heap), the `regex`
module for pre-tokenizer patterns (not PCRE2) and Python's `unicodedata` for NFC.

Subcommands:
  fixtures OUT_DIR      train a tiny BPE on a built-in corpus and write the test
                        tokenizer.json files plus their golden encode/decode files
  golden TOKENIZER OUT  write goldens for any tokenizer.json (e.g. tests/data/tiny)
  encode TOKENIZER TEXT print the reference ids for one text
  gen-nfc OUT_CPP       write the NFC tables (src/tokenizer/unicode_nfc_data.cpp)

Requires Debian's /usr/bin/python3 with python3-regex (\\p{L} support). CI has no Python: the
outputs are committed under tests/tokenizer/.
"""
import argparse
import json
import os
import random
import sys
import unicodedata

import regex

from gpt2_bytes import BYTE_TO_CHAR, CHAR_TO_BYTE  # noqa: F401 (bpe_tokenizer.py imports them here)

GLM_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def byte_level_map(s):
    return "".join(BYTE_TO_CHAR[b] for b in s.encode("utf-8"))


def is_rust_whitespace(c):
    # Rust char::is_whitespace == Unicode White_Space.
    return c in "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" or \
        "\u2000" <= c <= "\u200a"


def is_word_char(c):
    return c.isalnum() or c == "_"


# ---------------------------------------------------------------------------------------------
# Pre-tokenizers: each maps a list of strings to a list of strings.


def split_matches(text, pattern, invert):
    """[(piece, is_match)] covering text, like HF Pattern::find_matches."""
    if text == "":
        return [("", False)]
    out = []
    prev = 0
    for m in pattern.finditer(text):
        s, e = m.span()
        if s == e:
            continue
        if prev != s:
            out.append((text[prev:s], False))
        out.append((text[s:e], True))
        prev = e
    if prev != len(text):
        out.append((text[prev:], False))
    if invert:
        out = [(p, not f) for p, f in out]
    return out


def apply_behavior(matches, behavior):
    if behavior == "Isolated":
        pieces = [p for p, _ in matches]
    elif behavior == "Removed":
        pieces = [p for p, f in matches if not f]
    elif behavior == "MergedWithPrevious":
        pieces = []
        prev_match = False
        for p, f in matches:
            if f and not prev_match and pieces:
                pieces[-1] += p
            else:
                pieces.append(p)
            prev_match = f
    elif behavior == "MergedWithNext":
        pieces = []
        prev_match = False
        for p, f in reversed(matches):
            if f and not prev_match and pieces:
                pieces[-1] = p + pieces[-1]
            else:
                pieces.append(p)
            prev_match = f
        pieces.reverse()
    elif behavior == "Contiguous":
        pieces = []
        prev_match = False
        for p, f in matches:
            if f == prev_match and pieces:
                pieces[-1] += p
            else:
                pieces.append(p)
            prev_match = f
    else:
        raise ValueError("behavior " + behavior)
    return [p for p in pieces if p != ""]


class CharPattern:
    """A one-character predicate used like a regex (HF's Fn(char) -> bool pattern)."""

    def __init__(self, pred):
        self.pred = pred

    def finditer(self, text):
        class M:
            def __init__(self, s, e):
                self._s, self._e = s, e

            def span(self):
                return self._s, self._e

        for i, c in enumerate(text):
            if self.pred(c):
                yield M(i, i + 1)


def make_pretokenizer(spec):
    if spec is None:
        return lambda pieces: pieces
    t = spec["type"]
    if t == "Sequence":
        subs = [make_pretokenizer(s) for s in spec["pretokenizers"]]

        def seq(pieces):
            for s in subs:
                pieces = s(pieces)
            return pieces
        return seq
    if t == "Split":
        pat = spec["pattern"]
        if "Regex" in pat:
            rx = regex.compile(pat["Regex"])
        else:
            rx = regex.compile(regex.escape(pat["String"]))
        beh = spec["behavior"]
        inv = spec.get("invert", False)
        return lambda pieces: [q for p in pieces for q in apply_behavior(split_matches(p, rx, inv), beh)]
    if t == "Digits":
        pat = CharPattern(lambda c: "0" <= c <= "9")
        beh = "Isolated" if spec.get("individual_digits", False) else "Contiguous"
        return lambda pieces: [q for p in pieces for q in apply_behavior(split_matches(p, pat, False), beh)]
    if t == "ByteLevel":
        prefix = spec.get("add_prefix_space", True)
        use_regex = spec.get("use_regex", True)
        rx = regex.compile(GPT2_PATTERN)

        def bl(pieces):
            out = []
            for p in pieces:
                if prefix and not p.startswith(" "):
                    p = " " + p
                subs = apply_behavior(split_matches(p, rx, False), "Isolated") if use_regex else [p]
                out.extend(byte_level_map(s) for s in subs)
            return out
        return bl
    raise ValueError("unknown pre-tokenizer " + t)


def make_normalizer(spec):
    if spec is None:
        return lambda s: s
    t = spec["type"]
    if t == "NFC":
        return lambda s: unicodedata.normalize("NFC", s)
    if t == "Sequence":
        subs = [make_normalizer(s) for s in spec["normalizers"]]

        def seq(s):
            for n in subs:
                s = n(s)
            return s
        return seq
    raise ValueError("unknown normalizer " + t)


# ---------------------------------------------------------------------------------------------
# The reference tokenizer.


class RefTokenizer:
    """The tools' one byte-level BPE encoder / decoder, over a tokenizer.json (a path or its dict)."""

    def __init__(self, path):
        if isinstance(path, dict):
            j = path
        else:
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
        m = j["model"]
        self.vocab = dict(m["vocab"])
        self.ranks = {}
        for i, mg in enumerate(m["merges"]):
            a, b = mg.split(" ") if isinstance(mg, str) else mg
            self.ranks[(a, b)] = i
        self.pair_of_rank = {r: p for p, r in self.ranks.items()}
        self.ignore_merges = m.get("ignore_merges", False)
        self.added_tokens = j.get("added_tokens", [])
        self.added = {a["content"]: a["id"] for a in self.added_tokens}  # content -> id
        self.id_to_tok = {v: k for k, v in self.vocab.items()}
        for a in self.added_tokens:
            self.id_to_tok[a["id"]] = a["content"]
        self.vocab_size = max(self.id_to_tok) + 1
        self.special_ids = {a["id"] for a in self.added_tokens if a["special"]}
        self.normalize = make_normalizer(j.get("normalizer"))
        self.pretokenize = make_pretokenizer(j.get("pre_tokenizer"))
        self.decoder = j.get("decoder")

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        parts = list(word)
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best):
                    best = r
            if best is None:
                break
            a, b = self.pair_of_rank[best]
            out = []
            i = 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        return [self.vocab[p] for p in parts if p in self.vocab]

    def split_added(self, text, tokens):
        """HF AddedVocabulary::find_matches: leftmost-longest, then the token flags."""
        if not tokens:
            return [(None, text)]
        out = []
        start_offset = 0
        i = 0
        n = len(text)
        while i < n:
            best = None
            for t in tokens:
                c = t["content"]
                if c and text.startswith(c, i) and (best is None or len(c) > len(best["content"])):
                    best = t
            if best is None:
                i += 1
                continue
            start, stop = i, i + len(best["content"])
            i = stop
            if best["single_word"]:
                if (start > 0 and is_word_char(text[start - 1])) or \
                        (stop < n and is_word_char(text[stop])):
                    continue
            if best["lstrip"]:
                s = start
                while s > 0 and is_rust_whitespace(text[s - 1]):
                    s -= 1
                start = max(s, start_offset)
            if best["rstrip"]:
                while stop < n and is_rust_whitespace(text[stop]):
                    stop += 1
                i = stop
            if start_offset < start:
                out.append((None, text[start_offset:start]))
            out.append((best["id"], text[start:stop]))
            start_offset = stop
        if start_offset != n:
            out.append((None, text[start_offset:]))
        return out

    def encode(self, text, allow_special=True):
        usable = [a for a in self.added_tokens if allow_special or not a["special"]]
        raw_tokens = [a for a in usable if not a["normalized"]]
        norm_tokens = [a for a in usable if a["normalized"]]
        ids = []
        for tid, seg in self.split_added(text, raw_tokens):
            if tid is not None:
                ids.append(tid)
                continue
            for tid2, seg2 in self.split_added(self.normalize(seg), norm_tokens):
                if tid2 is not None:
                    ids.append(tid2)
                    continue
                if seg2 == "":
                    continue
                for piece in self.pretokenize([seg2]):
                    ids.extend(self.bpe(piece))
        return ids

    def decode(self, ids, skip_special=False):
        toks = [self.id_to_tok[i] for i in ids if i in self.id_to_tok and
                not (skip_special and i in self.special_ids)]
        if self.decoder is None:
            return " ".join(toks)
        assert self.decoder["type"] == "ByteLevel"
        data = bytearray()
        for t in toks:
            if all(c in CHAR_TO_BYTE for c in t):
                data.extend(CHAR_TO_BYTE[c] for c in t)
            else:
                data.extend(t.encode("utf-8"))
        return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# Training a tiny BPE for the test fixtures.

CORPUS = """\
The quick brown fox jumps over the lazy dog. It's a test; we're testing the tokenizer, and they'll
see that I'd rather not. You've been warned: don't panic! 1234567890 apples cost $3.50 each, or
12,000 for 2024 units. Hello world, hello World, HELLO WORLD. The server streams tokens to clients.
An inference server for sparse attention models loads weights, runs the forward pass and samples.
int main(int argc, char** argv) { return argc > 1 ? std::atoi(argv[1]) : 0; }
for (size_t i = 0; i < n; ++i) { sum += x[i] * w[i]; }  // dot product
def tokenize(text: str) -> list[int]:
    return [vocab[t] for t in text.split()]
    if x == None:   raise ValueError("bad input")
café naïve résumé coöperate façade Ångström über Straße
你好，世界！这是一个测试。我们正在测试分词器。人工智能模型推理服务器。
日本語のテキストも少し含めます。東京は大きな都市です。
한국어 텍스트도 조금 있습니다.
Привет, мир! Это тест токенизатора.
مرحبا بالعالم
😀😃😄 🎉🎉 👍🏽 👩‍💻 ❤️ 🚀
Tabs\tand\tnewlines\n\nand   multiple    spaces     here.
<html><body><p class="x">Some &amp; markup</p></body></html>
{"key": "value", "numbers": [1, 2, 3], "nested": {"a": true, "b": null}}
"""


def train_bpe(corpus, n_merges, pattern):
    rx = regex.compile(pattern)
    counts = {}
    for _ in range(3):
        for w in rx.findall(corpus):
            w = byte_level_map(w)
            counts[w] = counts.get(w, 0) + 1
    words = {tuple(w): c for w, c in counts.items()}
    vocab = [BYTE_TO_CHAR[b] for b in range(256)]
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in words.items():
            for i in range(len(w) - 1):
                pairs[(w[i], w[i + 1])] = pairs.get((w[i], w[i + 1]), 0) + c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        vocab.append(best[0] + best[1])
        nw = {}
        for w, c in words.items():
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] = nw.get(tuple(out), 0) + c
        words = nw
    return vocab, merges


def added(id_, content, special=True, lstrip=False, rstrip=False, single_word=False,
          normalized=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def byte_level_pre(prefix=False, use_regex=False):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True,
            "use_regex": use_regex}


def make_tokenizer_json(vocab, merges, merges_as_arrays, ignore_merges, normalizer, pre,
                        added_tokens):
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": normalizer,
        "pre_tokenizer": pre,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": ignore_merges,
            "vocab": {t: i for i, t in enumerate(vocab)},
            "merges": [list(m) if merges_as_arrays else m[0] + " " + m[1] for m in merges],
        },
    }


def rand_text(rng):
    pools = [
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789", " \t\n\r  ", ".,;:!?'\"()[]{}<>-_=+*/\\|&^%$#@~`",
        "你好世界测试分词器人工智能模型", "日本語のテキスト", "éèêëàâäôöüçñ",
        "e\u0301a\u0300o\u0308n\u0303",  # decomposed accents (NFC composes them)
        "😀😃🎉👍🏽👩‍💻❤️🚀", "ÅΩẛ̣ḱ", "\u0915\u093c\u0958",  # composition exclusions
        "가각간\u1100\u1161\u11a8",  # Hangul, precomposed and jamo
    ]
    n = rng.randint(0, 40)
    out = []
    for _ in range(n):
        p = rng.choice(pools)
        out.append(rng.choice(p) * rng.choice([1, 1, 1, 2, 3]))
    return "".join(out)


FIXED_CASES = [
    "",
    "Hello world",
    "hello  world",
    " leading space",
    "trailing space ",
    "The quick brown fox jumps over the lazy dog.",
    "It's what we're doing, they'll say I'd've",
    "IT'S LOUD, WE'RE LOUD",
    "int main(int argc, char** argv) { return 0; }",
    "    indented code\n\tand tabs\n\n\n",
    "for (size_t i = 0; i < n; ++i) {\n  sum += x[i];\n}\n",
    "你好，世界！这是一个测试。",
    "日本語のテキスト、東京。",
    "한국어 텍스트",
    "Привет, мир!",
    "emoji 😀😃 🎉 👍🏽 👩‍💻 ❤️ 🚀!",
    "café naïve",
    "cafe\u0301 nai\u0308ve",  # decomposed: NFC-normalized where the tokenizer says so
    "\u0915\u093c \u0958 \u1e9b\u0323 \u212b",  # exclusions, singletons, reordering
    "\u1100\u1161\u11a8 \uac00",  # Hangul jamo compose to 각
    "a\u0323\u0302 a\u0302\u0323",  # canonical reordering
    "1234567890 12 123 1234 3.14159 2024-01-01",
    "a1b22c333d4444",
    "    ",
    "\n\n\n",
    " \n \n  \t ",
    "tabs\tand\nnewlines\r\nmixed",
    "<|endoftext|>",
    "Hello<|endoftext|>world",
    "[gMASK]<sop><|system|>You are helpful.<|user|>Hi there!<|assistant|><think>",
    "<|user|> spaced <|assistant|>",
    "<think>reasoning</think>answer",
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
    "<|endoftext|><|endoftext|>",
    "<|endoft",
    "text with <mask> in it and  <mask>  twice",
    "[SEP]   after sep",
    "hello there, hellos, say hello, _hello, hello_",
    "a café and a cafe\u0301",
    "/nothink please",
    "special in\u00a0nbsp\u3000ideographic space",
    "x" * 300,
    "ab" * 200,
    " ".join(["word"] * 50),
    "$$$ @@@ ### %%% ^^^",
    "Ünïcödé ÀÉÎÕÜ ſ ﬁ",
]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def make_goldens(tok_path, name, out_path, extra_cases=(), n_random=150, seed=1234):
    ref = RefTokenizer(tok_path)
    rng = random.Random(seed)
    texts = list(FIXED_CASES) + list(extra_cases) + [rand_text(rng) for _ in range(n_random)]
    cases = []
    for t in texts:
        for allow in (True, False):
            ids = ref.encode(t, allow)
            if not allow and ids == cases[-1]["ids"]:
                continue  # no special tokens in the text: the allow_special=true case suffices
            cases.append({"text": t, "allow_special": allow, "ids": ids,
                          "decoded": ref.decode(ids, False),
                          "decoded_skip_special": ref.decode(ids, True)})
    with open(out_path, "w", encoding="utf-8") as f:  # one case per line keeps diffs readable
        f.write('{"tokenizer": %s, "generator": "tools/bpe_reference.py", "cases": [\n'
                % json.dumps(name))
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    return len(cases)


def make_nfc_goldens(out_path, seed=99):
    """[input, NFC(input)] for every canonically decomposable character (as itself and as its
    NFD), Hangul samples, and random base + combining-mark sequences."""
    cases = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        d = unicodedata.decomposition(c)
        if d and not d.startswith("<"):
            cases.append([c, unicodedata.normalize("NFC", c)])
            nfd = unicodedata.normalize("NFD", c)
            cases.append([nfd, unicodedata.normalize("NFC", nfd)])
    rng = random.Random(seed)
    for _ in range(50):
        s = chr(rng.randint(0xAC00, 0xD7A3))
        cases.append([unicodedata.normalize("NFD", s), s])
    bases = "aeiouAEIOUnNcCsSzZΑαЕеうか가क "
    marks = [chr(c) for c in range(0x300, 0x370)] + ["̣", "̨", "̛", "ͅ",
                                                     "゙", "゚", "़", "ᆨ"]
    for _ in range(1000):
        s = "".join(rng.choice(bases) if rng.random() < 0.4 else rng.choice(marks)
                    for _ in range(rng.randint(1, 8)))
        cases.append([s, unicodedata.normalize("NFC", s)])
    with open(out_path, "w", encoding="utf-8") as f:
        f.write('{"unicode_version": "%s", "cases": [\n' % unicodedata.unidata_version)
        f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
        f.write("\n]}\n")
    print(f"nfc: {len(cases)} cases")


def cmd_fixtures(out_dir):
    make_nfc_goldens(os.path.join(out_dir, "nfc.golden.json"))
    vocab, merges = train_bpe(CORPUS, 700, GLM_PATTERN)
    n = len(vocab)
    glm_added = [added(n + i, c) for i, c in enumerate([
        "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
        "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>",
        "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"])]
    glm_added.append(added(n + len(glm_added), "/nothink", special=False))
    glm_pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": GLM_PATTERN}, "behavior": "Isolated",
         "invert": False},
        byte_level_pre(prefix=False, use_regex=False)]}
    fixtures = {}
    fixtures["glm_style"] = make_tokenizer_json(vocab, merges, False, False, None, glm_pre,
                                                glm_added)
    gpt2_added = [
        added(n, "<|endoftext|>"),
        added(n + 1, "<mask>", lstrip=True),
        added(n + 2, "[SEP]", rstrip=True),
        added(n + 3, "hello", special=False, single_word=True, normalized=True),
        added(n + 4, "café", special=False, normalized=True),
    ]
    fixtures["gpt2_style"] = make_tokenizer_json(
        vocab, merges, True, True, {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                               byte_level_pre(prefix=True, use_regex=True)]},
        gpt2_added)
    # Split behaviours, each followed by the byte-level mapping.
    for beh, pat, inv in [("Removed", {"String": " "}, False),
                          ("MergedWithPrevious", {"Regex": r"[,.!?]"}, False),
                          ("MergedWithNext", {"Regex": r"\s+"}, False),
                          ("Contiguous", {"Regex": r"\p{N}"}, False),
                          ("Isolated", {"Regex": r"\p{L}+"}, True)]:
        name = "split_" + beh.lower() + ("_invert" if inv else "")
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": pat, "behavior": beh, "invert": inv},
            {"type": "Digits", "individual_digits": False},
            byte_level_pre(prefix=False, use_regex=False)]}
        fixtures[name] = make_tokenizer_json(vocab, merges, False, False, {"type": "NFC"}, pre,
                                             glm_added[:3])
    # The test checkpoints' tokenizer (tools/make_fixtures.py), when it is there.
    tiny = os.path.join(out_dir, "..", "data", "tiny", "tokenizer.json")
    if os.path.exists(tiny):
        k = make_goldens(tiny, "../data/tiny/tokenizer.json",
                         os.path.join(out_dir, "tiny.golden.json"))
        print(f"tiny: {k} cases")
    for name, tj in fixtures.items():
        p = os.path.join(out_dir, name + ".tokenizer.json")
        write_json(p, tj)
        k = make_goldens(p, name + ".tokenizer.json", os.path.join(out_dir, name + ".golden.json"),
                         n_random=150 if name.endswith("_style") else 40)
        print(f"{name}: vocab {len(tj['model']['vocab'])}, merges {len(merges)}, {k} cases")


# ---------------------------------------------------------------------------------------------
# NFC tables.


def cmd_gen_nfc(out_cpp):
    ccc = []
    decomp = []
    compose = []
    unsafe = set()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        k = unicodedata.combining(c)
        if k:
            ccc.append((cp, k))
            unsafe.add(cp)
        if 0xAC00 <= cp <= 0xD7A3:
            continue  # Hangul syllables are algorithmic
        d = unicodedata.decomposition(c)
        if d and not d.startswith("<"):
            full = unicodedata.normalize("NFD", c)
            decomp.append((cp, [ord(x) for x in full]))
            parts = [int(x, 16) for x in d.split()]
            if len(parts) == 2 and unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == c:
                compose.append((parts[0], parts[1], cp))
        if unicodedata.normalize("NFC", c) != c:
            unsafe.add(cp)
    for _, second, _ in compose:
        unsafe.add(second)
    unsafe.update(range(0x1161, 0x1176))  # Hangul V jamo
    unsafe.update(range(0x11A8, 0x11C3))  # Hangul T jamo
    compose.sort()
    ranges = []
    for cp in sorted(unsafe):
        if ranges and ranges[-1][1] + 1 == cp:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    pool = []
    dec_rows = []
    for cp, seq in decomp:
        dec_rows.append((cp, len(pool), len(seq)))
        pool.extend(seq)
    lines = [
        "// GENERATED by tools/bpe_reference.py gen-nfc from Python unicodedata "
        f"(Unicode {unicodedata.unidata_version}). Do not edit.",
        "// clang-format off",
        '#include "tokenizer/unicode_nfc_data.h"', "", "namespace mx::tok::nfc_data {", "",
        f'const char kUnicodeVersion[] = "{unicodedata.unidata_version}";', "",
        f"const CccEntry kCcc[{len(ccc)}] = {{"]
    lines += [f"  {{0x{cp:X}, {k}}}," for cp, k in ccc]
    lines += ["};", f"const int kCccCount = {len(ccc)};", "",
              f"const char32_t kDecompPool[{len(pool)}] = {{"]
    for i in range(0, len(pool), 10):
        lines.append("  " + " ".join(f"0x{x:X}," for x in pool[i:i + 10]))
    lines += ["};", "", f"const DecompEntry kDecomp[{len(dec_rows)}] = {{"]
    lines += [f"  {{0x{cp:X}, {off}, {n}}}," for cp, off, n in dec_rows]
    lines += ["};", f"const int kDecompCount = {len(dec_rows)};", "",
              f"const ComposeEntry kCompose[{len(compose)}] = {{"]
    lines += [f"  {{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for a, b, c in compose]
    lines += ["};", f"const int kComposeCount = {len(compose)};", "",
              f"const RangeEntry kUnsafe[{len(ranges)}] = {{"]
    lines += [f"  {{0x{a:X}, 0x{b:X}}}," for a, b in ranges]
    lines += ["};", f"const int kUnsafeCount = {len(ranges)};", "",
              "}  // namespace mx::tok::nfc_data", ""]
    with open(out_cpp, "w") as f:
        f.write("\n".join(lines))
    print(f"ccc {len(ccc)}, decomp {len(dec_rows)} (pool {len(pool)}), compose {len(compose)}, "
          f"unsafe ranges {len(ranges)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fixtures")
    p.add_argument("out_dir")
    p = sub.add_parser("golden")
    p.add_argument("tokenizer")
    p.add_argument("out")
    p.add_argument("--name", default=None)
    p = sub.add_parser("encode")
    p.add_argument("tokenizer")
    p.add_argument("text")
    p.add_argument("--no-special", action="store_true")
    p = sub.add_parser("gen-nfc")
    p.add_argument("out_cpp")
    a = ap.parse_args()
    if a.cmd == "fixtures":
        cmd_fixtures(a.out_dir)
    elif a.cmd == "golden":
        print(make_goldens(a.tokenizer, a.name or os.path.basename(a.tokenizer), a.out), "cases")
    elif a.cmd == "encode":
        print(RefTokenizer(a.tokenizer).encode(a.text, not a.no_special))
    elif a.cmd == "gen-nfc":
        cmd_gen_nfc(a.out_cpp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
