#!/usr/bin/env python3
"""PyTorch eager vs torch.compile on the workloads of gocompile's `go run ./bench`.

    python3 bench/pytorch/bench.py [--device cuda|cpu] [--json out.json] [--iters N] [--reps N] [--quick]

Same workloads, sizes, names and byte accounting as bench/main.go (inputs
read once + outputs written once; the anchor's conventions), and the same
method: warm up (torch.compile compiles on its first call, timed as
first_call_s), then queue N calls and synchronize once, taking the median of
--reps repetitions, eager and compiled in turn. The JSON uses the field names
the Go command writes, so the two files can be set side by side.

Copy bandwidth is dst.copy_(src) of 64M float32, as the Go side's dst.Copy(src).
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

from timing import copy_bandwidth, device_name, first_call, time_pair, timing_fields


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", default="", help="write the results as JSON to this file")
    p.add_argument("--iters", type=int, default=0, help="calls per timed repetition (0: ~50 ms on a GPU, ~0.2 s on the CPU)")
    p.add_argument("--reps", type=int, default=0, help="timed repetitions, the median is reported (default 5 GPU, 3 CPU)")
    p.add_argument("--quick", action="store_true", help="sizes 16x smaller, for smoke runs")
    p.add_argument("--only", default="", help="run only workloads whose name contains this")
    a = p.parse_args()
    if a.reps <= 0:
        a.reps = 5 if a.device.startswith("cuda") else 3
    return a


def suite(dev, quick):
    div = 16 if quick else 1
    N, NS = (1 << 24) // div, (1 << 26) // div
    M, D = 8192 // div, 4096
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(dev)

    def dims(*s):
        return "x".join(str(v) for v in s)

    x = randn(N)
    a, b, w = randn(M, D), randn(D), randn(D)
    xs = randn(NS)
    ab = a.bfloat16()
    s = randn(32, 1024)
    md = M * D
    # name, shape, bytes, fn, args, small
    return [
        ("pointwise_gelu_chain_16M", dims(N), 8 * N, lambda x: F.gelu(x * 1.5 + 0.5) * torch.sigmoid(x), (x,), False),
        ("bias_gelu_8192x4096", dims(M, D) + "+" + dims(D), 8 * md, lambda a, b: F.gelu(a + b), (a, b), False),
        ("softmax_8192x4096", dims(M, D), 8 * md, lambda a: torch.softmax(a, -1), (a,), False),
        ("layernorm_8192x4096", dims(M, D), 8 * md, lambda a, w, b: F.layer_norm(a, (D,), w, b, 1e-5), (a, w, b), False),
        # the decomposition the anchor times (torch's fused F.rms_norm is newer than some 2.x)
        ("rmsnorm_8192x4096", dims(M, D), 8 * md,
         lambda a, w: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w, (a, w), False),
        ("sum_rows_8192x4096", dims(M, D), 4 * md, lambda a: a.sum(-1), (a,), False),
        ("sum_all_64M", dims(NS), 4 * NS, lambda x: x.sum(), (xs,), False),
        ("softmax_bf16_8192x4096", dims(M, D) + " bf16", 4 * md,
         lambda a: torch.softmax(a.float(), -1).bfloat16(), (ab,), False),
        ("softmax_small_32x1024", dims(32, 1024), 8 * 32 * 1024, lambda a: torch.softmax(a, -1), (s,), True),
    ]


def main():
    args = parse()
    dev = args.device
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {
        "suite": "gocompile-bench", "library": "pytorch", "version": torch.__version__,
        "torch": torch.__version__, "python": sys.version.split()[0],
        "device": device_name(dev), "device_kind": dev, "backend": "torch.compile(mode=default)",
        "quick": args.quick, "reps": args.reps, "threads": torch.get_num_threads(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": [],
    }
    print(f"device: {res['device']} ({dev}), torch {torch.__version__}, eager vs torch.compile"
          + (", --quick (sizes /16)" if args.quick else ""), flush=True)

    with torch.no_grad():
        res.update(copy_bandwidth(args, args.quick))
        print(f"copy bandwidth: {res['copy_GBs']:.1f} GB/s ({res['copy_method']}, {res['copy_bytes'] >> 20} MB read + written, "
              f"{res['copy_us']:.1f} µs)", flush=True)

        for name, shape, nbytes, fn, fargs, small in suite(dev, args.quick):
            if args.only and args.only not in name:
                continue
            torch._dynamo.reset()
            cf = torch.compile(fn)
            cout, first = first_call(dev, lambda: cf(*fargs))
            eout = fn(*fargs)
            diff = (eout.float() - cout.float()).abs().max().item()
            n, (e, c), (ereps, creps) = time_pair(args, lambda: fn(*fargs), lambda: cf(*fargs))
            r = {
                "name": name, "shape": shape, **timing_fields(nbytes, n, e, c, res["copy_GBs"]),
                "speedup": e / c, "first_call_s": first, "max_abs_diff": diff,
                "eager_reps_us": ereps, "compiled_reps_us": creps,
            }
            if small:
                r["wall_per_call"] = True
            res["rows"].append(r)
            print(f"  {name}: eager {r['eager_us']:.1f} µs, compiled {r['compiled_us']:.1f} µs", flush=True)

    head = "%-34s %-15s %11s %10s %11s %10s %8s %8s %9s %9s"
    print(head % ("workload", "shape", "eager µs", "eager GB/s", "compiled µs", "comp GB/s", "% copy", "speedup",
                  "1st call", "max|diff|"))
    print("-" * 134)
    for r in res["rows"]:
        name = r["name"] + (" (µs/call)" if r.get("wall_per_call") else "")
        print(f"{name:<34s} {r['shape']:<15s} {r['eager_us']:11.1f} {r['eager_GBs']:10.1f} {r['compiled_us']:11.1f} "
              f"{r['compiled_GBs']:10.1f} {r['compiled_pct_of_copy']:7.1f}% {r['speedup']:7.2f}x {r['first_call_s']:8.3f}s "
              f"{r['max_abs_diff']:9.2g}")
    print(f"{'copy_bandwidth':<34s} {str(res['copy_bytes'] // 8 >> 20) + 'M f32':<15s} {'':>11s} {'':>10s} "
          f"{res['copy_us']:11.1f} {res['copy_GBs']:10.1f} {100.0:7.1f}%")
    print(f"copy: {res['copy_method']}; GB/s counts inputs read once + outputs written once; "
          "% copy is compiled GB/s over the copy's")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
