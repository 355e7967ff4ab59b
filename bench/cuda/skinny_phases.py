"""Where the small-batch GEMM's time goes: each variant of
skinny_gemm.py's kernel timed whole and with one stage left out (the
loads, the arithmetic, the reduction), each as 8 back-to-back launches
replayed from one CUDA graph, so host launch cost is not counted.

    python3 bench/cuda/skinny_phases.py [ncu]
"""
import sys

import cupy as cp

from skinny_gemm import STREAM, build, graph_time

M, N, K = 32, 1024, 1024


def main():
    rng = cp.random.default_rng(1)
    x = rng.standard_normal((M, K), dtype=cp.float32)
    w = rng.standard_normal((N, K), dtype=cp.float32)
    out = cp.empty((M, N), cp.float32)
    args = (x, cp.int32(K), w, cp.int32(K), cp.int32(M), cp.int32(N), cp.int32(K), out, cp.int32(N))
    configs = [(16, 1, 4, 8, 2), (32, 1, 4, 8, 2), (16, 1, 8, 2, 2), (32, 2, 8, 1, 2)]
    if len(sys.argv) > 1:
        for cfg in configs[:2]:
            k, grid, block, smem = build(M, N, K, *cfg)
            for _ in range(2):
                k(grid, block, args, shared_mem=smem)
        cp.cuda.Device().synchronize()
        return
    sk = cp.RawKernel(STREAM, "stream")
    sink = cp.zeros(1, cp.float32)
    empty = cp.RawKernel('extern "C" __global__ void e() {}', "e")
    print(f"empty kernel            {graph_time([lambda: empty((1,), (32,), ())] * 8) / 8:6.2f} us/launch")
    print(f"read W once (4 MB)      {graph_time([lambda: sk((528,), (256,), (w, cp.int64(w.size // 4), sink))] * 8) / 8:6.2f} us/launch")
    for cfg in configs:
        name = "mt%dc%dw%ds%dg%d" % cfg
        line = f"{name:22s}"
        for phase, extra in (("whole", ()), ("no loads", ("-DNOLOAD",)), ("no FMAs", ("-DNOCOMPUTE",)),
                             ("no reduction", ("-DNORED",)), ("reduction only", ("-DNOLOAD", "-DNOCOMPUTE"))):
            k, grid, block, smem = build(M, N, K, *cfg, extra=extra)
            t = graph_time([lambda: k(grid, block, args, shared_mem=smem)] * 8) / 8
            line += f"  {phase} {t:5.2f}"
        print(line)


if __name__ == "__main__":
    main()
