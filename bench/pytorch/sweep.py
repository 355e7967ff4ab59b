#!/usr/bin/env python3
"""PyTorch eager vs torch.compile on the cases of gocompile's `go run ./bench -sweep`.

    python3 bench/pytorch/sweep.py CASES.json [--device cuda|cpu] [--json out.json] [--iters N] [--reps N]
                                   [--only SUBSTRING] [--compile-only] [--shard i/n]

CASES.json is `go run ./bench -sweep -cases-json CASES.json -list` (the case
list alone) or the -json file of a Go sweep run (which holds its cases):
each case is a program of steps over its inputs, which this script writes
as a Python function (printed with --print) and runs eagerly and through
torch.compile (default mode). Inputs have the case's shapes, dtypes and
permutations (an input with "perm" is a contiguous tensor of its "storage"
shape viewed through permute(perm)); their values are torch.randn, not the
Go side's (only the timings and the layouts are compared).

Method as bench/pytorch/bench.py (and the Go side): the compiled function's
first call is timed (first_call_s), eager and compiled are called once more,
then N calls are queued and synchronized once, the median of --reps
repetitions reported, eager and compiled in turn; N is --iters or enough for
about 50 ms on a GPU (0.2 s on the CPU). GB/s counts the inputs read once and
the output written once; % of copy is over dst.copy_(src) of 64M float32 (4M
with a --quick case list) in the same run. The JSON has the Go side's field
names; bench/pytorch/compare_sweep.py joins the two.

torch.compile takes seconds per case, so the compile can run first, in
parallel processes over disjoint shards, filling inductor's on-disk caches
(the FX graph cache and Triton's), which the timing pass then reuses:

    for i in 0 1 2 3 4 5 6 7; do
      TORCHINDUCTOR_COMPILE_THREADS=2 python3 bench/pytorch/sweep.py cases.json --compile-only --shard $i/8 &
    done; wait
    python3 bench/pytorch/sweep.py cases.json --json torch_sweep.json

(each stage fits a 10-minute command for 120 cases on an H200; split the
timing pass with --shard and join the JSON files with compare_sweep.py's
--merge if it does not.)
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from timing import copy_bandwidth, device_name, first_call, sync, time_pair, timing_fields

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", help="the case list (Go's -cases-json, or a Go sweep -json)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", default="", help="write the results as JSON to this file")
    p.add_argument("--iters", type=int, default=0, help="calls per timed repetition (0: ~50 ms on a GPU, ~0.2 s on the CPU)")
    p.add_argument("--reps", type=int, default=0, help="timed repetitions, the median is reported (default 5 GPU, 3 CPU)")
    p.add_argument("--only", default="", help="run only cases whose id or category contains this")
    p.add_argument("--shard", default="0/1", help="i/n: run only cases i, i+n, i+2n, …")
    p.add_argument("--compile-only", action="store_true", help="compile each case once (warming inductor's caches), time nothing")
    p.add_argument("--print", action="store_true", help="print each case's Python function")
    a = p.parse_args()
    if a.reps <= 0:
        a.reps = 5 if a.device.startswith("cuda") else 3
    i, n = (int(v) for v in a.shard.split("/"))
    if not (0 <= i < n):
        p.error(f"--shard {a.shard}: want i/n with 0 <= i < n")
    a.shard_i, a.shard_n = i, n
    return a


def dims(s):
    return "x".join(str(v) for v in s) if s else "scalar"


def tup(xs):
    return "(" + ", ".join(str(x) for x in xs) + ("," if len(xs) == 1 else "") + ")"


# Each step op as a Python expression of its arguments a, dims d, scalar x
# and dim k (the names bench/sweep_cases.go's SweepStep writes).
SOURCE = {
    "permute": lambda a, d, x, k: f"{a[0]}.permute{tup(d)}",
    "t": lambda a, d, x, k: f"{a[0]}.transpose(-2, -1)",
    "add": lambda a, d, x, k: f"{a[0]} + {a[1]}",
    "sub": lambda a, d, x, k: f"{a[0]} - {a[1]}",
    "mul": lambda a, d, x, k: f"{a[0]} * {a[1]}",
    "maximum": lambda a, d, x, k: f"torch.maximum({a[0]}, {a[1]})",
    **{op: (lambda op: lambda a, d, x, k: f"torch.{op}({a[0]})")(op) for op in ("relu", "sigmoid", "tanh", "neg", "abs")},
    **{op: (lambda op: lambda a, d, x, k: f"F.{op}({a[0]})")(op) for op in ("gelu", "silu")},
    "mul_scalar": lambda a, d, x, k: f"{a[0]} * {x!r}",
    "add_scalar": lambda a, d, x, k: f"{a[0]} + {x!r}",
    "sum": lambda a, d, x, k: f"torch.sum({a[0]}, dim={tup(d)})",
    "mean": lambda a, d, x, k: f"torch.mean({a[0]}, dim={tup(d)})",
    "max": lambda a, d, x, k: f"torch.amax({a[0]}, dim={tup(d)})",
    "var": lambda a, d, x, k: f"torch.var({a[0]}, dim={tup(d)}, correction={x!r})",
    "argmax": lambda a, d, x, k: f"torch.argmax({a[0]}, dim={k})",
    "softmax": lambda a, d, x, k: f"torch.softmax({a[0]}, {k})",
    "log_softmax": lambda a, d, x, k: f"torch.log_softmax({a[0]}, {k})",
    "layer_norm": lambda a, d, x, k: f"F.layer_norm({a[0]}, {tup(d)}, {a[1]}, {a[2]}, {x!r})",
    # F.rms_norm is newer than some torch 2.x: rms_norm below stands in for it
    "rms_norm": lambda a, d, x, k: f"{'F.rms_norm' if hasattr(F, 'rms_norm') else 'rms_norm'}({a[0]}, {tup(d)}, {a[1]}, {x!r})",
}


def source(case):
    """The case's program as Python source: def f(a, b, …) with one line per step."""
    names = [inp["name"] for inp in case["inputs"]]
    lines = [f"def f({', '.join(names)}):"]
    for i, s in enumerate(case["steps"]):
        a = [names[j] for j in s["args"]]
        op = s["op"]
        if op not in SOURCE:
            raise ValueError(f"case {case['id']}: unknown op {op!r}")
        e = SOURCE[op](a, s.get("dims"), s.get("scalar"), s.get("dim"))
        name = f"v{i}"
        lines.append(f"    {name} = {e}")
        names.append(name)
    lines.append(f"    return {names[-1]}")
    return "\n".join(lines) + "\n"


