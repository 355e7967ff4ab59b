#!/usr/bin/env python3
"""The PyTorch side of examples/llm: the same LLaMA-style decoder loading the
same safetensors file, gpt-fast style (an nn.Module whose weights and static
KV cache are buffers, the cache written in place, attention by
F.scaled_dot_product_attention over the repeated key heads, the decode step
compiled whole with torch.compile(mode="reduce-overhead") where this
PyTorch has it, and eager), printing tokens/s and writing the logits for
parity.

    go run ./examples/llm -config tiny -tokens 1     # writes the weights file
    python3 bench/pytorch/llm.py --weights /tmp/gocompile-llm-tiny-float32.safetensors \\
        --config tiny --prompt "The quick brown fox" --steps 32 --out /tmp/llm-parity

--out writes logits.npy (float32 [steps + 1, vocab]: the prefill's last
position, then each greedy decode step's) and tokens.npy (the greedy tokens).
--follow feeds the tokens of an earlier run instead, so a float32 run on
bfloat16 weights gives the reference that bfloat16 runs are measured by.
"""

import argparse
import json
import math
import os
import struct
import time

import numpy as np
import torch

CONFIGS = {
    "tiny": dict(dim=64, layers=2, heads=4, kv_heads=2, ffn=172, vocab=256, max_seq=128, eps=1e-5, rope_base=10000.0),
    "1b": dict(dim=2048, layers=22, heads=32, kv_heads=4, ffn=5632, vocab=32000, max_seq=2048, eps=1e-5, rope_base=10000.0),
}

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def load_safetensors(path):
    """The tensors of a safetensors file (BF16 widened to float32)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = data[lo:hi]
        if info["dtype"] == "BF16":
            a = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            a = a.view(np.float32)
        else:
            a = np.frombuffer(raw, dtype=ST_DTYPES[info["dtype"]])
        out[name] = torch.from_numpy(a.reshape(info["shape"]).copy())
    return out


class KVCache(torch.nn.Module):
    """gpt-fast's static cache: registered buffers, written in place, so
    torch.compile's CUDA graphs (reduce-overhead) take the writes."""

    def __init__(self, heads, max_seq, hd, device, dtype):
        super().__init__()
        self.register_buffer("k", torch.zeros(1, heads, max_seq, hd, device=device, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(1, heads, max_seq, hd, device=device, dtype=dtype), persistent=False)

    def update(self, pos, k, v):
        self.k[:, :, pos] = k
        self.v[:, :, pos] = v
        return self.k, self.v


# F.scaled_dot_product_attention, which gpt-fast calls (PyTorch 2.0 on).
SDPA = getattr(torch.nn.functional, "scaled_dot_product_attention", None)


def attention(q, k, v, mask, rep):
    """Attention of q against the whole cache under mask as gpt-fast
    computes it: the key heads repeated for their query heads, then
    F.scaled_dot_product_attention; before PyTorch 2.0, in float32 ops."""
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if SDPA is not None:
        return SDPA(q, k, v, attn_mask=mask)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)


