#!/usr/bin/python3
"""PyTorch reference for the C++ model.

Reads the file written by write_reference_input (our initial parameters and a
batch), builds the same GPT-2 in PyTorch (nanoGPT's structure: pre-LayerNorm
blocks, tanh-GELU MLP, causal attention, LM head tied to wte), and records
into golden.bin: logits, loss, every parameter gradient, and the losses,
gradient norms and final parameters of `steps` AdamW steps with global-norm
clipping, on the same batch.

Run once (needs Debian's python3-torch); commit golden.bin. CI does not need
PyTorch: tests/unit/test_golden.cpp only reads the committed file.

  build/tests/write_reference_input /tmp/ref_input.bin
  /usr/bin/python3 tests/reference/make_golden.py   # Debian python with python3-torch /tmp/ref_input.bin tests/reference/golden.bin
"""
import json
import struct
import sys

import os

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402


def read_ref(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"GPTREF01", "not a GPTREF01 file"
    (hlen,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16:16 + hlen])
    base = 16 + hlen
    arrays = {}
    for name, a in header["arrays"].items():
        n = int(np.prod(a["shape"]))
        dt = np.float32 if a["dtype"] == "f32" else np.int32
        arrays[name] = np.frombuffer(data, dtype=dt, count=n, offset=base + a["offset"]).reshape(a["shape"]).copy()
    return header["meta"], arrays


def write_ref(path, meta, arrays):
    names = sorted(arrays)
    index, off, blobs = {}, 0, []
    for name in names:
        a = np.ascontiguousarray(arrays[name])
        dtype = "f32" if a.dtype == np.float32 else "i32"
        a = a.astype(np.float32 if dtype == "f32" else np.int32)
        index[name] = {"dtype": dtype, "shape": list(a.shape), "offset": off}
        blobs.append(a.tobytes())
        off += a.nbytes
    header = json.dumps({"meta": meta, "arrays": index}, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(b"GPTREF01" + struct.pack("<Q", len(header)) + header + b"".join(blobs))


def main():
    src, dst = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    meta, arrays = read_ref(src)
    model = GPT(meta)
    named = dict(model.named_parameters())
    for name, p in named.items():
        with torch.no_grad():
            p.copy_(torch.from_numpy(arrays["param." + name]))
    tok = torch.from_numpy(arrays["tokens"]).long()
    tgt = torch.from_numpy(arrays["targets"]).long()
    V = meta["vocab_size"]

    def loss_fn():
        logits = model(tok)
        return logits, F.cross_entropy(logits.view(-1, V), tgt.view(-1))

    out = dict(arrays)
    logits, loss = loss_fn()
    loss.backward()
    out["logits"] = logits.detach().numpy()
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for name, p in named.items():
        out["grad." + name] = p.grad.numpy().copy()

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": meta["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=meta["lr"], betas=(meta["beta1"], meta["beta2"]), eps=meta["eps"])
    losses, norms = [], []
    for _ in range(meta["steps"]):
        opt.zero_grad()
        _, loss = loss_fn()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), meta["clip"])
        assert norm > meta["clip"], "clipping must be active in every reference step"
        losses.append(loss.item())
        norms.append(norm.item())
        opt.step()
    out["step_losses"] = np.array(losses, dtype=np.float32)
    out["step_grad_norms"] = np.array(norms, dtype=np.float32)
    for name, p in named.items():
        out["final." + name] = p.detach().numpy().copy()
    meta = dict(meta, torch_version=torch.__version__)
    write_ref(dst, meta, out)
    print(f"wrote {dst}: loss {out['loss'][0]:.6f}, step losses {losses}, norms {norms}")


if __name__ == "__main__":
    main()