def rms_norm(x, shape, w, eps):
    """F.rms_norm for torch versions before it (2.4)."""
    d = tuple(range(-len(shape), 0))
    y = x * torch.rsqrt(x.float().pow(2).mean(d, keepdim=True) + eps).to(x.dtype)
    return y * w if w is not None else y


def build(case):
    ns = {"torch": torch, "F": F, "rms_norm": rms_norm}
    src = source(case)
    code = compile(src, f"<sweep {case['id']}>", "exec")
    exec(code, ns)
    return ns["f"], src


def inputs(case, dev, gen):
    xs = []
    for inp in case["inputs"]:
        t = torch.randn(inp["storage"], device=dev, generator=gen).to(DTYPES[inp["dtype"]])
        if inp.get("perm"):
            t = t.permute(*inp["perm"])
        assert list(t.shape) == inp["shape"], (case["id"], inp)
        xs.append(t)
    return xs


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else 0.0


def category_stats(rows, order):
    """As the Go side's sweepCategoryStats: % of copy over non-latency cases, geomean speedup over all."""
    def stat(name, keep):
        rs = [r for r in rows if keep(r)]
        pct = [r["compiled_pct_of_copy"] for r in rs if not r["latency"]]
        epct = [r["eager_pct_of_copy"] for r in rs if not r["latency"]]
        sp = [r["speedup"] for r in rs if r["speedup"] > 0]
        return {"category": name, "cases": len(rs), "latency_cases": sum(r["latency"] for r in rs),
                "median_pct_of_copy": statistics.median(pct) if pct else 0.0, "min_pct_of_copy": min(pct) if pct else 0.0,
                "median_eager_pct_of_copy": statistics.median(epct) if epct else 0.0,
                "geomean_speedup": geomean(sp), "mismatches": 0}
    out = [stat(c, lambda r, c=c: r["category"] == c) for c in order]
    return [s for s in out if s["cases"]] + [stat("all", lambda r: True)]


