#!/usr/bin/python3
"""Trains the bundled GlmMoeDsa checkpoint (models/glm-moe-dsa-arith-6m) on CPU.

  /usr/bin/python3 tools/train.py [--out models/glm-moe-dsa-arith-6m] [--steps N] ...

The defaults reproduce the committed model (`make train-model`; wall time in its MODEL_CARD.md).
The model math is the PyTorch reference tools/reference/glm_moe_dsa.py, run with fp32 leaf
tensors as its weights so that autograd trains it; nothing of the model is re-implemented here.

Pipeline:
  1. Tokenizer: byte-level BPE (tools/train_tokenizer.py, GLM regex, GLM special tokens, GLM
     chat template) on the training licence texts + sample problems with every digit removed,
     so that numbers always split into single digits (as LLaMA/DeepSeek do; arithmetic is far
     easier to learn digit by digit for a model this small).
  2. Data (tools/arith_data.py): arithmetic word problems rendered through the chat template,
     `[gMASK]<sop><|user|>Q<|assistant|></think>A<|endoftext|>`, loss on A<|endoftext|>, packed
     into sequences of --seq-len tokens; a fraction --text-frac of the sequences are windows of
     English licence text (Debian base-files, /usr/share/common-licenses) with loss everywhere.
  3. Loss = CE(main) + mtp_weight · CE(MTP row t → token t+2) (DeepSeek-V3 MTP loss, one depth)
     + indexer_weight · KL(dense attention ‖ indexer) (DeepSeek-V3.2 DSA indexer training: the
     target is the detached dense causal attention of the layers that use that indexer, summed
     over heads; the indexer input is detached so the KL trains only the indexer). The first
     --dense-frac of the steps run dense attention (warm-up), the rest the real sparse top-k.
  4. MoE balance: aux-loss-free, e_score_correction_bias += gamma · sign(mean load − load).
  5. AdamW, linear warm-up + cosine decay, grad clip 1. Every --eval-every steps: greedy exact
     match (reference, KV cache, bf16-rounded weights) on --eval-n held-out problems; the best
     is written as the HF checkpoint (bf16, fp32 correction bias). At the end: full held-out
     evaluation of the written checkpoint, MTP accuracy, loss plot, MODEL_CARD.md, SHA256SUMS.
"""

import argparse
import hashlib
import json
import math
import os
import random
import re
import sys
import tempfile
import time

# One BLAS thread: Debian's torch calls OpenBLAS, whose own thread pool (one per core) ignores
# torch.set_num_threads and, with anything else running, slows a step down ~3x.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "reference"))
sys.path.insert(0, HERE)
import arith_data  # noqa: E402
import bpe_tokenizer as bpe  # noqa: E402
import train_tokenizer  # noqa: E402
from glm_moe_dsa import Config, GlmMoeDsa  # noqa: E402
from make_checkpoint import tensor_shapes  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

DEFAULT_OUT = os.path.join("models", "glm-moe-dsa-arith-6m")
HELDOUT_PATH = os.path.join("tests", "data", "arith", "heldout.jsonl")
CKPT_FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
              "tokenizer_config.json"]


def model_config(vocab_size, index_topk):
    return {
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
        "vocab_size": vocab_size, "hidden_size": 256, "num_hidden_layers": 4,
        "first_k_dense_replace": 1, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
        "intermediate_size": 768, "moe_intermediate_size": 128,
        "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "moe_layer_freq": 1,
        "num_attention_heads": 4, "num_key_value_heads": 4,
        "q_lora_rank": 128, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "index_n_heads": 4, "index_head_dim": 32, "index_topk": index_topk,
        "index_topk_freq": 2, "index_skip_topk_offset": 0,
        "indexer_types": ["full", "shared", "full", "shared"],
        "index_share_for_mtp_iteration": True,
        "rope_interleave": True, "indexer_rope_interleave": True,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "hidden_act": "silu",
        "attention_bias": False, "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
    }


# ------------------------------------------------------------------------------------------
# Tokenizer and data
# ------------------------------------------------------------------------------------------

def build_tokenizer(vocab_size, seed):
    rng = random.Random(seed)
    # The column format without the chain's repeated tails: the tokenizer is the same for both
    # stages (stage 2 continues stage 1's weights).
    probs = [arith_data.make_problem(rng, chain=False) for _ in range(4000)]
    text = "\n\n".join(arith_data.read_licences(arith_data.TRAIN_LICENCES))
    text += "\n\n" + "\n\n".join(p["question"] + "\n" + p["answer"] for p in probs)
    text = re.sub(r"[0-9]", "", text)   # no merge may contain a digit: numbers split per digit
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
        path = f.name
    try:
        tj = train_tokenizer.train_tokenizer(vocab_size, [path])
    finally:
        os.unlink(path)
    return tj


