"""Plain PyTorch reference of GlmMoeDsaForCausalLM (GLM-5.x; DeepSeek-V3.2 via config switches).

Written to be read line by line against /work/shared/reference/glm-moe-dsa.md (section numbers
in comments, "§3.6" etc). Clarity over speed: no fused kernels, expanded MLA, explicit loops over
experts. Everything is computed in `dtype` (float32 by default; float64 for noise-floor checks)
from the checkpoint weights upcast from bf16.

Dimension legend:
  T  new tokens in this call        S  keys in the cache (= start + T)
  D  hidden_size                    H  num_attention_heads
  Dn qk_nope_head_dim  Dr qk_rope_head_dim  Dv v_head_dim   Rq q_lora_rank  Rkv kv_lora_rank
  Hi index_n_heads     Di index_head_dim    K  index_topk
  E  n_routed_experts  k  num_experts_per_tok  G n_group   V vocab_size

Conventions chosen here (all documented in tests/data/README.md):
  * Every RMSNorm (input/post-attention/final/q_a/kv_a/MTP enorm, hnorm, shared_head.norm) uses
    eps = rms_norm_eps (sglang/vLLM/llama.cpp; HF uses 1e-6 for q_a/kv_a). Indexer k_norm is a
    LayerNorm with bias, eps = 1e-6.
  * Indexer top-k tie rule: sort scores descending, ties broken by LOWER position first (stable
    sort over positions 0..p); take the first min(index_topk, p+1). The same rule (lower index
    first on ties) is used for the MoE group and expert selection.
  * MTP input hidden = the main model's POST-final-norm hidden (the vector fed to lm_head), as in
    sglang. The embedding at position 0 is NOT zeroed (vLLM's DeepSeek-MTP does that; we don't).
  * Hidden states: hidden[0] = embedding output, hidden[l+1] = residual stream after layer l
    (before the final norm).
"""

import math

import torch


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------

class Config:
    """HF config.json dict + derived fields, with the fallbacks of §1.2 and §1.1."""

    def __init__(self, d):
        self.raw = dict(d)
        g = d.get
        self.model_type = g("model_type", "glm_moe_dsa")
        self.vocab_size = d["vocab_size"]
        self.hidden_size = d["hidden_size"]
        self.num_hidden_layers = d["num_hidden_layers"]
        self.intermediate_size = d["intermediate_size"]
        self.moe_intermediate_size = d["moe_intermediate_size"]
        self.n_routed_experts = d["n_routed_experts"]
        self.n_shared_experts = g("n_shared_experts", 1) or 0
        self.num_experts_per_tok = d["num_experts_per_tok"]
        self.n_group = g("n_group", 1) or 1
        self.topk_group = g("topk_group", 1) or 1
        self.routed_scaling_factor = float(g("routed_scaling_factor", 1.0))
        self.norm_topk_prob = bool(g("norm_topk_prob", True))
        assert g("scoring_func", "sigmoid") == "sigmoid", "only sigmoid scoring"
        assert g("topk_method", "noaux_tc") == "noaux_tc", "only noaux_tc routing"
        self.num_attention_heads = d["num_attention_heads"]
        self.q_lora_rank = d["q_lora_rank"]
        assert self.q_lora_rank, "q_lora_rank must be set (the indexer consumes the q latent)"
        self.kv_lora_rank = d["kv_lora_rank"]
        self.qk_nope_head_dim = d["qk_nope_head_dim"]
        self.qk_rope_head_dim = d["qk_rope_head_dim"]
        self.v_head_dim = d["v_head_dim"]
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim  # note: ignore "head_dim"
        self.index_n_heads = d["index_n_heads"]
        self.index_head_dim = d["index_head_dim"]
        self.index_topk = d["index_topk"]
        self.rms_norm_eps = float(g("rms_norm_eps", 1e-6))
        self.indexer_norm_eps = 1e-6  # §3.2: k_norm LayerNorm eps (not in config.json)
        assert g("hidden_act", "silu") == "silu"
        assert not g("attention_bias", False), "attention_bias not supported"
        assert not g("tie_word_embeddings", False), "GLM/DeepSeek heads are untied"
        # RoPE: flat rope_theta (older configs) or nested rope_parameters.rope_theta (GLM-5.2).
        rp = g("rope_parameters") or {}
        rs = g("rope_scaling") or {}
        rope_type = rp.get("rope_type", rs.get("rope_type", rs.get("type", "default")))
        if rope_type != "default":
            raise NotImplementedError(f"rope_type {rope_type!r} (YaRN etc.) is not implemented")
        self.rope_theta = float(rp.get("rope_theta", g("rope_theta", 10000.0)))
        # Main MLA rope is interleaved (GPT-J pairs) unless rope_interleave is false.
        self.rope_interleave = bool(g("rope_interleave", True))
        # Indexer rope: interleaved for GLM-5.x; NeoX (half split) for DeepSeek-V3.2.
        self.indexer_rope_interleave = bool(
            g("indexer_rope_interleave", self.model_type != "deepseek_v32"))
        # §1.2 IndexShare schedule: indexer_types if present, else the HF fallback rule.
        L = self.num_hidden_layers
        if g("indexer_types") is not None:
            self.indexer_types = list(d["indexer_types"])
            assert len(self.indexer_types) == L
        else:
            freq = g("index_topk_freq", 1) or 1
            offset = g("index_skip_topk_offset", 0) or 0
            self.indexer_types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared"
                                  for i in range(L)]
        assert self.indexer_types[0] == "full", "layer 0 must run the indexer"
        # Dense vs MoE MLP: mlp_layer_types if present, else dense iff i < first_k_dense_replace.
        fk = g("first_k_dense_replace", 0)
        if g("mlp_layer_types") is not None:
            self.mlp_layer_types = list(d["mlp_layer_types"])
            assert len(self.mlp_layer_types) == L
        else:
            self.mlp_layer_types = ["dense" if i < fk else "sparse" for i in range(L)]
        self.num_nextn_predict_layers = g("num_nextn_predict_layers", 0) or 0
        assert self.num_nextn_predict_layers <= 1, "one MTP layer supported"
        # MTP layer (index L): always a full indexer, MoE iff L >= first_k_dense_replace.
        self.mtp_is_moe = L >= fk

    def layer_is_full(self, i):
        return i >= self.num_hidden_layers or self.indexer_types[i] == "full"

    def layer_is_moe(self, i):
        return self.mtp_is_moe if i >= self.num_hidden_layers else self.mlp_layer_types[i] == "sparse"


