#!/usr/bin/python3
"""Writes a random-init GlmMoeDsa Hugging Face checkpoint directory.

  /usr/bin/python3 tools/make_checkpoint.py CONFIG.json OUT_DIR --seed S [--vocab-size N]
                                            [--tokenizer tokenizer.json]

OUT_DIR gets: config.json, model.safetensors (bf16 except mlp.gate.e_score_correction_bias in
fp32, values 34 + distinct small offsets), generation_config.json, tokenizer.json,
tokenizer_config.json (GLM-style chat template, GLM special tokens). The MTP layer is stored as
model.layers.{num_hidden_layers}.* without embed_tokens / shared_head.head, as GLM-5 ships it.

Without --tokenizer a byte-level BPE of exactly vocab_size tokens is trained on the default
corpus (see tools/train_tokenizer.py). Initialization keeps activations O(1): Linear weights
~ N(0, 1/fan_in), output projections (o_proj, down_proj) further scaled by 1/sqrt(2·n_layers),
embedding ~ N(0, 1), norm weights 1 + 0.1·N(0, 1), lm_head ~ N(0, 4/hidden). The script runs
the reference on a short random prompt and prints the RMS of the residual stream per layer.
"""

import argparse
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "reference"))
sys.path.insert(0, HERE)
import bpe_tokenizer as bpe  # noqa: E402
from glm_moe_dsa import Config, GlmMoeDsa  # noqa: E402
from safetensors_io import save_file  # noqa: E402
import train_tokenizer  # noqa: E402


