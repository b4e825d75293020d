"""Golden fixtures for quantized checkpoints: the PyTorch reference on the dequantized weights.

  /usr/bin/python3 tools/make_quantized_fixtures.py            (from the repo root; `make
      reference-fixtures` runs it after `mxserve quantize` has written tests/data/tiny-mxfp4,
      tests/data/tiny-fp8 and tests/data/tiny-glm52-fp8 from the bf16 test checkpoints)
  /usr/bin/python3 tools/make_quantized_fixtures.py --ckpt DIR --name NAME [--lens 3,17,40]
      (a checkpoint that is not committed, such as the bundled model quantized to FP8 at test
      time: fixtures go to tests/data/NAME/fixtures)

Reads the checkpoint, decodes every quantized weight to float32 here, written from the formats'
specifications, not from mxserve's code:
  - MXFP4 (AMD Quark layout): `W.weight` uint8 [out, in/2], low nibble = even element,
    `W.weight_scale` uint8 E8M0 [out, in/32]; value = e2m1 x 2^(scale - 127) (OCP MX spec).
  - FP8 block-scaled (DeepSeek / Hugging Face layout): `W.weight` F8_E4M3 [out, in],
    `W.weight_scale_inv` F32 [ceil(out/128), ceil(in/128)]; value = e4m3fn x the scale of its
    128x128 block (OCP FP8 spec: bias 7, no infinities, S.1111.111 = NaN).
then runs the reference (tools/reference/glm_moe_dsa.py) in float32 and writes
fixtures/prompt_<T>.safetensors in make_fixtures.py's format. The C++ tests
(model_forward_test.cpp) check mxserve's kernels against them.
"""

import argparse
import glob
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

COMMITTED = ["tiny-mxfp4", "tiny-fp8", "tiny-glm52-fp8"]
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
FP8_BLOCK = 128


def dequantize_mxfp4(codes, scales):
    """[out, in/2] uint8 codes (low nibble first) and [out, in/32] E8M0 scales -> [out, in]."""
    lut = torch.tensor(E2M1, dtype=torch.float32)
    c = codes.to(torch.int64)
    vals = torch.stack([lut[c & 0xF], lut[c >> 4]], dim=-1).reshape(codes.shape[0], -1)
    assert bool((scales != 255).all()), "E8M0 NaN scale"
    s = torch.pow(2.0, scales.to(torch.float32) - 127.0)
    return vals * s.repeat_interleave(32, dim=1)


def e4m3fn_table():
    """The 256 e4m3fn values by code: sign, 4 exponent bits (bias 7), 3 mantissa bits."""
    vals = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 0xF and m == 0x7:
            vals.append(float("nan"))
        elif e == 0:
            vals.append(sign * (m / 8.0) * 2.0 ** -6)
        else:
            vals.append(sign * (1.0 + m / 8.0) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=torch.float32)


def dequantize_fp8(codes, scale_inv):
    """[out, in] e4m3fn codes and [ceil(out/128), ceil(in/128)] F32 block scales -> [out, in]."""
    out_f, in_f = codes.shape
    want = ((out_f + FP8_BLOCK - 1) // FP8_BLOCK, (in_f + FP8_BLOCK - 1) // FP8_BLOCK)
    assert tuple(scale_inv.shape) == want, f"scale shape {tuple(scale_inv.shape)}, want {want}"
    vals = e4m3fn_table()[codes.to(torch.int64)]
    assert not bool(torch.isnan(vals).any()), "NaN code in an FP8 weight"
    s = scale_inv.to(torch.float32)
    s = s.repeat_interleave(FP8_BLOCK, dim=0)[:out_f].repeat_interleave(FP8_BLOCK, dim=1)[:, :in_f]
    return vals * s


def load_dequantized(d):
    """Every tensor of the checkpoint in `d`, quantized weights decoded to float32."""
    raw = {}
    for path in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        raw.update(load_file(path))
    weights, counts = {}, {"mxfp4": 0, "fp8": 0}
    for name, t in raw.items():
        if name.endswith(".weight_scale") or name.endswith(".weight_scale_inv"):
            continue
        if name + "_scale_inv" in raw:
            weights[name] = dequantize_fp8(t, raw[name + "_scale_inv"])
            counts["fp8"] += 1
        elif name + "_scale" in raw:
            weights[name] = dequantize_mxfp4(t, raw[name + "_scale"])
            counts["mxfp4"] += 1
        else:
            weights[name] = t
    return weights, counts


def make(name, ckpt_dir, lens):
    torch.set_num_threads(1)
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        cfg = json.load(f)
    weights, counts = load_dequantized(ckpt_dir)
    model = GlmMoeDsa(cfg, weights, torch.float32)
    tok = bpe.Tokenizer(os.path.join(ckpt_dir, "tokenizer.json"))
    all_ids = torch.tensor(tok.encode(mf.PROMPT_TEXT))
    assert len(all_ids) >= max(lens), f"{name}: the prompt has only {len(all_ids)} tokens"
    fdir = os.path.join(ROOT, "tests", "data", name, "fixtures")
    os.makedirs(fdir, exist_ok=True)
    what = ", ".join(f"{n} {k.upper()}" for k, n in counts.items() if n)
    for T in lens:
        prompt = all_ids[:T]
        o = mf.run_fp32(model, prompt)
        _, gaps = mf.robust(cfg, weights, prompt, o)
        t = mf.fixture_tensors(model.cfg, prompt, o)
        meta = {"checkpoint": name, "prompt_len": str(T), "compute_dtype": "float32",
                "generator": "tools/make_quantized_fixtures.py",
                "weights": f"{what} tensors dequantized to float32 by the generator",
                "hidden_states": "index 0 = embedding output, l+1 = after layer l (pre final norm)"}
        save_file(t, os.path.join(fdir, f"prompt_{T}.safetensors"), meta)
        print(f"{name} T={T}: smallest float64 decision gaps "
              + ", ".join(f"{k} {v:.1e}" for k, v in sorted(gaps.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help=f"committed checkpoints (default: {COMMITTED})")
    ap.add_argument("--ckpt", help="a checkpoint directory that is not under tests/data")
    ap.add_argument("--name", help="with --ckpt: fixtures go to tests/data/NAME/fixtures")
    ap.add_argument("--lens", default=",".join(map(str, mf.PROMPT_LENS)),
                    help="prompt lengths (default: make_fixtures.py's)")
    a = ap.parse_args()
    lens = [int(x) for x in a.lens.split(",")]
    if a.ckpt:
        if not a.name or a.names:
            ap.error("--ckpt takes --name and no positional names")
        make(a.name, a.ckpt, lens)
        return
    for name in a.names or COMMITTED:
        make(name, os.path.join(ROOT, "tests", "data", name), lens)


if __name__ == "__main__":
    main()
