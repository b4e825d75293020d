#!/usr/bin/python3
"""Self-checks of the PyTorch reference; exits non-zero on any failure.

  /usr/bin/python3 tools/reference/selfcheck.py [--fresh] [CKPT_DIR ...]

Default checkpoints: tests/data/tiny and tests/data/tiny-glm52 (generated into a temp dir from
tools/reference/configs/ if absent). The token ids are those of fixtures/prompt_40 when present
(else seeded random ids). Checks, per checkpoint:
  0. the committed fixture prompt_40 matches a fresh float32 run (max |diff| <= 1e-6)
  1. prefill of N=40 tokens == 40 one-token decode steps with the KV cache
     (logits, every hidden state, MTP logits: max |diff| <= TOL_F32 = 1e-4; indexer top-k sets
     and router choices identical)
  2. chunked prefill (17 + 23 tokens) == one prefill (same tolerances)
  3. with index_topk >= length the indexer path == plain causal (dense) attention
     (max |diff| <= TOL_F32), and at length 40 with the real index_topk it differs (sparse is live)
  3b. weight-absorbed MLA (decode form, §3.5) == expanded MLA (max |diff| <= TOL_F32)
  4. float32 vs float64 forward: reports the fp32 noise floor (must be <= TOL_F32)
  5. the NeoX indexer-rope switch (DeepSeek-V3.2) also passes check 1
Global: top-k tie rule, RoPE interleave/NeoX equivalence, safetensors round trip, tokenizer
round trip.
"""

import json
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from glm_moe_dsa import GlmMoeDsa, KVCache, apply_rope, topk_desc_stable  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402
import bpe_tokenizer as bpe  # noqa: E402

TOL_F32 = 1e-4
FAILURES = []


def check(ok, msg):
    print(("  ok    " if ok else "  FAIL  ") + msg)
    if not ok:
        FAILURES.append(msg)


def maxdiff(a, b):
    return (a.double() - b.double()).abs().max().item()


def load(ckpt, dtype=torch.float32, **overrides):
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(overrides)
    return GlmMoeDsa(cfg, load_file(os.path.join(ckpt, "model.safetensors")), dtype)


def run_steps(model, ids, nxt, chunks):
    """Runs ids in chunks through one cache; returns concatenated outputs."""
    cache = KVCache(model.cfg.num_hidden_layers + model.cfg.num_nextn_predict_layers)
    outs, b = [], 0
    for n in chunks:
        outs.append(model.forward(ids[b:b + n], cache, mtp_next=nxt[b:b + n]))
        b += n
    L = model.cfg.num_hidden_layers
    cat = dict(
        logits=torch.cat([o["logits"] for o in outs]),
        hidden=torch.cat([o["hidden"] for o in outs], dim=1),
        mtp_logits=torch.cat([o["mtp_logits"] for o in outs]),
        topk={i: torch.cat([o["topk"][i] for o in outs]) for i in range(L)},
        mtp_topk=torch.cat([o["mtp_topk"] for o in outs]),
        router={i: torch.cat([o["router"][i][0] for o in outs]) for i in outs[0]["router"]},
    )
    return cat


def compare(name, a, b):
    d_log = maxdiff(a["logits"], b["logits"])
    d_hid = maxdiff(a["hidden"], b["hidden"])
    d_mtp = maxdiff(a["mtp_logits"], b["mtp_logits"])
    check(d_log <= TOL_F32 and d_hid <= TOL_F32 and d_mtp <= TOL_F32,
          f"{name}: max|dlogits| {d_log:.2e}, max|dhidden| {d_hid:.2e}, max|dmtp| {d_mtp:.2e}")
    same_topk = all(torch.equal(a["topk"][i].sort(-1).values, b["topk"][i].sort(-1).values)
                    for i in a["topk"]) and torch.equal(a["mtp_topk"].sort(-1).values,
                                                        b["mtp_topk"].sort(-1).values)
    same_router = all(torch.equal(a["router"][i], b["router"][i]) for i in a["router"])
    check(same_topk and same_router, f"{name}: indexer top-k sets and router choices identical")


