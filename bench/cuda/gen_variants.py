"""Times the generated tensor-core GEMM (gen_x2w4s8.cu: the bias+GELU
Linear epilogue, launch shape x2w4s8, as inductor writes it) against
edited copies, to find what costs time, next to tc_gemm.py's kernel:

    python3 bench/cuda/gen_variants.py
"""
import cupy as cp

from skinny_gemm import graph_time
from tc_gemm import build

M, N, K = 32, 1024, 1024
NAME = "gc_gemm_bias_gelu_float32_f32_to_float32_x2w4s8"


def main():
    src = open("gen_x2w4s8.cu").read()
    variants = {"generated": src, "no bias": src.replace("(float)(x1[(long long)m * x1m + (long long)n * x1n])", "0.f"),
                "no griddepcontrol": src.replace('asm volatile("griddepcontrol.wait;" ::: "memory");', "").replace(
                    'asm volatile("griddepcontrol.launch_dependents;");', "")}
    bar = 'asm volatile("barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");'
    assert src.count(bar) == 2, src.count(bar)
    first, rest = src.split(bar, 1)
    relaxed_end = first + bar + rest.replace(bar, 'asm volatile("barrier.cluster.arrive.relaxed.aligned;\\n\\tbarrier.cluster.wait.aligned;" ::: "memory");')
    variants["last barrier relaxed"] = relaxed_end
    f2, r2 = relaxed_end.split(bar, 1)
    variants["both: fence.acq_rel.cluster + relaxed"] = f2 + 'asm volatile("fence.acq_rel.cluster;\\n\\tbarrier.cluster.arrive.relaxed.aligned;\\n\\tbarrier.cluster.wait.aligned;" ::: "memory");' + r2
    variants["no exact redo"] = src.replace("gc_tc_exact(v, A, lda, B, ldb, K, m, n)", "v")
    rng = cp.random.default_rng(3)
    x = rng.standard_normal((M, K), dtype=cp.float32)
    Ws = [(rng.standard_normal((N, K), dtype=cp.float32) / 32).astype(cp.float32) for _ in range(4)]
    bias = rng.standard_normal(N, dtype=cp.float32)
    dummy = cp.zeros(4, cp.float32)
    ll, i32 = cp.int64, cp.int32
    for name, code in variants.items():
        try:
            k = cp.RawModule(code=code, options=("-std=c++17", "-arch=sm_90")).get_function(NAME)
        except Exception as e:  # noqa: BLE001
            print(name, "compile failed", str(e)[:300])
            continue
        acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]

        def launch(i, k=k, acts=acts):
            k((N // 16, 1, 8), (128,), (acts[i], ll(K), Ws[i], ll(K), i32(M), i32(N), i32(K), i32(1), acts[i + 1], ll(N),
                                        dummy, dummy, bias, ll(0), ll(1)))
        single = graph_time([lambda: launch(0)] * 8) / 8
        chain = graph_time([lambda i=i: launch(i) for i in range(4)])
        print(f"{name:22s} {single:6.2f} us/launch   4 layers {chain:6.2f} us")
    proto = open("proto_tc.cu").read()
    prelude = src[:src.index("// epilogue:")] if "// epilogue:" in src else ""
    for label, code in (("proto kernel", proto), ("proto after prelude", prelude + proto)):
        k = cp.RawModule(code=code, options=("-std=c++17", "-arch=sm_90", "-DNT=2", "-DW=4", "-DS=8", "-DPASSES=3", "-DCLUSTER")).get_function("tcgemm")
        acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]
        ls = [(lambda i=i, k=k, acts=acts: k((64, 1, 8), (128,), (acts[i], i32(K), Ws[i], i32(K), i32(M), i32(N), i32(K), acts[i + 1], i32(N)),
                                              shared_mem=4 * 5 * 512)) for i in range(4)]
        print(f"{label:22s} {graph_time([ls[0]] * 8) / 8:6.2f} us/launch   4 layers {graph_time(ls):6.2f} us")
    k, grid, block, smem = build(M, N, K, 2, 4, 8)
    acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]
    launches = [(lambda i=i: k(grid, block, (acts[i], i32(K), Ws[i], i32(K), i32(M), i32(N), i32(K), acts[i + 1], i32(N)),
                               shared_mem=smem)) for i in range(4)]
    print(f"{'tc_gemm.py n2w4s8x3':22s} {graph_time([launches[0]] * 8) / 8:6.2f} us/launch   4 layers {graph_time(launches):6.2f} us")


if __name__ == "__main__":
    main()
