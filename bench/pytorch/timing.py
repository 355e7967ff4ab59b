"""Timing helpers shared by bench/pytorch/bench.py and bench/pytorch/sweep.py.

The method is the Go side's (bench/main.go): warm up, queue N calls and
synchronize once, take the median of --reps repetitions, eager and compiled
in turn. The scripts run as `python3 bench/pytorch/x.py`, which puts this
directory on sys.path, so they import this module as `timing`.
"""
import platform
import statistics
import time

import torch


def sync(dev):
    if dev.startswith("cuda"):
        torch.cuda.synchronize(dev)


def time_calls(dev, n, f):
    """Wall time per call of n queued calls, one synchronize at the end."""
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    sync(dev)
    return (time.perf_counter() - t0) / n


def choose_iters(args, f):
    if args.iters > 0:
        return args.iters
    gpu = args.device.startswith("cuda")
    target, max_n = (0.05, 20000) if gpu else (0.2, 2000)
    per = time_calls(args.device, 1, f)
    if per < target / 100:
        per = time_calls(args.device, 20, f)
    return int(min(max(target / max(per, 1e-9), 1), max_n))


def measure(args, n, *fs):
    """Median seconds per call of each f, the fs taking turns per repetition."""
    reps = [[] for _ in fs]
    for _ in range(args.reps):
        for j, f in enumerate(fs):
            reps[j].append(time_calls(args.device, n, f))
    return [statistics.median_low(r) for r in reps], [[t * 1e6 for t in r] for r in reps]


def first_call(dev, f):
    """f's result and the seconds its first call took (torch.compile compiles there)."""
    sync(dev)
    t0 = time.perf_counter()
    out = f()
    sync(dev)
    return out, time.perf_counter() - t0


def time_pair(args, eager, comp):
    """Calls each once more, then times both as measure does with N calls
    (--iters, or enough for the slower of the two); returns
    n, (eager s, compiled s), (eager reps µs, compiled reps µs)."""
    eager(); comp()
    n = choose_iters(args, eager)
    if args.iters == 0:
        n = max(n, choose_iters(args, comp))
    ts, reps = measure(args, n, eager, comp)
    return n, ts, reps


def timing_fields(nbytes, n, e, c, copy_gbs):
    """The row fields from bytes to compiled_pct_of_copy, in the Go side's order."""
    return {
        "bytes": nbytes, "iters": n,
        "eager_ms": e * 1e3, "compiled_ms": c * 1e3, "eager_us": e * 1e6, "compiled_us": c * 1e6,
        "eager_GBs": nbytes / e / 1e9, "compiled_GBs": nbytes / c / 1e9,
        "compiled_pct_of_copy": 100 * nbytes / c / 1e9 / copy_gbs,
    }


def copy_bandwidth(args, quick):
    """dst.copy_(src) of 64M float32 (4M if quick): the copy_* result fields."""
    n = (1 << 26) // (16 if quick else 1)
    src = torch.randn(n, device=args.device)
    dst = torch.empty_like(src)
    f = lambda: dst.copy_(src)
    f(); f()
    (d,), _ = measure(args, choose_iters(args, f), f)
    nbytes = 2 * 4 * n
    return {"copy_bytes": nbytes, "copy_us": d * 1e6, "copy_GBs": nbytes / d / 1e9,
            "copy_method": f"dst.copy_(src) float32 {n >> 20}M"}


def device_name(dev):
    if dev.startswith("cuda"):
        return torch.cuda.get_device_name(dev)
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name} ({torch.get_num_threads()} threads)"
