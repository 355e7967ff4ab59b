"""PyTorch side of `bench -mlp`: 4 x (Linear(1024, 1024) + GELU), float32,
per call at batch 1 and 32 (many calls, then one synchronize), eager and
torch.compile in its default and reduce-overhead modes.

    python3 bench/pytorch/mlp.py
"""
import time

import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    def __init__(self, d=1024, layers=4):
        super().__init__()
        self.ls = torch.nn.ModuleList([torch.nn.Linear(d, d) for _ in range(layers)])

    def forward(self, x):
        for layer in self.ls:
            x = F.gelu(layer(x))
        return x


def per_call_us(f, x, n=2000):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        f(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    m = MLP().cuda().eval()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: µs per call (many calls, one sync; median of 5)")
    print(f"{'batch':6s} {'eager':>10s} {'default':>10s} {'reduce-overhead':>16s}")
    with torch.no_grad():
        for batch in (1, 32):
            x = torch.randn(batch, 1024, device="cuda")
            fs = [m, torch.compile(m, mode="default"), torch.compile(m, mode="reduce-overhead")]
            for f in fs[1:]:
                for _ in range(5):
                    f(x)
                torch.testing.assert_close(f(x).clone(), m(x), rtol=1e-3, atol=1e-3)
            med = [sorted(per_call_us(f, x) for _ in range(5))[2] for f in fs]
            print(f"{batch:<6d} {med[0]:10.1f} {med[1]:10.1f} {med[2]:16.1f}")


if __name__ == "__main__":
    main()