def check_checkpoint(ckpt):
    print(f"checkpoint {ckpt}")
    model = load(ckpt)
    V, N = model.cfg.vocab_size, 40
    fx = os.path.join(ckpt, "fixtures", f"prompt_{N}.safetensors")
    if os.path.exists(fx):
        # 0. the committed golden fixture still matches a fresh float32 run (bit-for-bit here).
        g = load_file(fx)
        ids, nxt = g["prompt_ids"].long(), g["mtp_next_ids"].long()
        o = model.forward(ids, mtp_next=nxt)
        L = model.cfg.num_hidden_layers
        d = max(maxdiff(o["logits"], g["logits"]), maxdiff(o["hidden"], g["hidden_states"]),
                maxdiff(o["mtp_logits"], g["mtp_logits"]))
        same = all(torch.equal(o["router"][i][0].int(), g[f"router_experts.{i}"])
                   for i in o["router"])
        check(d <= 1e-6 and same, f"fixture prompt_{N} reproduced: max|diff| {d:.2e}")
    else:
        ids = torch.randint(0, V, (N,), generator=torch.Generator().manual_seed(7))
        nxt = torch.cat([ids[1:], torch.tensor([3])])
    full = run_steps(model, ids, nxt, [N])
    compare(f"prefill {N} vs {N} one-token steps", full, run_steps(model, ids, nxt, [1] * N))
    compare("prefill 40 vs chunks 17+23", full, run_steps(model, ids, nxt, [17, 23]))

    # 3. index_topk >= length: indexer path == dense attention.
    big = load(ckpt, index_topk=4096)
    o_ix = big.forward(ids, mtp_next=nxt)
    o_dn = big.forward(ids, mtp_next=nxt, dense=True)
    d = max(maxdiff(o_ix["logits"], o_dn["logits"]), maxdiff(o_ix["mtp_logits"], o_dn["mtp_logits"]))
    check(d <= TOL_F32, f"index_topk=4096 (>= {N}) vs dense attention: max|dlogits| {d:.2e}")
    o_sp = model.forward(ids, mtp_next=nxt, dense=False)
    o_dn2 = model.forward(ids, mtp_next=nxt, dense=True)
    d = maxdiff(o_sp["logits"], o_dn2["logits"])
    check(d > 1e-3, f"index_topk={model.cfg.index_topk} at length {N} differs from dense "
                    f"(sparse path live): max|dlogits| {d:.2e}")

    # 3b. weight-absorbed MLA (§3.5) == expanded MLA (§3.4).
    ab = load(ckpt)
    ab.mla_absorbed = True
    o_ab = ab.forward(ids, mtp_next=nxt)
    d = max(maxdiff(o_ab["logits"], o_sp["logits"]), maxdiff(o_ab["mtp_logits"], o_sp["mtp_logits"]))
    same = all(torch.equal(o_ab["router"][i][0], o_sp["router"][i][0]) for i in o_sp["router"])
    check(d <= TOL_F32 and same, f"absorbed MLA vs expanded MLA: max|dlogits| {d:.2e}")

    # 4. fp32 noise floor against float64.
    m64 = load(ckpt, torch.float64)
    o64 = m64.forward(ids, mtp_next=nxt)
    d_log, d_mtp = maxdiff(o_sp["logits"], o64["logits"]), maxdiff(o_sp["mtp_logits"], o64["mtp_logits"])
    same = (all(torch.equal(o_sp["topk"][i], o64["topk"][i]) for i in o_sp["topk"])
            and all(torch.equal(o_sp["router"][i][0], o64["router"][i][0]) for i in o_sp["router"])
            and torch.equal(o_sp["mtp_router"][0], o64["mtp_router"][0])
            and torch.equal(o_sp["mtp_topk"], o64["mtp_topk"]))
    gap = min(min(v) for v in m64.gaps.values() if v)
    if same:
        check(d_log <= TOL_F32 and d_mtp <= TOL_F32,
              f"float32 vs float64: max|dlogits| {d_log:.2e}, max|dmtp| {d_mtp:.2e} "
              f"(same discrete decisions; smallest float64 decision gap {gap:.1e})")
    else:
        check(gap < 1e-4, f"float32 vs float64: a routing/top-k decision differs, explained by a "
                          f"near tie (smallest float64 decision gap {gap:.1e} < 1e-4)")

    # 5. DeepSeek-V3.2 switch: NeoX indexer rope.
    neox = load(ckpt, indexer_rope_interleave=False)
    a = run_steps(neox, ids, nxt, [N])
    compare("indexer_rope_interleave=false: prefill vs steps", a, run_steps(neox, ids, nxt, [1] * N))
    diff_sets = sum(int(not torch.equal(a["topk"][i], full["topk"][i])) for i in a["topk"])
    check(diff_sets > 0, f"NeoX indexer rope changes the selection in {diff_sets} layer(s)")


