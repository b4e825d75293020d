#!/usr/bin/python3
"""Regenerates the test checkpoints and golden fixtures under tests/data/ deterministically.

  /usr/bin/python3 tools/make_fixtures.py          (from the repo root; `make reference-fixtures`)

For each checkpoint in CHECKPOINTS: writes tests/data/<name>/ with tools/make_checkpoint.py
(bf16 weights, fp32 router bias, tokenizer trained by tools/train_tokenizer.py), then runs the
reference (tools/reference/glm_moe_dsa.py) in float32 on the bf16 weights upcast to fp32 and
writes tests/data/<name>/fixtures/prompt_<T>.safetensors for T in PROMPT_LENS, plus
greedy.json. tests/data/README.md documents every tensor.

Robust fixtures: a golden file is only useful if another correct fp32 implementation makes the
same discrete decisions (indexer top-k, expert routing, greedy argmax). For each candidate
checkpoint seed the reference is also run in float64; the seed is accepted only if every
decision matches float32 and every decision margin (k-th minus (k+1)-th score at each
selection boundary, exact ties excluded since the tie rule settles them) is at least
MIN_GAP[kind]. Otherwise the next seed (base + 1000·j) is tried. The accepted seed is stored in
each fixture's metadata and in greedy.json.
"""

import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "reference"))
sys.path.insert(0, HERE)
import bpe_tokenizer as bpe  # noqa: E402
from glm_moe_dsa import GlmMoeDsa, KVCache  # noqa: E402
from make_checkpoint import write_checkpoint  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

CHECKPOINTS = [("tiny", "tiny.json", 1), ("tiny-glm52", "tiny-glm52.json", 2)]
PROMPT_LENS = [3, 17, 40, 130]
N_GREEDY = 32
SCORES_MAX_T = 40          # indexer_scores.* only stored for prompts up to this length (size)
MIN_GAP = {"indexer": 3e-5, "router": 3e-5, "group": 3e-5, "greedy": 1e-4}
MAX_TRIES = 20

# Prompt = the first T token ids of encode(PROMPT_TEXT) (starts with [gMASK]<sop><|user|>).
PROMPT_TEXT = (
    "[gMASK]<sop><|user|>The licenses for most software and other practical works are designed "
    "to take away your freedom to share and change the works. By contrast, the GNU General "
    "Public License is intended to guarantee your freedom to share and change all versions of "
    "a program, to make sure it remains free software for all its users. We, the Free Software "
    "Foundation, use the GNU General Public License for most of our software; it applies also "
    "to any other work released this way by its authors. You can apply it to your programs, "
    "too. When we speak of free software, we are referring to freedom, not price. Version 3, "
    "29 June 2007.<|assistant|><think>"
)

TOKENIZER_CASES = [
    "Hello, world!",
    "The GNU General Public License, version 3 (29 June 2007).",
    "It's we'll they've I'm you'd SHE'S",
    "  leading spaces\n\ntwo newlines\r\nand CRLF\ttab   ",
    "numbers 1234567 and 3.14159, 1e-5",
    "unicode: café naïve 日本語 emoji 🙂 — dash",
    "[gMASK]<sop><|system|>Be brief.<|user|>What is 2+2?<|assistant|><think>4</think>4",
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
    "<|observation|><tool_response>{\"temp\": 21}</tool_response><|endoftext|>",
]


def i32(x):
    return torch.as_tensor(x, dtype=torch.int64).to(torch.int32)


def run_fp32(model, prompt):
    """Prefill + MTP + greedy decode (one-token steps through the KV cache), all float32."""
    T = len(prompt)
    cache = KVCache(model.cfg.num_hidden_layers + model.cfg.num_nextn_predict_layers)
    out = model.forward(prompt, cache, mtp_next="argmax")
    gen, margins = [], []
    logits = out["logits"][-1]
    for i in range(N_GREEDY):
        top2 = torch.topk(logits, 2).values
        margins.append((top2[0] - top2[1]).item())
        tok = int(logits.argmax())
        gen.append(tok)
        if i + 1 < N_GREEDY:
            logits = model.forward(torch.tensor([tok]), cache)["logits"][-1]
    out["greedy"], out["greedy_margin"] = gen, margins
    assert cache.length == T + N_GREEDY - 1
    return out