class Decoder(torch.nn.Module):
    def __init__(self, w, c, device, dtype):
        super().__init__()
        self.c = c
        w = {k: v.to(device=device, dtype=dtype) for k, v in w.items()}
        # gpt-fast's wqkv: the query, key and value weights as one.
        for i in range(c["layers"]):
            p = "layers.%d.attention." % i
            w[p + "wqkv.weight"] = torch.cat([w.pop(p + n + ".weight") for n in ("wq", "wk", "wv")])
        # Buffers, as a module's weights are: fixed addresses for CUDA graphs.
        self.names = {}
        for k, v in w.items():
            name = k.replace(".", "_")
            self.register_buffer(name, v, persistent=False)
            self.names[k] = name
        hd = c["dim"] // c["heads"]
        self.caches = torch.nn.ModuleList(KVCache(c["kv_heads"], c["max_seq"], hd, device, dtype) for _ in range(c["layers"]))
        inv = torch.exp(torch.arange(0, hd, 2, dtype=torch.float64) / hd * -math.log(c["rope_base"]))
        ang = torch.arange(c["max_seq"], dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float().to(device), persistent=False)
        self.register_buffer("sin", ang.sin().float().to(device), persistent=False)
        self.register_buffer("key_pos", torch.arange(c["max_seq"], device=device), persistent=False)

    def w(self, name):
        return getattr(self, self.names[name])

    def rms(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.c["eps"]) * w.float()).to(x.dtype)

    def rope(self, x, pos):
        hd = x.shape[-1]
        cos, sin = self.cos[pos][:, None, :], self.sin[pos][:, None, :]
        xf = x.float()
        x1, x2 = xf[..., : hd // 2], xf[..., hd // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)

    def forward(self, tokens, pos):
        c, w = self.c, self.w
        t = tokens.shape[1]
        hd = c["dim"] // c["heads"]
        x = w("tok_embeddings.weight")[tokens]
        mask = (self.key_pos[None, :] <= pos[:, None])[None, None]  # [1, 1, t, max seq]
        for i in range(c["layers"]):
            p = "layers.%d." % i
            h = self.rms(x, w(p + "attention_norm.weight"))
            kvd = c["kv_heads"] * hd
            q, k, v = (h @ w(p + "attention.wqkv.weight").T).split([c["dim"], kvd, kvd], -1)
            q = self.rope(q.view(1, t, c["heads"], hd), pos).transpose(1, 2)
            k = self.rope(k.view(1, t, c["kv_heads"], hd), pos).transpose(1, 2)
            v = v.view(1, t, c["kv_heads"], hd).transpose(1, 2)
            kk, vv = self.caches[i].update(pos, k, v)
            y = attention(q, kk, vv, mask, c["heads"] // c["kv_heads"])
            y = y.transpose(1, 2).reshape(1, t, c["dim"])
            x = x + y @ w(p + "attention.wo.weight").T
            h = self.rms(x, w(p + "ffn_norm.weight"))
            g = h @ w(p + "feed_forward.w1.weight").T
            x = x + (torch.nn.functional.silu(g) * (h @ w(p + "feed_forward.w3.weight").T)) @ w(p + "feed_forward.w2.weight").T
        last = self.rms(x[:, -1], w("norm.weight"))
        return (last @ w("output.weight").T).float()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--prompt", default="The quick brown fox", help="text (tiny) or token numbers (1b)")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the decode step (reduce-overhead)")
    ap.add_argument("--out", help="folder for logits.npy and tokens.npy")
    ap.add_argument("--follow", help="tokens.npy to feed instead of the greedy tokens (a reference run in another dtype)")
    ap.add_argument("--time-steps", type=int, default=64, help="decode steps timed after the greedy ones")
    args = ap.parse_args()
    c = CONFIGS[args.config]
    dtype = torch.float32 if args.dtype == "float32" else torch.bfloat16
    dec = Decoder(load_safetensors(args.weights), c, args.device, dtype)
    if c["vocab"] == 256:
        prompt = list(args.prompt.encode())
    else:
        prompt = [int(t) for t in args.prompt.split()]
    step, compiled = dec.forward, False
    if args.compile and hasattr(torch, "compile"):
        # gpt-fast compiles its one-token step whole (fullgraph) with CUDA
        # graphs; the cache writes are writes of module buffers.
        step, compiled = torch.compile(dec.forward, mode="reduce-overhead", fullgraph=True), True
    follow = np.load(args.follow) if args.follow else None
    if follow is not None:
        args.steps = len(follow)
    with torch.no_grad():
        tokens = torch.tensor([prompt], device=args.device)
        logits = [dec.forward(tokens, torch.arange(len(prompt), device=args.device))]
        out = []
        start = time.perf_counter()
        for i in range(args.steps):
            tok = int(follow[i]) if follow is not None else int(logits[-1][0].argmax())
            out.append(tok)
            p = len(prompt) + i
            # A copy: a CUDA graph's replay overwrites its last outputs.
            logits.append(step(torch.tensor([[tok]], device=args.device), torch.tensor([p], device=args.device)).clone())
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        secs = time.perf_counter() - start
        # The steady decode rate, after the greedy steps above have warmed
        # the step up (compiled it, captured its CUDA graph): --time-steps
        # more steps at the next position, one synchronize at the end.
        tok = torch.tensor([[out[-1] if out else 0]], device=args.device)
        p = torch.tensor([len(prompt) + args.steps], device=args.device)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.time_steps):
            step(tok, p)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        steady = (time.perf_counter() - t0) / max(args.time_steps, 1)
        # The prompt's pass (eager, as gocompile's bench -llm times its
        # eager prefill): the median of five after one warm-up.
        ptimes = []
        for i in range(6):
            dec.forward(tokens, torch.arange(len(prompt), device=args.device))
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            if i > 0:
                ptimes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
        pre = sorted(ptimes)[len(ptimes) // 2]
    print("torch %s, %s config, %s, %s, compiled %s: %d decode steps, %.1f tokens/s; steady %.1f µs a step, %.1f tokens/s; "
          "prefill of %d tokens %.1f µs, %.0f tokens/s" % (
        torch.__version__, args.config, args.device, args.dtype, compiled, args.steps, args.steps / secs,
        steady * 1e6, 1 / steady, len(prompt), pre * 1e6, len(prompt) / pre))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        np.save(os.path.join(args.out, "logits.npy"), torch.cat(logits).cpu().numpy().astype(np.float32))
        np.save(os.path.join(args.out, "tokens.npy"), np.array(out, dtype=np.int64))


if __name__ == "__main__":
    main()
