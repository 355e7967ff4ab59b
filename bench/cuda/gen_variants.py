"""Times a generated tensor-core GEMM, as inductor writes it for the MLP's
bias+GELU Linear, against edited copies (to find what costs time) and
next to tc_gemm.py's kernel of the same launch shape:

    GOCOMPILE_LOGS=output_code GOCOMPILE_DEBUG_DIR=/tmp/src .gpu/bench -mlp -device cuda
    python3 bench/cuda/gen_variants.py /tmp/src/gc_gemm_*_x2w4s8.cu

The file's name is the kernel's; its launch shape (xNTwWsS) gives the grid.
"""
import os
import re
import sys

import cupy as cp

from skinny_gemm import graph_time
from tc_gemm import build

M, N, K = 32, 1024, 1024


def main():
    path = sys.argv[1]
    src = open(path).read()
    name = os.path.splitext(os.path.basename(path))[0]
    nt, w, s = (int(v) for v in re.search(r"_x(\d+)w(\d+)s(\d+)$", name).groups())
    variants = {
        "generated": src,
        "no bias": src.replace("(float)(x1[(long long)m * x1m + (long long)n * x1n])", "0.f"),
        "no griddepcontrol": src.replace('asm volatile("griddepcontrol.wait;" ::: "memory");', "").replace(
            'asm volatile("griddepcontrol.launch_dependents;");', ""),
        "no exact redo": src.replace("gc_tc_exact(v, A, lda, B, ldb, K, m, n)", "v"),
    }
    rng = cp.random.default_rng(3)
    x = rng.standard_normal((M, K), dtype=cp.float32)
    Ws = [(rng.standard_normal((N, K), dtype=cp.float32) / 32).astype(cp.float32) for _ in range(4)]
    bias = rng.standard_normal(N, dtype=cp.float32)
    dummy = cp.zeros(4, cp.float32)
    ll, i32 = cp.int64, cp.int32
    for label, code in variants.items():
        try:
            k = cp.RawModule(code=code, options=("-std=c++17", "-arch=sm_90")).get_function(name)
        except Exception as e:  # noqa: BLE001
            print(label, "compile failed", str(e)[:300])
            continue
        acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]

        def launch(i, k=k, acts=acts):
            k((N // (8 * nt), (M + 31) // 32, s), (32 * w,),
              (acts[i], ll(K), Ws[i], ll(K), i32(M), i32(N), i32(K), i32(1), acts[i + 1], ll(N), dummy, dummy, bias, ll(0), ll(1)))
        single = graph_time([lambda: launch(0)] * 8) / 8
        chain = graph_time([lambda i=i: launch(i) for i in range(4)])
        print(f"{label:22s} {single:6.2f} us/launch   4 layers {chain:6.2f} us")
    k, grid, block, smem = build(M, N, K, nt, w, s)
    acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]
    launches = [(lambda i=i: k(grid, block, (acts[i], i32(K), Ws[i], i32(K), i32(M), i32(N), i32(K), acts[i + 1], i32(N)),
                               shared_mem=smem)) for i in range(4)]
    label = f"tc_gemm.py n{nt}w{w}s{s}x3"
    print(f"{label:22s} {graph_time([launches[0]] * 8) / 8:6.2f} us/launch   4 layers {graph_time(launches):6.2f} us")


if __name__ == "__main__":
    main()