# --------------------------------------------------------------------------------------------
# Primitives (§3.2, §3.3)
# --------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    """RMSNorm(x; w) = w * x / sqrt(mean(x^2) + eps). x [..., N], w [N]."""
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def layer_norm(x, w, b, eps):
    """LayerNorm with gamma w and beta b (mean-subtracted, biased variance)."""
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * w + b


def apply_rope(x, pos, theta, interleave):
    """Rotates x [T, ..., d] by positions pos [T] (int64).

    inv_freq_j = theta^(-2j/d), phi = pos * inv_freq_j, j = 0..d/2-1.
    interleave=True  (GPT-J): pairs (x[2j], x[2j+1]).
    interleave=False (NeoX):  pairs (x[j], x[j + d/2]).
    """
    d = x.shape[-1]
    j = torch.arange(0, d // 2, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * j / d)                                    # [d/2]
    phi = pos.to(torch.float64)[:, None] * inv_freq[None, :]              # [T, d/2]
    shape = [x.shape[0]] + [1] * (x.dim() - 2) + [d // 2]
    cos = torch.cos(phi).to(x.dtype).reshape(shape)
    sin = torch.sin(phi).to(x.dtype).reshape(shape)
    if interleave:
        x0, x1 = x[..., 0::2], x[..., 1::2]
        y0 = x0 * cos - x1 * sin
        y1 = x0 * sin + x1 * cos
        return torch.stack([y0, y1], dim=-1).flatten(-2)
    x0, x1 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


def topk_desc_stable(scores, k):
    """Indices of the k largest entries of each row of scores [T, N].

    Tie rule: descending score, ties broken by LOWER index first (stable sort). -inf entries
    are never returned when k <= number of finite entries.
    """
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
    return order[:, :k]


def silu_mlp(x, gate_w, up_w, down_w):
    """SwiGLU: down · (SiLU(gate · x) ⊙ (up · x))."""
    return (torch.nn.functional.silu(x @ gate_w.T) * (x @ up_w.T)) @ down_w.T


# --------------------------------------------------------------------------------------------
# KV cache
# --------------------------------------------------------------------------------------------

class KVCache:
    """Per layer (including the MTP layer at index num_hidden_layers):
    c    [S, Rkv]  post-kv_a_layernorm latent        k_pe [S, Dr]  post-RoPE shared rope key
    ik   [S, Di]   indexer key (post-LayerNorm, post-RoPE), full-indexer layers only
    The main model and the MTP layer keep separate lengths (the MTP sequence is its own).
    """

    def __init__(self, n_layers_total):
        self.layers = [dict() for _ in range(n_layers_total)]
        self.length = 0       # tokens consumed by the main model
        self.mtp_length = 0   # rows consumed by the MTP layer

    @staticmethod
    def append(entry, name, x):
        entry[name] = x if name not in entry else torch.cat([entry[name], x], dim=0)
        return entry[name]


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------

class GlmMoeDsa:
    def __init__(self, config, weights, dtype=torch.float32):
        """config: dict (config.json) or Config; weights: {HF name: tensor} (any float dtype)."""
        self.cfg = config if isinstance(config, Config) else Config(config)
        self.dtype = dtype
        # Upcast every tensor (bf16 weights, fp32 e_score_correction_bias) to the compute dtype.
        self.w = {k: v.to(dtype) for k, v in weights.items()}
        self.used = set()
        # False: expanded MLA (§3.4, the reference). True: weight-absorbed MLA (§3.5), the form a
        # decode kernel uses; selfcheck.py shows both agree.
        self.mla_absorbed = False
        # Decision margins (for choosing robust golden fixtures): each entry is the score gap at
        # a selection boundary (k-th best minus (k+1)-th best), recorded when > 0.
        self.gaps = {"indexer": [], "router": [], "group": []}
        # Training hooks (tools/train.py); the defaults leave inference untouched.
        #   record_gaps=False skips the decision-margin bookkeeping above.
        #   attn_targets = {} collects, per layer prefix, the detached dense causal attention
        #     distribution summed over heads and renormalised, [T, S]: the DSA indexer's KL target.
        #   detach_indexer_input=True stops the indexer loss from reaching the main model.
        self.record_gaps = True
        self.attn_targets = None
        self.detach_indexer_input = False

    def W(self, name):
        self.used.add(name)
        if name not in self.w:
            raise KeyError(f"missing tensor {name}")
        return self.w[name]

    def _gap(self, kind, row, n):
        if not self.record_gaps:
            return
        v = torch.sort(row, descending=True).values
        if n < v.numel() and torch.isfinite(v[n]):
            g = (v[n - 1] - v[n]).item()
            if g > 0:
                self.gaps[kind].append(g)

    def unused_tensors(self):
        """Tensors never read (routed experts that no token picked are not counted)."""
        return sorted(n for n in set(self.w) - self.used if ".mlp.experts." not in n)

    # ---------------- §3.6 DSA lightning indexer ----------------
    def indexer(self, p, a, cq, pos, entry):
        """Returns (topk [T, K] int64 padded with -1, scores [T, S] with -inf at s > pos)."""
        c = self.cfg
        T = a.shape[0]
        Hi, Di, Dr = c.index_n_heads, c.index_head_dim, c.qk_rope_head_dim
        if self.detach_indexer_input:
            a, cq = a.detach(), cq.detach()
        q = (cq @ self.W(p + "indexer.wq_b.weight").T).view(T, Hi, Di)      # [T, Hi, Di]
        q = torch.cat([apply_rope(q[..., :Dr], pos, c.rope_theta, c.indexer_rope_interleave),
                       q[..., Dr:]], dim=-1)                                 # rope FIRST
        k = layer_norm(a @ self.W(p + "indexer.wk.weight").T,
                       self.W(p + "indexer.k_norm.weight"), self.W(p + "indexer.k_norm.bias"),
                       c.indexer_norm_eps)                                   # [T, Di]
        k = torch.cat([apply_rope(k[:, :Dr], pos, c.rope_theta, c.indexer_rope_interleave),
                       k[:, Dr:]], dim=-1)
        keys = KVCache.append(entry, "ik", k)                                # [S, Di]
        S = keys.shape[0]
        w = (a @ self.W(p + "indexer.weights_proj.weight").T) * Hi ** -0.5   # [T, Hi]
        dots = torch.einsum("thd,sd->ths", q, keys) * Di ** -0.5             # [T, Hi, S]
        scores = torch.einsum("ths,th->ts", torch.relu(dots), w)             # [T, S]
        future = torch.arange(S)[None, :] > pos[:, None]                     # [T, S]
        scores = scores.masked_fill(future, float("-inf"))
        K = c.index_topk
        topk = torch.full((T, K), -1, dtype=torch.int64)
        for t in range(T):
            n = min(K, int(pos[t]) + 1)
            topk[t, :n] = topk_desc_stable(scores[t:t + 1], n)[0]
            if n < int(pos[t]) + 1:
                self._gap("indexer", scores[t], n)
        return topk, scores

    # ---------------- §3.4 MLA (expanded form) + §3.7 sparse mask ----------------
    def attention(self, p, a, pos, entry, is_full, prev_topk, dense):
        c = self.cfg
        T = a.shape[0]
        H, Dn, Dr, Dv = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        eps = c.rms_norm_eps
        cq = rms_norm(a @ self.W(p + "q_a_proj.weight").T, self.W(p + "q_a_layernorm.weight"),
                      eps)                                                   # [T, Rq]
        q = (cq @ self.W(p + "q_b_proj.weight").T).view(T, H, Dn + Dr)      # [T, H, Dn+Dr]
        q_nope, q_pe = q[..., :Dn], q[..., Dn:]
        q_pe = apply_rope(q_pe, pos, c.rope_theta, c.rope_interleave)       # rope LAST
        kv = a @ self.W(p + "kv_a_proj_with_mqa.weight").T                  # [T, Rkv+Dr]
        lat = rms_norm(kv[:, :c.kv_lora_rank], self.W(p + "kv_a_layernorm.weight"), eps)
        k_pe = apply_rope(kv[:, c.kv_lora_rank:], pos, c.rope_theta, c.rope_interleave)
        lat_all = KVCache.append(entry, "c", lat)                           # [S, Rkv]
        kpe_all = KVCache.append(entry, "k_pe", k_pe)                       # [S, Dr]
        S = lat_all.shape[0]

        # Token selection: causal, intersected with the indexer's top-k (own or shared).
        allowed = torch.arange(S)[None, :] <= pos[:, None]                  # [T, S]
        scores_ix = None
        if is_full:
            topk, scores_ix = self.indexer(p, a, cq, pos, entry)
        else:
            assert prev_topk is not None, "shared layer without a preceding full layer"
            topk = prev_topk
        if not dense:
            sel = torch.zeros(T, S + 1, dtype=torch.bool)
            sel.scatter_(1, torch.where(topk < 0, S, topk), True)           # -1 -> dummy col S
            allowed = allowed & sel[:, :S]

        scale = c.qk_head_dim ** -0.5                                       # no YaRN mscale
        if not self.mla_absorbed:
            kvb = (lat_all @ self.W(p + "kv_b_proj.weight").T).view(S, H, Dn + Dv)
            k_nope, v = kvb[..., :Dn], kvb[..., Dn:]                        # [S,H,Dn], [S,H,Dv]
            k = torch.cat([k_nope, kpe_all[:, None, :].expand(S, H, Dr)], dim=-1)  # [S,H,Dn+Dr]
            qf = torch.cat([q_nope, q_pe], dim=-1)                          # [T, H, Dn+Dr]
            s = torch.einsum("thd,shd->hts", qf, k) * scale                 # [H, T, S]
            if self.attn_targets is not None:
                causal = torch.arange(S)[None, :] <= pos[:, None]           # [T, S]
                pd = torch.softmax(s.detach().masked_fill(~causal[None], float("-inf")), -1)
                pd = pd.sum(0)
                self.attn_targets[p] = pd / pd.sum(-1, keepdim=True)        # [T, S]
            s = s.masked_fill(~allowed[None], float("-inf"))
            prob = torch.softmax(s, dim=-1)
            o = torch.einsum("hts,shd->thd", prob, v)                       # [T, H, Dv]
        else:
            w_kvb = self.W(p + "kv_b_proj.weight").view(H, Dn + Dv, c.kv_lora_rank)
            w_uk, w_uv = w_kvb[:, :Dn], w_kvb[:, Dn:]                       # [H,Dn,Rkv], [H,Dv,Rkv]
            q_lat = torch.einsum("thd,hdr->thr", q_nope, w_uk)              # [T, H, Rkv]
            s = (torch.einsum("thr,sr->hts", q_lat, lat_all)
                 + torch.einsum("thd,sd->hts", q_pe, kpe_all)) * scale      # [H, T, S]
            s = s.masked_fill(~allowed[None], float("-inf"))
            prob = torch.softmax(s, dim=-1)
            o_lat = torch.einsum("hts,sr->thr", prob, lat_all)              # [T, H, Rkv]
            o = torch.einsum("thr,hvr->thv", o_lat, w_uv)                   # [T, H, Dv]
        o = o.reshape(T, H * Dv)                                            # head-major
        return o @ self.W(p + "o_proj.weight").T, topk, scores_ix

    # ---------------- §3.8 MoE, noaux_tc ----------------
    def moe(self, p, m):
        """Returns (out [T, D], idx [T, k] ascending, weights [T, k] matching idx)."""
        c = self.cfg
        T = m.shape[0]
        E, k, G = c.n_routed_experts, c.num_experts_per_tok, c.n_group
        # Router in fp32 (or the compute dtype if wider); bias is fp32 in the checkpoint.
        rd = torch.float64 if self.dtype == torch.float64 else torch.float32
        logits = m.to(rd) @ self.W(p + "gate.weight").to(rd).T                # [T, E]
        s = torch.sigmoid(logits)                                             # weights
        b = s + self.W(p + "gate.e_score_correction_bias").to(rd)             # selection only
        if G > 1:
            gscore = b.view(T, G, E // G).topk(2, dim=-1).values.sum(-1)      # [T, G] top-2 sum
            keep = topk_desc_stable(gscore, c.topk_group)                     # [T, topk_group]
            for t in range(T):
                self._gap("group", gscore[t], c.topk_group)
            gmask = torch.zeros(T, G, dtype=torch.bool).scatter_(1, keep, True)
            emask = gmask[:, :, None].expand(T, G, E // G).reshape(T, E)
            b = b.masked_fill(~emask, float("-inf"))
        idx = topk_desc_stable(b, k)                                          # [T, k]
        for t in range(T):
            self._gap("router", b[t], k)
        wgt = s.gather(1, idx)
        if c.norm_topk_prob:
            wgt = wgt / (wgt.sum(-1, keepdim=True) + 1e-20)
        wgt = wgt * c.routed_scaling_factor
        wgt = wgt.to(self.dtype)
        out = torch.zeros_like(m)
        for e in range(E):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            pe = f"{p}experts.{e}."
            y = silu_mlp(m[rows], self.W(pe + "gate_proj.weight"), self.W(pe + "up_proj.weight"),
                         self.W(pe + "down_proj.weight"))
            out.index_add_(0, rows, y * wgt[rows, slot][:, None])
        if c.n_shared_experts:
            ps = p + "shared_experts."
            out = out + silu_mlp(m, self.W(ps + "gate_proj.weight"), self.W(ps + "up_proj.weight"),
                                 self.W(ps + "down_proj.weight"))
        order = idx.argsort(dim=-1)
        return out, idx.gather(1, order), wgt.gather(1, order)

    # ---------------- §3.1 decoder layer ----------------
    def layer(self, i, h, pos, cache, prev_topk, dense):
        c = self.cfg
        p = f"model.layers.{i}."
        entry = cache.layers[i]
        a = rms_norm(h, self.W(p + "input_layernorm.weight"), c.rms_norm_eps)
        attn, topk, scores = self.attention(p + "self_attn.", a, pos, entry, c.layer_is_full(i),
                                            prev_topk, dense)
        h = h + attn
        m = rms_norm(h, self.W(p + "post_attention_layernorm.weight"), c.rms_norm_eps)
        router = None
        if c.layer_is_moe(i):
            out, ridx, rw = self.moe(p + "mlp.", m)
            router = (ridx, rw)
        else:
            out = silu_mlp(m, self.W(p + "mlp.gate_proj.weight"), self.W(p + "mlp.up_proj.weight"),
                           self.W(p + "mlp.down_proj.weight"))
        return h + out, topk, scores, router

    # ---------------- full forward ----------------
    def forward(self, tokens, cache=None, mtp_next=None, dense=False):
        """Runs T new tokens at positions cache.length .. cache.length+T-1.

        tokens   [T] int64.  cache: KVCache (updated in place) or None (fresh).
        mtp_next [T] int64, "argmax" or None: the token that follows each new token (row t's
                 x_{t+1}); if given, the MTP layer runs on (final_hidden[t], mtp_next[t]) at
                 position t. "argmax" = tokens[1:] followed by argmax(logits[-1]) (the
                 fixture convention: the last row uses the greedy next token).
        dense    True: ignore the indexer's selection (plain causal MLA) for comparison checks.
        Returns a dict:
          logits [T, V]; hidden [L+1, T, D] (0 = embedding, l+1 = after layer l);
          final_hidden [T, D] (post-final-norm); topk {layer: [T, K]} (for shared layers the
          reused set); indexer_scores {full layer: [T, S]}; router {moe layer: (idx, w)};
          mtp_logits [T, V], mtp_hidden [T, D] (post shared_head.norm), mtp_topk, mtp_router.
        """
        c = self.cfg
        L = c.num_hidden_layers
        if cache is None:
            cache = KVCache(L + c.num_nextn_predict_layers)
        tokens = torch.as_tensor(tokens, dtype=torch.int64)
        T = tokens.shape[0]
        pos = torch.arange(cache.length, cache.length + T)
        h = self.W("model.embed_tokens.weight")[tokens]                     # [T, D], no scaling
        hidden = [h]
        topks, scores, routers = {}, {}, {}
        prev_topk = None
        for i in range(L):
            h, topk, sc, router = self.layer(i, h, pos, cache, prev_topk, dense)
            prev_topk = topk
            topks[i] = topk
            if sc is not None:
                scores[i] = sc
            if router is not None:
                routers[i] = router
            hidden.append(h)
        y = rms_norm(h, self.W("model.norm.weight"), c.rms_norm_eps)         # [T, D]
        logits = y @ self.W("lm_head.weight").T                              # [T, V]
        cache.length += T
        out = dict(logits=logits, hidden=torch.stack(hidden), final_hidden=y, topk=topks,
                   indexer_scores=scores, router=routers, cache=cache)
        if isinstance(mtp_next, str):
            assert mtp_next == "argmax"
            mtp_next = torch.cat([tokens[1:], logits[-1].argmax().reshape(1)])
        if mtp_next is not None:
            out["mtp_next"] = mtp_next
            out.update(self.mtp(y, torch.as_tensor(mtp_next, dtype=torch.int64), cache, dense))
        return out

    # ---------------- §3.11 MTP layer ----------------
    def mtp(self, hprev, next_tokens, cache, dense=False):
        """Row t: (hprev[t] = post-final-norm hidden at position t, next_tokens[t] = x_{t+1})
        at RoPE position t -> logits for x_{t+2}. Uses its own cache rows (cache.mtp_length)."""
        c = self.cfg
        L = c.num_hidden_layers
        p = f"model.layers.{L}."
        T = hprev.shape[0]
        pos = torch.arange(cache.mtp_length, cache.mtp_length + T)
        e = rms_norm(self.W("model.embed_tokens.weight")[next_tokens], self.W(p + "enorm.weight"),
                     c.rms_norm_eps)
        g = rms_norm(hprev, self.W(p + "hnorm.weight"), c.rms_norm_eps)
        u = torch.cat([e, g], dim=-1) @ self.W(p + "eh_proj.weight").T      # [T, D], e first
        u, topk, sc, router = self.layer(L, u, pos, cache, None, dense)
        z = rms_norm(u, self.W(p + "shared_head.norm.weight"), c.rms_norm_eps)
        cache.mtp_length += T
        return dict(mtp_logits=z @ self.W("lm_head.weight").T, mtp_hidden=z, mtp_topk=topk,
                    mtp_indexer_scores=sc, mtp_router=router)


def load_checkpoint(ckpt_dir, dtype=torch.float32):
    """Loads config.json + model.safetensors from a directory into a GlmMoeDsa."""
    import json
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from safetensors_io import load_file
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        cfg = json.load(f)
    return GlmMoeDsa(cfg, load_file(os.path.join(ckpt_dir, "model.safetensors")), dtype)
