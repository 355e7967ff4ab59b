"""PyTorch counterparts of inductor/program's row benchmarks
(BenchmarkGPUEager* and BenchmarkGPURowLong in rows_bench_gpu_test.go):
eager and torch.compile, queued calls and one synchronise, GB/s counting one
read and one write (plus the norms' weights), as the Go benchmarks count.

    python3 bench/pytorch/rows.py [--no-compile]
"""
import sys, time
import torch
import torch.nn.functional as F

dev = "cuda"

def bench(f, nbytes, min_time=0.5):
    f(); torch.cuda.synchronize()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if dt >= min_time:
            break
        n = max(n * 2, int(n * min_time / max(dt, 1e-6) * 1.2))
    per = dt / n
    return per * 1e9, nbytes / per / 1e9

def report(name, f, nbytes):
    ns, gbs = bench(f, nbytes)
    print(f"{name:45s} {ns:12.1f} ns/op {gbs:9.1f} GB/s", flush=True)

x = torch.empty(1 << 26, device=dev); y = torch.empty_like(x)
report("copy 256MB", lambda: y.copy_(x), 2 * x.numel() * 4)

compile_too = "--no-compile" not in sys.argv
for rows, R in [(8192, 4096), (32, 1024)]:
    x = torch.randn(rows, R, device=dev)
    w = torch.randn(R, device=dev); b = torch.randn(R, device=dev)
    ops = {
        "softmax": (lambda x: torch.softmax(x, -1), 8 * rows * R),
        "layer_norm": (lambda x: F.layer_norm(x, (R,), w, b, 1e-5), 8 * rows * R + 8 * R),
        "rms_norm": (lambda x: F.rms_norm(x, (R,), w, 1e-6), 8 * rows * R + 4 * R),
    }
    for name, (f, nb) in ops.items():
        report(f"eager {name} {rows}x{R}", lambda: f(x), nb)

dts = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
long_cases = [(256, 50257, "float32"), (32, 50257, "float32"), (256, 50257, "bfloat16"),
              (64, 200000, "float32"), (4096, 4097, "float32"), (1 << 20, 7, "float32"),
              (1 << 16, 100, "float32"), (8192, 4096, "float16")]
for rows, R, dt in long_cases:
    x = torch.randn(rows, R, device=dev, dtype=dts[dt])
    report(f"eager softmax {rows}x{R} {dt}", lambda: torch.softmax(x, -1), 2 * x.element_size() * rows * R)
if compile_too:
    for rows, R, dt in long_cases:
        x = torch.randn(rows, R, device=dev, dtype=dts[dt])
        cf = torch.compile(lambda x: torch.softmax(x, -1), dynamic=False)
        report(f"compiled softmax {rows}x{R} {dt}", lambda: cf(x), 2 * x.element_size() * rows * R)