class ChatFormat:
    """Renders problems through the tokenizer_config.json chat template (tools/render_chat_template)."""

    def __init__(self, tok):
        import render_chat_template
        self.tok = tok
        self.tmpl = render_chat_template.make_env().from_string(train_tokenizer.CHAT_TEMPLATE)
        self.eos = tok.added["<|endoftext|>"]

    def prompt(self, question, system=None):
        msgs = ([{"role": "system", "content": system}] if system else []) + \
               [{"role": "user", "content": question}]
        return self.tmpl.render(messages=msgs, add_generation_prompt=True, enable_thinking=False)

    def example(self, prob, system=None):
        """(ids, loss mask) for prompt + answer + <|endoftext|>; mask covers the answer part."""
        p = self.tok.encode(self.prompt(prob["question"], system))
        a = self.tok.encode(prob["answer"]) + [self.eos]
        return p + a, [0] * len(p) + [1] * len(a)


SYSTEMS = ["You are a helpful math tutor.", "Answer with short worked steps.",
           "You are a careful assistant. Show your work."]


class Batches:
    def __init__(self, fmt, text_ids, heldout_keys, a):
        self.fmt, self.text_ids, self.a = fmt, text_ids, a
        self.probs = arith_data.Problems(a.seed + 1, heldout_keys, chain=a.chain)
        self.rng = random.Random(a.seed + 2)
        self.gmask_sop = fmt.tok.encode("[gMASK]<sop>")

    def sequence(self):
        a, rng = self.a, self.rng
        if rng.random() < a.text_frac:
            n = a.seq_len - len(self.gmask_sop)
            s = rng.randrange(0, len(self.text_ids) - n)
            ids = self.gmask_sop + self.text_ids[s:s + n]
            return ids, [0] * len(self.gmask_sop) + [1] * n
        ids, mask = [], []
        while True:
            sysmsg = rng.choice(SYSTEMS) if rng.random() < 0.1 else None
            e, m = self.fmt.example(self.probs.next(), sysmsg)
            if ids and len(ids) + len(e) > a.seq_len:
                return ids, mask
            ids += e
            mask += m


# ------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------