def tensor_shapes(cfg):
    """{name: (shape, kind)} for every checkpoint tensor (§2). kind selects the init."""
    D, V = cfg.hidden_size, cfg.vocab_size
    H, Dn, Dr, Dv = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim,
                     cfg.v_head_dim)
    Rq, Rkv = cfg.q_lora_rank, cfg.kv_lora_rank
    Hi, Di = cfg.index_n_heads, cfg.index_head_dim
    E, F, Fd = cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.intermediate_size
    Fs = F * cfg.n_shared_experts
    L = cfg.num_hidden_layers
    out = {
        "model.embed_tokens.weight": ((V, D), "embed"),
        "model.norm.weight": ((D,), "norm"),
        "lm_head.weight": ((V, D), "head"),
    }
    for i in range(L + cfg.num_nextn_predict_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        out.update({
            p + "input_layernorm.weight": ((D,), "norm"),
            p + "post_attention_layernorm.weight": ((D,), "norm"),
            a + "q_a_proj.weight": ((Rq, D), "linear"),
            a + "q_a_layernorm.weight": ((Rq,), "norm"),
            a + "q_b_proj.weight": ((H * (Dn + Dr), Rq), "linear"),
            a + "kv_a_proj_with_mqa.weight": ((Rkv + Dr, D), "linear"),
            a + "kv_a_layernorm.weight": ((Rkv,), "norm"),
            a + "kv_b_proj.weight": ((H * (Dn + Dv), Rkv), "linear"),
            a + "o_proj.weight": ((D, H * Dv), "out"),
        })
        if cfg.layer_is_full(i):
            out.update({
                a + "indexer.wq_b.weight": ((Hi * Di, Rq), "linear"),
                a + "indexer.wk.weight": ((Di, D), "linear"),
                a + "indexer.k_norm.weight": ((Di,), "norm"),
                a + "indexer.k_norm.bias": ((Di,), "bias"),
                a + "indexer.weights_proj.weight": ((Hi, D), "linear"),
            })
        m = p + "mlp."
        if cfg.layer_is_moe(i):
            out[m + "gate.weight"] = ((E, D), "linear")
            out[m + "gate.e_score_correction_bias"] = ((E,), "router_bias")
            for e in range(E):
                pe = f"{m}experts.{e}."
                out.update({pe + "gate_proj.weight": ((F, D), "linear"),
                            pe + "up_proj.weight": ((F, D), "linear"),
                            pe + "down_proj.weight": ((D, F), "out")})
            if cfg.n_shared_experts:
                ps = m + "shared_experts."
                out.update({ps + "gate_proj.weight": ((Fs, D), "linear"),
                            ps + "up_proj.weight": ((Fs, D), "linear"),
                            ps + "down_proj.weight": ((D, Fs), "out")})
        else:
            out.update({m + "gate_proj.weight": ((Fd, D), "linear"),
                        m + "up_proj.weight": ((Fd, D), "linear"),
                        m + "down_proj.weight": ((D, Fd), "out")})
        if i == L:  # MTP glue (§2, MTP-only tensors)
            out.update({p + "enorm.weight": ((D,), "norm"), p + "hnorm.weight": ((D,), "norm"),
                        p + "eh_proj.weight": ((D, 2 * D), "linear"),
                        p + "shared_head.norm.weight": ((D,), "norm")})
    return out


def init_weights(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    n_total = cfg.num_hidden_layers + cfg.num_nextn_predict_layers
    out_scale = 1.0 / math.sqrt(2 * n_total)
    w = {}
    for name, (shape, kind) in sorted(tensor_shapes(cfg).items()):
        r = torch.randn(*shape, generator=g)
        if kind == "embed":
            t = r
        elif kind == "head":
            t = r * 2.0 / math.sqrt(shape[1])
        elif kind == "norm":
            t = 1.0 + 0.1 * r
        elif kind == "bias":
            t = 0.1 * r
        elif kind == "linear":
            t = r / math.sqrt(shape[1])
        elif kind == "out":
            t = r * out_scale / math.sqrt(shape[1])
        elif kind == "router_bias":
            # 34 + distinct offsets 0.03·(perm - (E-1)/2): bf16 (ULP 0.25 at 34) would collapse them.
            E = shape[0]
            perm = torch.randperm(E, generator=g).to(torch.float32)
            w[name] = 34.0 + 0.03 * (perm - (E - 1) / 2.0)
            continue
        else:
            raise AssertionError(kind)
        w[name] = t.to(torch.bfloat16)
    return w


def write_checkpoint(config_dict, out_dir, seed, tokenizer_json=None, vocab_size=None,
                     quiet=False):
    cfgd = dict(config_dict)
    if vocab_size:
        cfgd["vocab_size"] = vocab_size
    if tokenizer_json is None:
        tj = train_tokenizer.train_tokenizer(cfgd["vocab_size"])
    else:
        with open(tokenizer_json, encoding="utf-8") as f:
            tj = json.load(f)
    tok = bpe.Tokenizer(tj)
    if tok.vocab_size > cfgd["vocab_size"]:
        raise SystemExit(f"tokenizer has {tok.vocab_size} tokens > vocab_size {cfgd['vocab_size']}")
    sid = {a["content"]: a["id"] for a in tj["added_tokens"]}
    eos = [sid["<|endoftext|>"], sid["<|user|>"], sid["<|observation|>"]]
    cfgd["eos_token_id"] = eos
    cfgd["pad_token_id"] = sid["<|endoftext|>"]
    cfgd["torch_dtype"] = "bfloat16"
    cfgd.pop("dtype", None)
    cfg = Config(cfgd)

    os.makedirs(out_dir, exist_ok=True)
    weights = init_weights(cfg, seed)
    save_file(weights, os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt", "generator": "mxserve tools/make_checkpoint.py",
                        "seed": str(seed)})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfgd, f, indent=2)
        f.write("\n")
    gen = {"_from_model_config": False, "do_sample": True, "eos_token_id": eos,
           "pad_token_id": sid["<|endoftext|>"], "temperature": 1.0, "top_p": 0.95,
           "transformers_version": "4.57.0"}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    train_tokenizer.write_tokenizer(out_dir, tj)

    # O(1) activation check on the stored (bf16-rounded) weights.
    model = GlmMoeDsa(cfg, weights)
    gen_ids = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg.vocab_size, (24,), generator=gen_ids)
    out = model.forward(ids, mtp_next=torch.cat([ids[1:], ids[:1]]))
    rms = out["hidden"].pow(2).mean(dim=(1, 2)).sqrt().tolist()
    unused = model.unused_tensors()
    if unused:
        raise SystemExit(f"tensors not used by the reference: {unused}")
    n_params = sum(t.numel() for t in weights.values())
    if not quiet:
        print(f"{out_dir}: {len(weights)} tensors, {n_params} params")
        print("  residual RMS per layer (0 = embedding): " + " ".join(f"{r:.3f}" for r in rms))
        print(f"  logits std {out['logits'].std().item():.3f}, "
              f"MTP logits std {out['mtp_logits'].std().item():.3f}")
    return rms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("config")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=None,
                    help="override config vocab_size (must hold the tokenizer)")
    ap.add_argument("--tokenizer", default=None, help="existing tokenizer.json to copy")
    a = ap.parse_args()
    torch.set_num_threads(1)
    with open(a.config) as f:
        cfgd = json.load(f)
    write_checkpoint(cfgd, a.out_dir, a.seed, a.tokenizer, a.vocab_size)


if __name__ == "__main__":
    main()
