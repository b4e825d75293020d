#!/usr/bin/python3
"""Trains a small byte-level BPE tokenizer with GLM pre-tokenization and GLM special tokens.

  /usr/bin/python3 tools/train_tokenizer.py OUT_DIR --vocab-size 320 [--input FILE ...]

Writes OUT_DIR/tokenizer.json (HF tokenizers format) and OUT_DIR/tokenizer_config.json.
vocab_size = 256 byte tokens + merges + 20 special tokens, so merges = vocab_size - 276.
Default corpus: English licence texts shipped by Debian's base-files package under
/usr/share/common-licenses/ (GPL-3, Apache-2.0, MPL-2.0, GFDL-1.3). The layout, regex and tie
rule are described in tools/reference/bpe_tokenizer.py.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import bpe_tokenizer as bpe  # noqa: E402

DEFAULT_CORPUS = [f"/usr/share/common-licenses/{n}"
                  for n in ("GPL-3", "Apache-2.0", "MPL-2.0", "GFDL-1.3")]

# A small GLM-style chat template (GLM-4.7/5 shape: [gMASK]<sop>, no newline after role tokens,
# tool results as <|observation|><tool_response>..</tool_response>, generation prompt
# <|assistant|></think>, or <|assistant|><think> only when enable_thinking is true: unlike GLM's
# own template, thinking is off by default, as the model is trained on non-thinking turns only).
CHAT_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>{{ m.content }}"
    "{%- elif m.role == 'user' -%}<|user|>{{ m.content }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|></think>{{ m.content }}"
    "{%- if m.tool_calls is defined and m.tool_calls -%}"
    "{%- for tc in m.tool_calls -%}<tool_call>{{ tc.function.name }}"
    "{%- for k, v in tc.function.arguments.items() -%}"
    "<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value>"
    "{%- endfor -%}</tool_call>{%- endfor -%}{%- endif -%}"
    "{%- elif m.role == 'tool' -%}<|observation|><tool_response>{{ m.content }}</tool_response>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and enable_thinking -%}<think>"
    "{%- else -%}</think>{%- endif -%}"
    "{%- endif -%}"
)


def read_corpus(paths):
    texts = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    return texts


def tokenizer_config(tj):
    added = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                              "single_word", "special")}
             for a in tj["added_tokens"]}
    return {
        "added_tokens_decoder": added,
        "additional_special_tokens": [a["content"] for a in tj["added_tokens"]
                                      if a["content"] != "<|endoftext|>"],
        "bos_token": None,
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "do_lower_case": False,
        "model_max_length": 1048576,
        "padding_side": "left",
        "remove_space": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }


def train_tokenizer(vocab_size, inputs=None):
    """Returns the tokenizer.json dict with exactly vocab_size tokens."""
    n_merges = vocab_size - 256 - len(bpe.SPECIAL_TOKENS)
    if n_merges < 0:
        raise SystemExit(f"vocab_size {vocab_size} < 256 bytes + {len(bpe.SPECIAL_TOKENS)} specials")
    merges = bpe.train(read_corpus(inputs or DEFAULT_CORPUS), n_merges)
    if len(merges) != n_merges:
        raise SystemExit(f"corpus too small: got {len(merges)} merges, wanted {n_merges}")
    return bpe.build_tokenizer_json(merges)


def write_tokenizer(out_dir, tj):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(tj), f, ensure_ascii=False, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("out_dir")
    ap.add_argument("--vocab-size", type=int, required=True)
    ap.add_argument("--input", action="append", help="UTF-8 text file (repeatable)")
    a = ap.parse_args()
    tj = train_tokenizer(a.vocab_size, a.input)
    write_tokenizer(a.out_dir, tj)
    tok = bpe.Tokenizer(tj)
    sample = "The GNU General Public License is a free, copyleft license."
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample
    print(f"wrote {a.out_dir}/tokenizer.json: {tok.vocab_size} tokens "
          f"({len(tj['model']['merges'])} merges); sample -> {len(ids)} ids")


if __name__ == "__main__":
    main()