def init_params(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    n_total = cfg.num_hidden_layers + cfg.num_nextn_predict_layers
    out_scale = 1.0 / math.sqrt(2 * n_total)
    w = {}
    for name, (shape, kind) in sorted(tensor_shapes(cfg).items()):
        r = torch.randn(*shape, generator=g)
        if kind == "embed":
            t = r
        elif kind == "head":
            t = r * 0.5 / math.sqrt(shape[1])
        elif kind == "norm":
            t = torch.ones(shape)
        elif kind in ("bias", "router_bias"):
            t = torch.zeros(shape)
        elif kind == "linear":
            t = r / math.sqrt(shape[1]) * (0.1 if name.endswith("mlp.gate.weight") else 1.0)
        elif kind == "out":
            t = r * out_scale / math.sqrt(shape[1])
        else:
            raise AssertionError(kind)
        # bf16-safe: start from bf16-representable values (except the fp32 correction bias).
        if kind != "router_bias":
            t = t.to(torch.bfloat16).to(torch.float32)
        w[name] = t.requires_grad_(kind != "router_bias")
    return w


def stored_weights(params):
    """Checkpoint tensors: bf16, except the fp32 e_score_correction_bias."""
    return {k: (v.detach().clone() if k.endswith("e_score_correction_bias")
                else v.detach().to(torch.bfloat16)) for k, v in params.items()}


def indexer_sources(cfg):
    """{full layer (or MTP) prefix: [attention prefixes whose selection it provides]}."""
    out, cur = {}, None
    for i in range(cfg.num_hidden_layers + cfg.num_nextn_predict_layers):
        p = f"model.layers.{i}.self_attn."
        if cfg.layer_is_full(i):
            cur = i
            out[cur] = []
        out[cur].append(p)
    return out


def sequence_loss(model, cfg, ids, mask, dense, a):
    T = len(ids)
    tok = torch.tensor(ids, dtype=torch.int64)
    m = torch.tensor(mask, dtype=torch.float32)
    model.attn_targets = {}
    mtp_next = torch.cat([tok[1:], tok[:1]])          # last row is a dummy (no target)
    out = model.forward(tok, mtp_next=mtp_next, dense=dense)
    logits = out["logits"][:-1]
    ce = torch.nn.functional.cross_entropy(logits, tok[1:], reduction="none")
    main = (ce * m[1:]).sum() / m[1:].sum().clamp(min=1)
    mlog = out["mtp_logits"][:-2]                      # row t predicts token t+2
    ce2 = torch.nn.functional.cross_entropy(mlog, tok[2:], reduction="none")
    mtp = (ce2 * m[2:]).sum() / m[2:].sum().clamp(min=1)
    # DSA indexer KL(dense attention || softmax(indexer scores)), per query row, averaged.
    kl, n = 0.0, 0
    L = cfg.num_hidden_layers
    for src, users in indexer_sources(cfg).items():
        sc = out["mtp_indexer_scores"] if src == L else out["indexer_scores"][src]
        tgt = sum(model.attn_targets[u] for u in users)
        tgt = tgt / tgt.sum(-1, keepdim=True)
        logp = torch.log_softmax(sc.masked_fill(torch.isinf(sc), -1e9), dim=-1)
        kl = kl + (torch.xlogy(tgt, tgt) - tgt * logp).sum(-1).mean()
        n += 1
    kl = kl / n
    model.attn_targets = None
    loss = main + a.mtp_weight * mtp + a.indexer_weight * kl
    routers = dict(out["router"])
    routers[L] = out["mtp_router"]
    return loss, main.item(), mtp.item(), kl.item(), routers


def lr_at(step, a):
    """Linear warm-up to a.lr, cosine decay to 0.1·a.lr at a.steps (step within the stage)."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    prog = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, prog))))


# ------------------------------------------------------------------------------------------
# Evaluation (the plain reference with bf16-rounded weights, as a consumer would load them)
# ------------------------------------------------------------------------------------------

@torch.no_grad()
def greedy(model, prompt_ids, eos_ids, max_new):
    out = model.forward(torch.tensor(prompt_ids))
    gen = []
    for _ in range(max_new):
        nxt = int(out["logits"][-1].argmax())
        gen.append(nxt)
        if nxt in eos_ids:
            break
        out = model.forward(torch.tensor([nxt]), cache=out["cache"])
    return gen


@torch.no_grad()
def exact_match(model, fmt, probs, eos_ids, max_new=256, workers=1):
    """Greedy exact match of the final `#### N`; workers > 1 splits the problems over forked
    processes (one torch thread each)."""
    if workers > 1:
        import multiprocessing
        global _EM_STATE
        _EM_STATE = (model, fmt, eos_ids, max_new)
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            texts = pool.map(_em_one, probs, chunksize=4)
    else:
        texts = [_answer(model, fmt, p, eos_ids, max_new) for p in probs]
    ok, samples = 0, []
    for p, text in zip(probs, texts):
        good = arith_data.final_answer(text) == arith_data.final_answer(p["answer"])
        ok += good
        if len(samples) < 3:
            samples.append((text, good))
    return ok / len(probs), samples


_EM_STATE = None


def _answer(model, fmt, p, eos_ids, max_new):
    gen = greedy(model, fmt.tok.encode(fmt.prompt(p["question"])), eos_ids, max_new)
    return fmt.tok.decode([g for g in gen if g not in eos_ids])


def _em_one(p):
    torch.set_num_threads(1)
    model, fmt, eos_ids, max_new = _EM_STATE
    return _answer(model, fmt, p, eos_ids, max_new)


@torch.no_grad()
def mtp_accuracy(model, seqs):
    """Top-1 accuracy of MTP row t (teacher-forced next token) against token t+2.
    seqs: list of (ids, mask); a row counts when mask[t+2] is set."""
    hit = n = 0
    for ids, mask in seqs:
        tok = torch.tensor(ids)
        out = model.forward(tok, mtp_next=torch.cat([tok[1:], tok[:1]]))
        pred = out["mtp_logits"][:-2].argmax(-1)
        m = torch.tensor(mask[2:], dtype=torch.bool)
        hit += int(((pred == tok[2:]) & m).sum())
        n += int(m.sum())
    return hit / max(1, n)


# ------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------

def write_checkpoint(out_dir, cfgd, tj, params, meta):
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    save_file(stored_weights(params), tmp,
              metadata={"format": "pt", "generator": "mxserve tools/train.py", **meta})
    os.replace(tmp, os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfgd, f, indent=2)
        f.write("\n")
    gen = {"_from_model_config": False, "do_sample": False, "eos_token_id": cfgd["eos_token_id"],
           "pad_token_id": cfgd["pad_token_id"], "max_new_tokens": 128,
           "transformers_version": "4.57.0"}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    train_tokenizer.write_tokenizer(out_dir, tj)
    write_sha256sums(out_dir)


def write_sha256sums(out_dir):
    lines = []
    for name in CKPT_FILES:
        with open(os.path.join(out_dir, name), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}\n")
    with open(os.path.join(out_dir, "SHA256SUMS"), "w") as f:
        f.writelines(lines)


def plot_losses(log, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (apt-get install python3-matplotlib): no loss plot")
        return False
    st = [r["step"] for r in log["train"]]

    def smooth(xs, k=20):
        out, acc = [], []
        for x in xs:
            acc.append(x)
            acc = acc[-k:]
            out.append(sum(acc) / len(acc))
        return out
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for key, lab in (("main", "main CE"), ("mtp", "MTP CE (t+2)"), ("kl", "indexer KL")):
        ax[0].plot(st, smooth([r[key] for r in log["train"]]), label=lab)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("step")
    ax[0].set_title("training loss (20-step mean)")
    ax[0].legend()
    ev = log["eval"]
    ax[1].plot([r["step"] for r in ev], [r["exact_match"] for r in ev], "o-")
    ax[1].set_ylim(0, 1)
    ax[1].set_xlabel("step")
    ax[1].set_title("held-out exact match (eval subset, greedy)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab-size", type=int, default=2048)
    ap.add_argument("--index-topk", type=int, default=24)
    ap.add_argument("--steps", type=int, default=2500, help="stage 1's lr schedule length")
    ap.add_argument("--stop-after", type=int, default=1500,
                    help="stage 1 stops after this many steps of its schedule")
    ap.add_argument("--batch", type=int, default=8, help="packed sequences per step")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--text-frac", type=float, default=0.12)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--indexer-weight", type=float, default=0.1)
    ap.add_argument("--dense-frac", type=float, default=0.1)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-n", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-workers", type=int, default=2,
                    help="processes for the final held-out evaluation")
    ap.add_argument("--time-steps", type=int, default=0, help="only time N steps and exit")
    ap.add_argument("--stage2-steps", type=int, default=1000)
    ap.add_argument("--stage2-lr", type=float, default=1e-3)
    ap.add_argument("--stage2-warmup", type=int, default=50)
    ap.add_argument("--stage2-eval-every", type=int, default=250)
    ap.add_argument("--only-stage2", action="store_true",
                    help="run only stage 2, from the stage-1 checkpoint and train_log.json in --out")
    ap.add_argument("--card-only", action="store_true",
                    help="only (re)write MODEL_CARD.md from results.json and train_log.json")
    ap.add_argument("--final-only", action="store_true",
                    help="skip training: evaluate the checkpoint in --out, write card/plot")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.chdir(ROOT)
    if a.card_only:
        write_card(a)
        return
    t_start = time.time()

    tj = build_tokenizer(a.vocab_size, a.seed)
    tok = bpe.Tokenizer(tj)
    assert tok.vocab_size == a.vocab_size
    fmt = ChatFormat(tok)
    sid = tok.added
    eos_ids = [sid["<|endoftext|>"], sid["<|user|>"], sid["<|observation|>"]]
    cfgd = model_config(a.vocab_size, a.index_topk)
    cfgd.update(eos_token_id=eos_ids, pad_token_id=sid["<|endoftext|>"], torch_dtype="bfloat16")
    cfg = Config(cfgd)
    print(f"tokenizer: {tok.vocab_size} tokens ({time.time() - t_start:.0f}s)", flush=True)

    with open(HELDOUT_PATH) as f:
        heldout = [json.loads(line) for line in f]
    text_ids = tok.encode("\n\n".join(arith_data.read_licences(arith_data.TRAIN_LICENCES)))
    ho_text = tok.encode(arith_data.read_licences(arith_data.HELDOUT_LICENCES)[0])
    print(f"text: {len(text_ids)} training tokens, {len(ho_text)} held-out", flush=True)
    log_path = os.path.join(a.out, "train_log.json")

    env = dict(cfg=cfg, cfgd=cfgd, tj=tj, fmt=fmt, heldout=heldout, text_ids=text_ids,
               eos_ids=eos_ids, log_path=log_path, t_start=t_start)
    if not a.final_only:
        if not a.only_stage2:
            stage1 = argparse.Namespace(**{**vars(a), "step_offset": 0, "chain": False})
            log = {"train": [], "eval": [], "stages": []}
            if run_stage(stage1, init_params(cfg, a.seed), log, -1.0, env) == "timed":
                return
        if a.stage2_steps > 0:
            # Stage 2: fresh AdamW from the bf16 stage-1 checkpoint, new problem stream,
            # lower peak lr, short warm-up, sparse attention throughout.
            with open(log_path) as f:
                log = json.load(f)
            done = log["train"][-1]["step"] + 1
            log.setdefault("stages", [{"steps": a.steps, "lr": a.lr, "seed": a.seed}])
            log.setdefault("wall_s_before", log.get("wall_s", 0.0))
            w = load_file(os.path.join(a.out, "model.safetensors"))
            params = {k: v.to(torch.float32).requires_grad_(
                not k.endswith("e_score_correction_bias")) for k, v in w.items()}
            best = max(r["exact_match"] for r in log["eval"])
            stage2 = argparse.Namespace(**{
                **vars(a), "steps": a.stage2_steps, "lr": a.stage2_lr,
                "warmup": a.stage2_warmup, "dense_frac": 0.0, "seed": a.seed + 100,
                "eval_every": a.stage2_eval_every, "stop_after": a.stage2_steps,
                "step_offset": done, "chain": True})
            if run_stage(stage2, params, log, best, env) == "timed":
                return
    final_report(a, cfg, cfgd, fmt, heldout, ho_text, eos_ids, log_path, t_start)


def run_stage(a, params, log, best, env):
    """One training stage (steps a.steps, lr schedule from a); appends to log, writes the
    checkpoint to a.out whenever the eval-subset exact match is >= best."""
    cfg, fmt, heldout, eos_ids = env["cfg"], env["fmt"], env["heldout"], env["eos_ids"]
    n_params = sum(v.numel() for v in params.values())
    print(f"stage from step {a.step_offset}: {a.steps} steps, lr {a.lr}, params {n_params}",
          flush=True)
    ran = min(a.steps, a.stop_after or a.steps)
    log["stages"].append({"steps": a.steps, "ran": ran, "lr": a.lr, "seed": a.seed,
                          "warmup": a.warmup, "dense_frac": a.dense_frac,
                          "format": "chain" if a.chain else "columns"})
    model = GlmMoeDsa(cfg, params)
    model.record_gaps = False
    model.detach_indexer_input = True
    assert all(model.w[k] is params[k] for k in params)
    decay = [v for k, v in params.items() if v.requires_grad and v.dim() == 2]
    nodecay = [v for k, v in params.items() if v.requires_grad and v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    biases = {i: params[f"model.layers.{i}.mlp.gate.e_score_correction_bias"]
              for i in range(cfg.num_hidden_layers + 1) if cfg.layer_is_moe(i)}
    data = Batches(fmt, env["text_ids"], {p["key"] for p in heldout}, a)
    t0_log = log["train"][-1]["time"] if log["train"] else 0.0
    t_train = time.time()
    for step in range(ran):
        gstep = a.step_offset + step
        dense = step < a.dense_frac * a.steps
        for gparam in opt.param_groups:
            gparam["lr"] = lr_at(step, a)
        opt.zero_grad(set_to_none=True)
        loads = {i: torch.zeros(cfg.n_routed_experts) for i in biases}
        s_main = s_mtp = s_kl = 0.0
        for _ in range(a.batch):
            ids, mask = data.sequence()
            loss, lm, lt, lk, routers = sequence_loss(model, cfg, ids, mask, dense, a)
            (loss / a.batch).backward()
            s_main += lm / a.batch
            s_mtp += lt / a.batch
            s_kl += lk / a.batch
            for i, (idx, _) in routers.items():
                loads[i] += torch.bincount(idx.flatten(), minlength=cfg.n_routed_experts)
        gn = torch.nn.utils.clip_grad_norm_(decay + nodecay, 1.0)
        opt.step()
        with torch.no_grad():
            for i, b in biases.items():
                b += a.bias_gamma * torch.sign(loads[i].mean() - loads[i])
        log["train"].append({"step": gstep, "main": s_main, "mtp": s_mtp, "kl": s_kl,
                             "gnorm": float(gn), "time": t0_log + time.time() - t_train})
        if step % 10 == 0:
            imb = max(float(x.max() / x.mean()) for x in loads.values())
            print(f"step {gstep} lr {lr_at(step, a):.2e} main {s_main:.3f} mtp {s_mtp:.3f} "
                  f"kl {s_kl:.3f} gn {gn:.2f} maxload/mean {imb:.2f} "
                  f"{'dense' if dense else 'sparse'} {time.time() - t_train:.0f}s", flush=True)
        if (step + 1) % a.eval_every == 0 or step + 1 == ran:
            em_model = GlmMoeDsa(cfg, stored_weights(params))
            t0 = time.time()
            em, samples = exact_match(em_model, fmt, heldout[:a.eval_n], eos_ids)
            log["eval"].append({"step": gstep + 1, "exact_match": em,
                                "time": t0_log + time.time() - t_train})
            print(f"eval step {gstep + 1}: exact match {em:.3f} on {a.eval_n} "
                  f"({time.time() - t0:.0f}s) sample {samples[0]!r}", flush=True)
            if em >= best:
                best = em
                write_checkpoint(a.out, env["cfgd"], env["tj"], params,
                                 {"step": str(gstep + 1), "seed": str(a.seed)})
                log["best_step"] = log["eval"][-1]
                print(f"  wrote {a.out} (best so far)", flush=True)
            log.setdefault("args", {k: v for k, v in vars(a).items() if k != "step_offset"})
            ref = env["t_start"] if a.step_offset == 0 else t_train
            log["wall_s"] = log.get("wall_s_before", 0.0) + time.time() - ref
            with open(env["log_path"], "w") as f:
                json.dump(log, f)
            plot_losses(log, os.path.join(a.out, "loss_curve.png"))
        if a.time_steps and step + 1 == a.time_steps:
            print(f"{a.time_steps} steps in {time.time() - t_train:.1f}s")
            return "timed"
    log["wall_s_before"] = log["wall_s"]
    return "done"


def final_report(a, cfg, cfgd, fmt, heldout, ho_text, eos_ids, log_path, t_start):
    """Evaluates the written checkpoint on all held-out data and writes results.json + plot."""
    w = load_file(os.path.join(a.out, "model.safetensors"))
    model = GlmMoeDsa(cfg, w)
    t0 = time.time()
    em, samples = exact_match(model, fmt, heldout, eos_ids, workers=a.eval_workers)
    arith_seqs = [fmt.example(p) for p in heldout[:200]]
    mtp_all = mtp_accuracy(model, [(i, [1] * len(i)) for i, _ in arith_seqs])
    mtp_ans = mtp_accuracy(model, arith_seqs)
    g = fmt.tok.encode("[gMASK]<sop>")
    text_seqs = [(g + ho_text[s:s + 254], [0, 0] + [1] * 254)
                 for s in range(0, len(ho_text) - 254, 254)]
    mtp_text = mtp_accuracy(model, text_seqs)
    res = {"heldout_exact_match": em, "heldout_n": len(heldout),
           "mtp_top1_heldout_arith_transcripts": mtp_all,
           "mtp_top1_heldout_arith_answers": mtp_ans,
           "mtp_top1_heldout_english": mtp_text,
           "n_params": sum(v.numel() for v in w.values()),
           "samples": samples, "eval_s": time.time() - t0}
    if os.path.exists(log_path):
        with open(log_path) as f:
            log = json.load(f)
        res["train_wall_s"] = log.get("wall_s")
        res["best_step"] = log.get("best_step")
        plot_losses(log, os.path.join(a.out, "loss_curve.png"))
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    print(json.dumps(res, indent=2), flush=True)
    print(f"total wall {time.time() - t_start:.0f}s")
    write_card(a)


def param_counts(cfg):
    """(total, main model, MTP layer, active per token in the main model)."""
    shapes = tensor_shapes(cfg)
    L = cfg.num_hidden_layers
    n = {k: math.prod(s) for k, (s, _) in shapes.items()}
    total = sum(n.values())
    mtp = sum(v for k, v in n.items() if k.startswith(f"model.layers.{L}."))
    expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
    n_moe = sum(cfg.layer_is_moe(i) for i in range(L))
    active = (total - mtp - n["model.embed_tokens.weight"]
              - n_moe * (cfg.n_routed_experts - cfg.num_experts_per_tok) * expert)
    return total, total - mtp, mtp, active


def write_card(a):
    """MODEL_CARD.md from config.json, results.json and train_log.json in --out."""
    d = a.out
    with open(os.path.join(d, "config.json")) as f:
        cfgd = json.load(f)
    cfg = Config(cfgd)
    with open(os.path.join(d, "results.json")) as f:
        res = json.load(f)
    with open(os.path.join(d, "train_log.json")) as f:
        log = json.load(f)
    total, main_n, mtp_n, active = param_counts(cfg)
    args = log.get("args", {})
    tr = log["train"]
    last = tr[-1]
    avg = lambda key, rows: sum(r[key] for r in rows) / max(1, len(rows))  # noqa: E731
    best = log.get("best_step", {})
    sizes = {n: os.path.getsize(os.path.join(d, n)) for n in CKPT_FILES}
    with open(os.path.join(d, "tokenizer.json")) as f:
        fmt = ChatFormat(bpe.Tokenizer(json.load(f)))
    with open(HELDOUT_PATH) as f:
        heldout = [json.loads(line) for line in f]
    p_len = [len(fmt.tok.encode(fmt.prompt(p["question"]))) for p in heldout]
    e_len = [len(fmt.example(p)[0]) for p in heldout]
    ev_rows = "\n".join(f"| {r['step']} | {r['exact_match']:.3f} | {r['time'] / 60:.1f} |"
                        for r in log["eval"])
    samples = "\n".join(f"    {t!r} -> {'correct' if ok else 'wrong'}"
                         for t, ok in res.get("samples", []))
    stages = log.get("stages", [])
    s1 = stages[0] if stages else {}
    stage1 = (f"the first {s1.get('ran', s1.get('steps'))} steps of a {s1.get('steps')}-step schedule"
              f" (`--steps`, `--stop-after`), answers in the plain column format")
    stage2 = ""
    if len(stages) > 1:
        s2 = stages[1]
        stage2 = (f" Stage 2 (`--stage2-*`): {s2.get('ran', s2['steps'])} more steps from the"
                  f" stage-1 checkpoint (its bf16 weights), fresh AdamW, lr {s2['lr']} with"
                  f" {s2.get('warmup')} warm-up steps and cosine to 10%, sparse attention"
                  f" throughout, a new problem stream (seed {s2['seed']}), answers in the"
                  f" {s2.get('format', 'column')} format (each step's head carries the rest of the"
                  f" expression: `59 - 54 + 61: …, so 59 - 54 + 61 = 5 + 61.` then `5 + 61: …`). Stage 1"
                  f" had learned the column arithmetic (teacher-forced errors 0.03% on the column"
                  f" digits) but not to find the next operand in the question (14% errors on"
                  f" those digits, 3% exact match); the chain turns that lookup into copies from"
                  f" a few tokens back.")
    card = f"""# glm-moe-dsa-arith-6m

A tiny GlmMoeDsa (GLM-5-class: MLA + DSA indexer with IndexShare + DeepSeekMoE + one MTP layer)
trained from scratch on CPU by `tools/train.py` with the PyTorch reference
`tools/reference/glm_moe_dsa.py`. It solves short grade-school arithmetic word problems in GSM8K
format through the GLM chat template, and is the bundled real-weights checkpoint for mxserve
tests and demos. Not a general language model.

## Files

| file | bytes |
|---|---|
""" + "\n".join(f"| `{n}` | {s} |" for n, s in sizes.items()) + f"""

`SHA256SUMS` (sha256sum format) covers exactly these five files. Weights are BF16 except the
four `mlp.gate.e_score_correction_bias` tensors (F32). The MTP layer is `model.layers.{cfg.num_hidden_layers}.*`
(enorm, hnorm, eh_proj, shared_head.norm, own indexer, MoE); it shares `embed_tokens`/`lm_head`.
`results.json`, `train_log.json` and `loss_curve.png` are the run's outputs.

## Config

| | |
|---|---|
| layers | {cfg.num_hidden_layers} + 1 MTP; layer 0 dense (intermediate {cfg.intermediate_size}), layers 1–3 MoE |
| hidden / heads | {cfg.hidden_size} / {cfg.num_attention_heads} |
| MLA | q_lora {cfg.q_lora_rank}, kv_lora {cfg.kv_lora_rank}, qk nope {cfg.qk_nope_head_dim} + rope {cfg.qk_rope_head_dim}, v {cfg.v_head_dim} |
| DSA indexer | {cfg.index_n_heads} heads × {cfg.index_head_dim}, **index_topk {cfg.index_topk}** (held-out prompts are {min(p_len)}–{max(p_len)} tokens, whole problems with their answers {min(e_len)}–{max(e_len)}: sparse attention is live), indexer_types {cfg.indexer_types} (IndexShare), MTP layer has its own |
| MoE | {cfg.n_routed_experts} routed experts (width {cfg.moe_intermediate_size}) top-{cfg.num_experts_per_tok}, 1 shared expert, sigmoid + noaux_tc, n_group 1, routed_scaling_factor {cfg.routed_scaling_factor} |
| RoPE | interleaved, theta {cfg.rope_theta:g} (nested `rope_parameters`), max_position_embeddings {cfgd['max_position_embeddings']} |
| vocab | {cfg.vocab_size}: 256 bytes + {cfg.vocab_size - 276} merges + 20 GLM specials (`<|endoftext|>` {cfgd['pad_token_id']}); eos {cfgd['eos_token_id']} |
| head | untied `lm_head` |

Parameters: **{total:,}** total = {main_n:,} main model + {mtp_n:,} MTP layer; about
{active:,} active per token in the main model (excluding the embedding lookup).

## Tokenizer

Byte-level BPE from `tools/train_tokenizer.py` (GLM pre-tokenizer regex, GLM special tokens,
GLM-style Jinja `chat_template` in `tokenizer_config.json`), trained on the training licence
texts plus 4000 generated problems **with every digit removed**, so no merge contains a digit
and numbers always tokenize one digit per token (LLaMA/DeepSeek-style digit splitting).

## Data

* Arithmetic: `tools/arith_data.py`, 9 templates of 2- and 3-step word problems (+/−), numbers
  1–100, intermediate results 0–200, answers as GSM8K-style worked steps ending `#### N`, each
  operation worked column by column, ones digit first, with its carry or borrow
  (`59 + 61: 9 + 1 = 10, 5 + 6 + 1 = 12, so 59 + 61 = 120.`), so that every generated digit is
  one single-digit fact. Rendered
  with the chat template (10% with a system message):
  `[gMASK]<sop><|user|>Q<|assistant|></think>A<|endoftext|>`, loss on `A<|endoftext|>`.
  Held-out: `tests/data/arith/heldout.jsonl` (500 problems, GSM8K jsonl + `key`); the training
  stream skips every held-out key (template + numbers), so none is seen in training.
* English: the licence texts of Debian's **base-files** package (`/usr/share/common-licenses/`:
  {", ".join(arith_data.TRAIN_LICENCES)}), {args.get('text_frac', 0):.0%} of the training
  sequences, loss on every token. `Artistic` is held out for the English metric.
