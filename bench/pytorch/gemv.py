"""PyTorch side of `bench -gemv`: x @ w.T for 1 to 16 rows of x against
2048x2048 and 4096x4096 weights, float32 and bfloat16. A call runs the
product against each of enough weight copies (256 MB) that every product
streams its weight from memory; µs per product is the call's time over the
copies, eager (cuBLAS), torch.compile and torch.compile(mode=
"reduce-overhead"), with the best compiled product's share of the copy
bandwidth measured in the same run. The weights are closed over, as a
model's parameters are, so CUDA graphs read them in place.

    python3 bench/pytorch/gemv.py [--device cuda] [--reps 5]
"""
import argparse
import statistics

import torch

from timing import time_calls

ROWS = (1, 2, 4, 8, 16)
WIDTHS = (2048, 4096)
STREAM_BYTES = 256 << 20


def median_us(dev, n, reps, f):
    return statistics.median(time_calls(dev, n, f) for _ in range(reps)) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=0, help="calls per repetition (0: 2000 products' worth)")
    args = ap.parse_args()
    dev = args.device
    n = 1 << 26
    src, dst = torch.randn(n, device=dev), torch.empty(n, device=dev)
    for _ in range(3):
        dst.copy_(src)
    copy_us = median_us(dev, 50, args.reps, lambda: dst.copy_(src))
    copy_gbs = 2 * 4 * n / (copy_us * 1e3)
    del src, dst
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if dev.startswith('cuda') else 'cpu'}; "
          f"copy bandwidth {copy_gbs:.1f} GB/s")
    print(f"{'dtype':9s} {'rows':>5s} {'weight':>11s} {'copies':>7s} {'eager':>9s} {'compiled':>9s} "
          f"{'reduce-overhead':>15s} {'GB/s':>9s} {'% of copy':>10s}")
    with torch.no_grad():
        for dt in (torch.float32, torch.bfloat16):
            for width in WIDTHS:
                wbytes = width * width * dt.itemsize
                copies = max(1, STREAM_BYTES // wbytes)
                ws = [(torch.randn(width, width, device=dev) * 0.02).to(dt) for _ in range(copies)]

                def products(x):
                    return [x @ w.T for w in ws]

                for rows in ROWS:
                    torch._dynamo.reset()
                    x = torch.randn(rows, width, device=dev).to(dt)
                    fs = [products, torch.compile(products, dynamic=False),
                          torch.compile(products, dynamic=False, mode="reduce-overhead")]
                    calls = [lambda f=f: f(x)[-1] for f in fs]
                    for _ in range(3):
                        for c in calls:
                            c()
                    n = args.iters or max(4, 2000 // copies)
                    eu, cu, gu = (median_us(dev, n, args.reps, c) / copies for c in calls)
                    gbs = (wbytes + 2 * rows * width * dt.itemsize) / (min(cu, gu) * 1e3)
                    print(f"{str(dt).removeprefix('torch.'):9s} {rows:5d} {width:6d}×{width:<4d} {copies:7d} {eu:9.2f} "
                          f"{cu:9.2f} {gu:15.2f} {gbs:9.1f} {100 * gbs / copy_gbs:9.1f}%")
                del ws


if __name__ == "__main__":
    main()