def main():
    args = parse()
    dev = args.device
    doc = json.load(open(args.cases))
    cases = doc["cases"]
    order = list(dict.fromkeys(c["category"] for c in cases))
    if args.only:
        cases = [c for c in cases if args.only in c["id"] or args.only in c["category"]]
    cases = cases[args.shard_i::args.shard_n]
    quick = doc.get("quick", False)
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device=dev).manual_seed(doc.get("seed", 0))

    if args.compile_only:
        t0 = time.perf_counter()
        with torch.no_grad():
            for c in cases:
                fn, src = build(c)
                if args.print:
                    print(src)
                xs = inputs(c, dev, gen)
                torch._dynamo.reset()
                t1 = time.perf_counter()
                try:
                    torch.compile(fn)(*xs)
                    sync(dev)
                    print(f"  compiled {c['id']} in {time.perf_counter() - t1:.1f} s", flush=True)
                except Exception as e:  # reported; the timing pass reports it again
                    print(f"  {c['id']}: {type(e).__name__}: {e}", flush=True)
                del xs
        print(f"shard {args.shard}: {len(cases)} cases compiled in {time.perf_counter() - t0:.0f} s")
        return

    res = {
        "suite": "gocompile-sweep", "library": "pytorch", "version": torch.__version__,
        "torch": torch.__version__, "python": sys.version.split()[0],
        "device": device_name(dev), "device_kind": dev, "backend": "torch.compile(mode=default)",
        "quick": quick, "seed": doc.get("seed"), "reps": args.reps, "threads": torch.get_num_threads(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "shard": args.shard, "rows": [],
    }
    print(f"sweep: {len(cases)} cases of {args.cases} (seed {doc.get('seed')}); device: {res['device']} ({dev}), "
          f"torch {torch.__version__}, eager vs torch.compile", flush=True)

    with torch.no_grad():
        res.update(copy_bandwidth(args, quick))
        print(f"copy bandwidth: {res['copy_GBs']:.1f} GB/s ({res['copy_method']})", flush=True)

        def write():
            if args.json:
                res["categories"] = category_stats(res["rows"], order)
                with open(args.json, "w") as f:
                    json.dump(res, f, indent=1)
                    f.write("\n")

        for k, c in enumerate(cases):
            try:
                res["rows"].append(run_case(args, c, gen, res["copy_GBs"]))
            except Exception as e:
                print(f"  [{k + 1}/{len(cases)}] {c['id']}: {type(e).__name__}: {e}", flush=True)
                res.setdefault("errors", {})[c["id"]] = f"{type(e).__name__}: {e}"
                continue
            r = res["rows"][-1]
            print(f"  [{k + 1}/{len(cases)}] {c['id']} {c['dtype']}: eager {r['eager_us']:.1f} µs, compiled "
                  f"{r['compiled_us']:.1f} µs ({r['compiled_pct_of_copy']:.0f}% of copy), first call "
                  f"{r['first_call_s']:.1f} s", flush=True)
            write()  # the rows so far, in case the run is cut short

    res["categories"] = category_stats(res["rows"], order)
    print_tables(res)
    if args.json:
        write()
        print(f"wrote {args.json}")


def run_case(args, c, gen, copy_gbs):
    """Times one case eagerly and compiled; its row."""
    dev = args.device
    fn, src = build(c)
    if args.print:
        print(src)
    torch._dynamo.reset()
    if dev.startswith("cuda"):
        torch.cuda.empty_cache()
    xs = inputs(c, dev, gen)
    cf = torch.compile(fn)
    cout, first = first_call(dev, lambda: cf(*xs))
    eout = fn(*xs)
    diff = (eout.double() - cout.double()).abs().max().item() if eout.is_floating_point() else \
        float((eout != cout).sum().item())
    nbytes = sum(x.numel() * x.element_size() for x in xs) + cout.numel() * cout.element_size()
    del cout, eout
    n, (e, cm), (ereps, creps) = time_pair(args, lambda: fn(*xs), lambda: cf(*xs))
    shapes = ",".join(dims(i["shape"]) + (f"(perm{i['perm']})".replace(",", "") if i.get("perm") else "")
                      for i in c["inputs"])
    r = {
        "id": c["id"], "category": c["category"], "dtype": c["dtype"], "latency": c["latency"],
        "shape": shapes, "desc": c["desc"], "source": src, **timing_fields(nbytes, n, e, cm, copy_gbs),
        "eager_pct_of_copy": 100 * nbytes / e / 1e9 / copy_gbs,
        "speedup": e / cm, "first_call_s": first, "max_abs_diff": diff,
        "eager_reps_us": ereps, "compiled_reps_us": creps,
    }
    del xs
    return r


def print_tables(res):
    head = "%-11s %-8s %-44s %10s %10s %9s %7s %7s %9s"
    print()
    print(head % ("case", "dtype", "shapes", "eager µs", "comp µs", "comp GB/s", "% copy", "speedup", "1st call"))
    print("-" * 124)
    for r in res["rows"]:
        sh = r["shape"] if len(r["shape"]) <= 44 else r["shape"][:41] + "..."
        print(f"{r['id']:<11s} {r['dtype']:<8s} {sh:<44s} {r['eager_us']:10.1f} {r['compiled_us']:10.1f} "
              f"{r['compiled_GBs']:9.1f} {r['compiled_pct_of_copy']:6.1f}% {r['speedup']:6.2f}x {r['first_call_s']:8.2f}s"
              + ("  latency" if r["latency"] else ""))
    print(f"copy: {res['copy_GBs']:.1f} GB/s ({res['copy_method']})")
    print("\n%-20s %6s %8s %14s %12s %14s %16s" % ("category", "cases", "latency", "median % copy", "min % copy",
                                                   "eager median %", "geomean speedup"))
    for s in res["categories"]:
        nl = s["cases"] - s["latency_cases"]
        pct = lambda v: f"{v:.1f}%" if nl else "-"
        print(f"{s['category']:<20s} {s['cases']:6d} {s['latency_cases']:8d} {pct(s['median_pct_of_copy']):>14s} "
              f"{pct(s['min_pct_of_copy']):>12s} {pct(s['median_eager_pct_of_copy']):>14s} {s['geomean_speedup']:15.2f}x")


if __name__ == "__main__":
    main()
