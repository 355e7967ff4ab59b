"""PyTorch side of examples/train: the same GPT-style model, initial
weights, corpus and batches (read from the init.safetensors the Go example
writes), trained with torch.optim.AdamW in float32; prints every step's
loss and writes them to --out as losses.npy, for the parity test.

    go run ./examples/train -out /tmp/train
    python3 bench/pytorch/train.py --init /tmp/train/init.safetensors --out examples/train/testdata/parity

With --bench N it times N steps instead (eagerly, with torch.compile of
the loss, whose backward AOTAutograd compiles, and torch.optim.AdamW's
foreach update, and with torch.compile of the whole step), as `go run ./examples/train -bench N` does, with the peak device
memory a step holds beyond its model, gradients and optimizer state.
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
    causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
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
    ap.add_argument("--bench", type=int, default=0, help="time this many steps eagerly and compiled instead")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if args.bench:
        bench(args)
        return
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


def bench(args):
    from timing import sync
    import statistics
    import time
    meta = metadata(args.init)
    c = {k: int(meta[k]) for k in ("vocab", "dim", "heads", "layers", "seq", "batch", "steps")}
    ts = load_safetensors(args.init)
    corpus = ts.pop("corpus").long()
    dev = args.device
    inp, tg = (t.to(dev) for t in batch(corpus, c, 0))

    def loss_of(p, inp, tg):
        return F.cross_entropy(logits(p, c, inp).reshape(-1, c["vocab"]), tg.reshape(-1))

    def stepper(loss_fn, whole=None):
        p = {k: v.float().to(dev).requires_grad_(True) for k, v in ts.items()}
        opt = torch.optim.AdamW([p[k] for k in sorted(p)], lr=float(meta["lr"]), weight_decay=float(meta["weight_decay"]))

        def step():
            opt.zero_grad()
            loss = loss_fn(p, inp, tg)
            loss.backward()
            opt.step()
            return loss
        return whole(step) if whole else step

    compile = getattr(torch, "compile", lambda f, **kw: f)
    # compiled: torch.compile of the loss (AOTAutograd compiles its
    # backward), the update eager (foreach); whole: torch.compile of the
    # whole step (the loss, a graph break at backward, the compiled update).
    variants = [("eager", stepper(loss_of)), ("compiled", stepper(compile(loss_of))),
                ("whole", stepper(loss_of, compile))]
    for _, f in variants:
        for _ in range(3):
            f()
    us, extra = {n: [] for n, _ in variants}, {n: 0 for n, _ in variants}
    gpu = dev.startswith("cuda")
    for _ in range(args.reps):
        for name, f in variants:
            sync(dev)
            if gpu:
                torch.cuda.reset_peak_memory_stats(dev)
                base = torch.cuda.memory_allocated(dev)
            t0 = time.perf_counter()
            for _ in range(args.bench):
                f()
            sync(dev)
            us[name].append((time.perf_counter() - t0) / args.bench * 1e6)
            if gpu:
                extra[name] = max(extra[name], torch.cuda.max_memory_allocated(dev) - base)
    print("torch %s: training step: %d layers, dim %d, vocab %d, batch %d x %d tokens, float32, on %s" % (
        torch.__version__, c["layers"], c["dim"], c["vocab"], c["batch"], c["seq"], dev))
    print("%-9s %10s %16s" % ("", "µs a step", "peak extra MB"))
    for name, _ in variants:
        print("%-9s %10.1f %16.2f" % (name, statistics.median(us[name]), extra[name] / 2**20))
    for name, _ in variants[1:]:
        print("eager/%s: %.2fx" % (name, statistics.median(us["eager"]) / statistics.median(us[name])))


if __name__ == "__main__":
    main()