* Examples are packed into sequences of {args.get('seq_len')} tokens (first at position 0).

## Training

`/usr/bin/python3 tools/train.py` (= `make train-model`), defaults: stage 1, {stage1}, ×
{args.get('batch')} packed sequences of {args.get('seq_len')} tokens, AdamW (β 0.9/0.95, wd
{args.get('weight_decay')}), lr {args.get('lr')} with {args.get('warmup')} warm-up steps and cosine to 10%, grad clip 1,
seed {args.get('seed')}. Loss = main CE + {args.get('mtp_weight')} × MTP CE (row t predicts token t+2 from
the post-norm hidden at t and the embedding of token t+1, DeepSeek-V3) + {args.get('indexer_weight')} × indexer KL
(DeepSeek-V3.2: the indexer's softmax is fitted to the detached dense attention distribution,
summed over heads, of the layers that use its selection; indexer input detached). The first
{args.get('dense_frac', 0):.0%} of the steps run dense attention (warm-up), the rest the real top-{cfg.index_topk} sparse
attention. MoE balance: aux-loss-free bias update, γ = {args.get('bias_gamma')}. Every
{args.get('eval_every')} steps the bf16-rounded weights are evaluated (greedy exact match on the first
{args.get('eval_n')} held-out problems) and the best is written here.{stage2}