def robust(cfg, weights, prompt, o32):
    """float64 re-run of prompt + greedy[:-1]; returns (ok, min gaps) per MIN_GAP."""
    m64 = GlmMoeDsa(cfg, weights, torch.float64)
    T = len(prompt)
    seq = torch.cat([prompt, torch.tensor(o32["greedy"][:-1])])
    o = m64.forward(seq, mtp_next=torch.cat([seq[1:], torch.tensor([o32["greedy"][-1]])]))
    ok = torch.equal(o["logits"][T - 1:].argmax(-1), torch.tensor(o32["greedy"]))
    for i in o32["topk"]:
        ok &= torch.equal(o["topk"][i][:T], o32["topk"][i])
    for i in o32["router"]:
        ok &= torch.equal(o["router"][i][0][:T], o32["router"][i][0])
    # The float64 MTP pass above covers rows 0..T+30; compare its first T rows only when the
    # MTP rows' inputs coincide (they do: hidden rows < T and next tokens equal).
    ok &= torch.equal(o["mtp_topk"][:T], o32["mtp_topk"])
    ok &= torch.equal(o["mtp_router"][0][:T], o32["mtp_router"][0])
    top2 = torch.topk(o["logits"][T - 1:], 2, dim=-1).values
    gaps = {k: min(v) if v else float("inf") for k, v in m64.gaps.items()}
    gaps["greedy"] = (top2[:, 0] - top2[:, 1]).min().item()
    ok &= all(gaps[k] >= MIN_GAP[k] for k in MIN_GAP)
    return bool(ok), gaps


def fixture_tensors(cfg, prompt, o):
    L, K = cfg.num_hidden_layers, cfg.index_topk
    T = len(prompt)
    t = {
        "prompt_ids": i32(prompt),
        "logits": o["logits"],
        "hidden_states": o["hidden"],
        "final_hidden": o["final_hidden"],
        "indexer_topk": i32(torch.stack([o["topk"][i] for i in range(L)])),
        "mtp_next_ids": i32(o["mtp_next"]),
        "mtp_logits": o["mtp_logits"],
        "mtp_hidden": o["mtp_hidden"],
        "mtp_indexer_topk": i32(o["mtp_topk"]),
        "mtp_router_experts": i32(o["mtp_router"][0]),
        "mtp_router_weights": o["mtp_router"][1].float(),
        "greedy_ids": i32(o["greedy"]),
        "greedy_logit_margin": torch.tensor(o["greedy_margin"], dtype=torch.float32),
    }
    for i, (idx, w) in o["router"].items():
        t[f"router_experts.{i}"] = i32(idx)
        t[f"router_weights.{i}"] = w.float()
    if T <= SCORES_MAX_T:
        for i, s in o["indexer_scores"].items():
            t[f"indexer_scores.{i}"] = s.float()
        t["mtp_indexer_scores"] = o["mtp_indexer_scores"].float()

    # Sort each top-k row ascending with the -1 padding at the END (rows are padded on the right).
    def asc(x):
        big = torch.where(x < 0, torch.full_like(x, 1 << 30), x).sort(-1).values
        return torch.where(big == (1 << 30), torch.full_like(big, -1), big)
    t["indexer_topk"] = asc(t["indexer_topk"])
    t["mtp_indexer_topk"] = asc(t["mtp_indexer_topk"])
    assert t["indexer_topk"].shape == (L, T, K)
    return {k: (v.contiguous() if v.dtype == torch.int32 else v.float().contiguous())
            for k, v in t.items()}


