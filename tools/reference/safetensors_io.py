"""Minimal safetensors reader/writer (no `safetensors` package needed).

File layout (https://github.com/huggingface/safetensors):
  [8 bytes]  N = header length, unsigned little-endian u64
  [N bytes]  JSON header: {"__metadata__": {str: str}, NAME: {"dtype": "BF16", "shape": [...],
             "data_offsets": [begin, end]}, ...}; offsets are relative to the start of the data
             section. We write tensors sorted by name, contiguous, and pad the header with spaces
             so that the data section starts at a multiple of 8 bytes.
  [rest]     raw little-endian tensor bytes, C order.

BF16 is stored by viewing a torch.bfloat16 tensor as int16 (same bits).
"""

import json
import struct

import numpy as np
import torch

# safetensors dtype string -> (torch dtype, bytes per element)
_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_NAME_OF = {v[0]: k for k, v in _DTYPES.items()}
# Read only, as their raw byte codes (torch.uint8): the caller decodes them (FP8 checkpoints:
# tools/make_quantized_fixtures.py).
_RAW_CODES = {"F8_E4M3": (torch.uint8, 1)}

# numpy dtype used to move raw bytes in and out (bf16 travels as int16).
_NP_OF = {
    torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16,
    torch.bfloat16: np.int16, torch.int64: np.int64, torch.int32: np.int32,
    torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8, torch.bool: np.bool_,
}


def _to_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()


def save_file(tensors, path, metadata=None):
    """Writes {name: torch.Tensor} to `path`. metadata: optional {str: str}."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _NAME_OF:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        b = _to_bytes(t)
        header[name] = {"dtype": _NAME_OF[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def load_file(path, with_metadata=False):
    """Reads a safetensors file into {name: torch.Tensor} (dtypes preserved)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        dt, size = _DTYPES.get(info["dtype"]) or _RAW_CODES[info["dtype"]]
        b, e = info["data_offsets"]
        shape = info["shape"]
        count = int(np.prod(shape)) if shape else 1
        if e - b != count * size:
            raise ValueError(f"{path}: {name}: {e - b} bytes for shape {shape} {info['dtype']}")
        arr = np.frombuffer(data, dtype=np.dtype(_NP_OF[dt]).newbyteorder("<"),
                            count=count, offset=base + b)
        t = torch.from_numpy(arr.astype(_NP_OF[dt]).copy()).reshape(shape)
        if dt == torch.bfloat16:
            t = t.view(torch.bfloat16)
        out[name] = t
    return (out, meta) if with_metadata else out