Wall time: {log.get('wall_s', 0) / 60:.0f} min for the run ({last['time'] / 60:.0f} min of training steps, about
{last['time'] / (last['step'] + 1):.1f} s/step) on one core of a 2-core machine that was building C++
on the other (torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1, nice 5). Checkpoint: step {best.get('step')}. Final 50-step mean
losses: main {avg('main', tr[-50:]):.3f}, MTP {avg('mtp', tr[-50:]):.3f}, indexer KL {avg('kl', tr[-50:]):.3f}.

![loss curve](loss_curve.png)

| step | exact match (eval subset) | minutes |
|---|---|---|
{ev_rows}

## Results (this checkpoint, reference in fp32 from the stored bf16 weights)

| metric | value | target |
|---|---|---|
| held-out exact match, greedy, 500 problems (`#### N` equal) | **{res['heldout_exact_match']:.1%}** | ≥ 80% |
| MTP next-next-token top-1, held-out arithmetic transcripts (200, every position) | **{res['mtp_top1_heldout_arith_transcripts']:.1%}** | ≥ 50% |
| MTP top-1, answer tokens only of those transcripts | {res['mtp_top1_heldout_arith_answers']:.1%} | |
| MTP top-1, held-out English (Artistic licence, 254-token windows) | {res['mtp_top1_heldout_english']:.1%} | |

MTP accuracy is teacher-forced: row t gets the true token t+1 and must predict token t+2 (what
a speculative-decoding draft step sees when the previous draft was accepted).

Sample greedy outputs:

{samples}
"""
    with open(os.path.join(d, "MODEL_CARD.md"), "w") as f:
        f.write(card)
    print(f"wrote {d}/MODEL_CARD.md")


if __name__ == "__main__":
    main()