def global_checks():
    print("global")
    s = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0, float("-inf")]])
    check(topk_desc_stable(s, 2).tolist() == [[0, 2]] and
          topk_desc_stable(-s[:, :5], 3).tolist() == [[1, 3, 0]],
          "tie rule: descending score, lower position first")
    x = torch.randn(5, 3, 16, dtype=torch.float64)
    pos = torch.arange(100, 105)
    perm = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])
    a = apply_rope(x, pos, 1e4, True)[..., perm]
    b = apply_rope(x[..., perm], pos, 1e4, False)
    check(maxdiff(a, b) < 1e-12, "interleaved RoPE == NeoX RoPE on de-interleaved dims")
    t = {"a.bf16": torch.randn(3, 5).to(torch.bfloat16), "b.f32": torch.randn(7),
         "c.i32": torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3), "d.scalar": torch.tensor(2.5)}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.safetensors")
        save_file(t, p, {"k": "v"})
        r, meta = load_file(p, with_metadata=True)
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
    ok = all(torch.equal(t[k], r[k]) and t[k].dtype == r[k].dtype for k in t) and meta == {"k": "v"}
    check(ok and n % 8 == 0, "safetensors round trip (bf16, f32, i32, scalar; header % 8 == 0)")
    tj = json.load(open(os.path.join(ROOT, "tests/data/tiny/tokenizer.json"))) \
        if os.path.exists(os.path.join(ROOT, "tests/data/tiny/tokenizer.json")) else None
    if tj:
        tok = bpe.Tokenizer(tj)
        txt = "[gMASK]<sop><|user|>Hello, world!\n\n  It's 2026 — café 12345<|assistant|><think>"
        check(tok.decode(tok.encode(txt)) == txt, "tokenizer encode/decode round trip")


def main():
    torch.set_num_threads(1)
    fresh = "--fresh" in sys.argv[1:]       # ignore tests/data, generate temp checkpoints
    ckpts = [a for a in sys.argv[1:] if a != "--fresh"]
    tmp = None
    if not ckpts:
        ckpts = [os.path.join(ROOT, "tests/data", n) for n in ("tiny", "tiny-glm52")]
        if fresh or not all(os.path.exists(os.path.join(c, "model.safetensors")) for c in ckpts):
            sys.path.insert(0, os.path.dirname(HERE))
            from make_checkpoint import write_checkpoint
            tmp = tempfile.mkdtemp()
            ckpts = []
            for n, seed in (("tiny", 1), ("tiny-glm52", 2)):
                with open(os.path.join(HERE, "configs", n + ".json")) as f:
                    write_checkpoint(json.load(f), os.path.join(tmp, n), seed, quiet=True)
                ckpts.append(os.path.join(tmp, n))
    global_checks()
    for c in ckpts:
        check_checkpoint(c)
    if tmp:
        import shutil
        shutil.rmtree(tmp)
    if FAILURES:
        print(f"{len(FAILURES)} FAILED")
        sys.exit(1)
    print("all self-checks passed")


if __name__ == "__main__":
    main()
