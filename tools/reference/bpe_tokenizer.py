"""Byte-level BPE (GPT-2 / GLM style) for the bundled model's tokenizer: training and HF
tokenizer.json export. Encoding and decoding are tools/bpe_reference.py's `RefTokenizer`, the
tools' one BPE (`Tokenizer` below).

Vocabulary layout produced by `train`:
  ids 0..255          single bytes; id b is the byte b, spelled with the GPT-2 bytes_to_unicode map
  ids 256..256+M-1    merges, in merge order (rank r -> id 256 + r)
  ids 256+M..         added special tokens (GLM set, in SPECIAL_TOKENS order), special=true

Pre-tokenization (GLM-4 family, llama.cpp CHATGLM4): split text with GLM_REGEX ("isolated":
every match is a piece; gaps between matches are pieces too, which this regex never leaves),
then map each piece's UTF-8 bytes through bytes_to_unicode. Special tokens are matched
literally before pre-tokenization (longest first).

Training is deterministic: at each step the most frequent adjacent pair is merged; ties are
broken by the smaller (left id, right id) pair. (bpe_reference.py's own `train_bpe`, which makes
the tokenizer tests' fixtures, breaks ties by the pair's strings; each defines committed files.)
"""

import heapq
import os
import sys
from collections import Counter, defaultdict

import regex

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bpe_reference import BYTE_TO_CHAR as B2U  # noqa: E402
from bpe_reference import GLM_PATTERN as GLM_REGEX  # noqa: E402
from bpe_reference import RefTokenizer as Tokenizer  # noqa: E402,F401

SPECIAL_TOKENS = [
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
    "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
    "<arg_value>", "</arg_value>", "<tool_response>", "</tool_response>",
]

_PAT = regex.compile(GLM_REGEX)


def pretokenize(text):
    """Pieces of text (str) by GLM_REGEX, isolated behaviour."""
    return [m.group(0) for m in _PAT.finditer(text)]


def train(texts, n_merges):
    """Returns the merge list [(left_id, right_id), ...] (ids as in the layout above).

    Incremental pair counting with a lazy max-heap keyed (-count, left, right).
    """
    words = Counter()
    for text in texts:
        for piece in pretokenize(text):
            words[piece.encode("utf-8")] += 1
    seqs = [list(w) for w in words]                      # byte ids
    freqs = [words[w] for w in words]
    pair_count = Counter()
    where = defaultdict(set)                             # pair -> word indices containing it
    for wi, s in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            pair_count[(a, b)] += freqs[wi]
            where[(a, b)].add(wi)
    heap = [(-n, a, b) for (a, b), n in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        negn, a, b = heapq.heappop(heap)
        if pair_count.get((a, b), 0) != -negn or negn == 0:
            continue                                     # stale heap entry
        new_id = 256 + len(merges)
        merges.append((a, b))
        touched = set()
        for wi in list(where[(a, b)]):
            s, f = seqs[wi], freqs[wi]
            for x, y in zip(s, s[1:]):                   # remove old pairs of this word
                pair_count[(x, y)] -= f
                touched.add((x, y))
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(new_id)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            seqs[wi] = out
            for x, y in zip(out, out[1:]):               # add new pairs
                pair_count[(x, y)] += f
                where[(x, y)].add(wi)
                touched.add((x, y))
        del pair_count[(a, b)]
        where.pop((a, b), None)
        for pr in touched:
            n = pair_count.get(pr, 0)
            if n > 0:
                heapq.heappush(heap, (-n, pr[0], pr[1]))
    return merges


def build_tokenizer_json(merges, specials=SPECIAL_TOKENS):
    """HF tokenizers `tokenizer.json` dict for the byte-level BPE (vocab layout above)."""
    strs = [B2U[b] for b in range(256)]
    merge_strs = []
    for a, b in merges:
        merge_strs.append(f"{strs[a]} {strs[b]}")
        strs.append(strs[a] + strs[b])
    vocab = {s: i for i, s in enumerate(strs)}
    assert len(vocab) == len(strs), "duplicate token string"
    added = [{"id": len(strs) + i, "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, t in enumerate(specials)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": GLM_REGEX}, "behavior": "Isolated",
                 "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merge_strs},
    }
