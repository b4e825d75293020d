"""Golden fixtures for an MXFP4 checkpoint: the PyTorch reference on the dequantized weights.

  /usr/bin/python3 tools/make_mxfp4_fixtures.py     (from the repo root; `make reference-fixtures`
                                                     runs it after `mxserve quantize` has written
                                                     tests/data/tiny-mxfp4 from tests/data/tiny)

Reads tests/data/tiny-mxfp4 (AMD Quark layout: `W.weight` uint8 [out, in/2], low nibble = even
element, `W.weight_scale` uint8 E8M0 [out, in/32]), decodes every MXFP4 weight to float32 here
(e2m1 value x 2^(scale - 127), written from the OCP MX spec, not from mxserve's code), runs the
reference (tools/reference/glm_moe_dsa.py) in float32 and writes
tests/data/tiny-mxfp4/fixtures/prompt_<T>.safetensors in make_fixtures.py's format. The C++
test (model_forward_test.cpp) then checks mxserve's MXFP4 kernels against them.
"""

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "reference"))
sys.path.insert(0, HERE)
import bpe_tokenizer as bpe  # noqa: E402
import make_fixtures as mf  # noqa: E402
from glm_moe_dsa import GlmMoeDsa  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

NAME = "tiny-mxfp4"
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize(codes, scales):
    """[out, in/2] uint8 codes (low nibble first) and [out, in/32] E8M0 scales -> [out, in]."""
    lut = torch.tensor(E2M1, dtype=torch.float32)
    c = codes.to(torch.int64)
    vals = torch.stack([lut[c & 0xF], lut[c >> 4]], dim=-1).reshape(codes.shape[0], -1)
    assert bool((scales != 255).all()), "E8M0 NaN scale"
    s = torch.pow(2.0, scales.to(torch.float32) - 127.0)
    return vals * s.repeat_interleave(32, dim=1)


def main():
    torch.set_num_threads(1)
    d = os.path.join(ROOT, "tests", "data", NAME)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    raw = load_file(os.path.join(d, "model.safetensors"))
    weights, n_mx = {}, 0
    for name, t in raw.items():
        if name.endswith(".weight_scale"):
            continue
        scale = raw.get(name + "_scale")
        if scale is not None:
            weights[name] = dequantize(t, scale)
            n_mx += 1
        else:
            weights[name] = t
    model = GlmMoeDsa(cfg, weights, torch.float32)
    tok = bpe.Tokenizer(os.path.join(d, "tokenizer.json"))
    all_ids = torch.tensor(tok.encode(mf.PROMPT_TEXT))
    fdir = os.path.join(d, "fixtures")
    os.makedirs(fdir, exist_ok=True)
    for T in mf.PROMPT_LENS:
        prompt = all_ids[:T]
        o = mf.run_fp32(model, prompt)
        _, gaps = mf.robust(cfg, weights, prompt, o)
        t = mf.fixture_tensors(model.cfg, prompt, o)
        meta = {"checkpoint": NAME, "prompt_len": str(T), "compute_dtype": "float32",
                "generator": "tools/make_mxfp4_fixtures.py",
                "weights": f"{n_mx} MXFP4 tensors dequantized to float32 by the generator",
                "hidden_states": "index 0 = embedding output, l+1 = after layer l (pre final norm)"}
        save_file(t, os.path.join(fdir, f"prompt_{T}.safetensors"), meta)
        print(f"{NAME} T={T}: smallest float64 decision gaps "
              + ", ".join(f"{k} {v:.1e}" for k, v in sorted(gaps.items())))


if __name__ == "__main__":
    main()