def make_one(name, cfg_file, base_seed, tok_json):
    out_dir = os.path.join(ROOT, "tests", "data", name)
    with open(os.path.join(HERE, "reference", "configs", cfg_file)) as f:
        cfgd = json.load(f)
    for j in range(MAX_TRIES):
        seed = base_seed + 1000 * j
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        rms = write_checkpoint(cfgd, out_dir, seed, tokenizer_json=tok_json, quiet=True)
        with open(os.path.join(out_dir, "config.json")) as f:
            cfg = json.load(f)
        weights = load_file(os.path.join(out_dir, "model.safetensors"))
        model = GlmMoeDsa(cfg, weights, torch.float32)
        tok = bpe.Tokenizer(os.path.join(out_dir, "tokenizer.json"))
        all_ids = torch.tensor(tok.encode(PROMPT_TEXT))
        assert len(all_ids) >= max(PROMPT_LENS), len(all_ids)
        results, worst, ok = {}, {}, True
        for T in PROMPT_LENS:
            prompt = all_ids[:T]
            o = run_fp32(model, prompt)
            good, gaps = robust(cfg, weights, prompt, o)
            for k, v in gaps.items():
                worst[k] = min(worst.get(k, float("inf")), v)
            ok &= good
            results[T] = (prompt, o)
            if not ok:
                break
        if ok:
            break
        print(f"  {name}: seed {seed} has a near-tie decision {worst}; trying next seed")
    else:
        raise SystemExit(f"{name}: no robust seed in {MAX_TRIES} tries")

    fdir = os.path.join(out_dir, "fixtures")
    os.makedirs(fdir, exist_ok=True)
    greedy = {"checkpoint": name, "seed": seed, "prompt_text": PROMPT_TEXT,
              "note": "prompt_ids = first T ids of encode(prompt_text); greedy_ids = 32 greedy "
                      "tokens after the prompt, no EOS stop", "prompts": {}}
    for T, (prompt, o) in results.items():
        t = fixture_tensors(model.cfg, prompt, o)
        meta = {"checkpoint": name, "seed": str(seed), "prompt_len": str(T),
                "compute_dtype": "float32", "generator": "tools/make_fixtures.py",
                "hidden_states": "index 0 = embedding output, l+1 = after layer l (pre final norm)"}
        save_file(t, os.path.join(fdir, f"prompt_{T}.safetensors"), meta)
        greedy["prompts"][f"prompt_{T}"] = {"prompt_ids": prompt.tolist(),
                                            "greedy_ids": o["greedy"]}
    with open(os.path.join(fdir, "greedy.json"), "w") as f:
        json.dump(greedy, f, indent=1)
        f.write("\n")
    print(f"{name}: seed {seed}; residual RMS per layer " + " ".join(f"{r:.2f}" for r in rms))
    print(f"  smallest float64 decision gaps: "
          + ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items())))
    return tok


def main():
    torch.set_num_threads(1)
    # One tokenizer for all checkpoints (320 tokens: 256 bytes + 44 merges + 20 specials).
    tok_dir = os.path.join(ROOT, "tests", "data", "tiny")
    import train_tokenizer
    tj = train_tokenizer.train_tokenizer(320)
    tmp_tok = os.path.join(ROOT, "tests", "data", ".tokenizer.tmp.json")
    os.makedirs(os.path.dirname(tmp_tok), exist_ok=True)
    with open(tmp_tok, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    try:
        for name, cfg_file, seed in CHECKPOINTS:
            tok = make_one(name, cfg_file, seed, tmp_tok)
    finally:
        os.remove(tmp_tok)
    cases = [{"text": s, "ids": tok.encode(s)} for s in TOKENIZER_CASES]
    for c in cases:
        assert tok.decode(c["ids"]) == c["text"]
    with open(os.path.join(tok_dir, "fixtures", "tokenizer_cases.json"), "w",
              encoding="utf-8") as f:
        json.dump({"tokenizer": "tests/data/tiny/tokenizer.json (same file in tiny-glm52)",
                   "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
