"""PyTorch side of `bench -train`: the 4-layer 1024-wide MLP (Linear + GELU,
float32) at batch 64, a mean squared error loss, backward and an AdamW
update per step, eagerly and with torch.compile of the model (AOTAutograd
compiles its forward and backward); µs per step, many steps, one sync.

    python3 bench/pytorch/train_bench.py [--device cuda]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

from mlp import MLP
from timing import time_calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    dev = args.device
    x, y = torch.randn(64, 1024, device=dev), torch.randn(64, 1024, device=dev)

    def stepper(model):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    compile = getattr(torch, "compile", lambda m, **kw: m)  # PyTorch before 2.0: eager throughout
    # compiled: torch.compile of the model (AOTAutograd compiles its
    # backward), the update eager (foreach); whole: torch.compile of the
    # whole step (a graph break at backward, the update compiled);
    # reduce-overhead: the model compiled with CUDA graphs.
    variants = [("eager", stepper(MLP().to(dev))), ("compiled", stepper(compile(MLP().to(dev)))),
                ("whole", compile(stepper(MLP().to(dev))))]
    if dev.startswith("cuda"):
        variants.append(("reduce-overhead", stepper(compile(MLP().to(dev), mode="reduce-overhead"))))
    for _ in range(3):
        for _, f in variants:
            f()
    us = [statistics.median(time_calls(dev, args.iters, f) for _ in range(args.reps)) * 1e6 for _, f in variants]
    print("torch %s: training step, MLP 4 x Linear(1024, 1024) + GELU, batch 64, float32 (µs a step)" % torch.__version__)
    print(" ".join("%15s" % n for n, _ in variants))
    print(" ".join("%15.1f" % u for u in us))
    print("eager/x: " + ", ".join("%s %.2fx" % (n, us[0] / u) for (n, _), u in zip(variants[1:], us[1:])))
    if dev.startswith("cuda"):
        print("peak device memory a step holds beyond its model, gradients and optimizer state: " +
              ", ".join("%.2f MB %s" % (step_peak_mb(dev, f), n) for n, f in variants))


def step_peak_mb(dev, step):
    """The most memory five calls of step hold at once beyond what was held before them, in MiB."""
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    base = torch.cuda.memory_allocated(dev)
    for _ in range(5):
        step()
    torch.cuda.synchronize(dev)
    return (torch.cuda.max_memory_allocated(dev) - base) / 2**20


if __name__ == "__main__":
    main()
