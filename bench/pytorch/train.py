"""PyTorch side of examples/train: the same GPT-style model, initial
weights, corpus and batches (read from the init.safetensors the Go example
writes), trained with torch.optim.AdamW in float32; prints every step's
loss and writes them to --out as losses.npy, for the parity test.

    go run ./examples/train -out /tmp/train
    python3 bench/pytorch/train.py --init /tmp/train/init.safetensors --out examples/train/testdata/parity
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

from llm import load_safetensors


def metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


def logits(p, c, tokens):
    B, T = tokens.shape
    D, H = c["dim"], c["heads"]
    hd = D // H
    x = p["wte"][tokens] + p["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(c["layers"]):
        w = lambda n: p["h%d.%s" % (i, n)]
        h = F.layer_norm(x, (D,), w("ln1.w"), w("ln1.b"), 1e-5)
        q, k, v = (F.linear(h, w("w" + n), w("b" + n)).view(B, T, H, hd).transpose(1, 2) for n in "qkv")
        s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        y = torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, D), w("wo"), w("bo"))
        h = F.layer_norm(x, (D,), w("ln2.w"), w("ln2.b"), 1e-5)
        x = x + F.linear(F.gelu(F.linear(h, w("w1"), w("b1"))), w("w2"), w("b2"))
    x = F.layer_norm(x, (D,), p["lnf.w"], p["lnf.b"], 1e-5)
    return x @ p["wte"].T


def batch(corpus, c, step):
    ins, tgs = [], []
    for b in range(c["batch"]):
        at = ((step * c["batch"] + b) * 7919) % (len(corpus) - c["seq"] - 1)
        ins.append(corpus[at:at + c["seq"]])
        tgs.append(corpus[at + 1:at + c["seq"] + 1])
    return torch.stack(ins), torch.stack(tgs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init", required=True)
    ap.add_argument("--out", help="folder for losses.npy")
    args = ap.parse_args()
    meta = metadata(args.init)
    c = {k: int(meta[k]) for k in ("vocab", "dim", "heads", "layers", "seq", "batch", "steps")}
    ts = load_safetensors(args.init)
    corpus = ts.pop("corpus").long()
    p = {k: v.float().requires_grad_(True) for k, v in ts.items()}
    opt = torch.optim.AdamW([p[k] for k in sorted(p)], lr=float(meta["lr"]), weight_decay=float(meta["weight_decay"]))
    losses = []
    for step in range(c["steps"]):
        inp, tg = batch(corpus, c, step)
        opt.zero_grad()
        loss = F.cross_entropy(logits(p, c, inp).reshape(-1, c["vocab"]), tg.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 20 == 0 or step == c["steps"] - 1:
            print("step %4d  loss %.4f" % (step, losses[-1]))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        np.save(os.path.join(args.out, "losses.npy"), np.array(losses, dtype=np.float64))


if __name__ == "__main__":
    main()
