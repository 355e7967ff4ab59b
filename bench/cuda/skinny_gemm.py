"""Design-space sweep for the small-batch float32 GEMM (out = x·Wᵀ, the
MLP's 32×1024 by 1024×1024 product), run on a GPU machine with CuPy and
PyTorch:

    python3 bench/cuda/skinny_gemm.py [M N K]

It compiles variants of a "lane owns columns" kernel through NVRTC: each
warp loads its own k-slice of A (all rows) and of W (its block's columns)
into shared memory with cp.async, each lane accumulates every row for
CPL columns (A read as broadcast float4, W as one float4 per column), the
block's warps add their partial tiles in shared memory, and the S blocks
splitting k add theirs through a thread block cluster's distributed
shared memory. Every variant is checked against a float64 product; the
table gives µs per launch (CUDA events around back-to-back launches) and
the four-layer chain replayed as one CUDA graph, next to cuBLAS through
PyTorch (float32 and TF32).
"""
import itertools
import os
import sys

import cupy as cp
import torch

SRC = r"""
#ifndef CLUSTER
#define CLUSTER_ATTR
#else
#define CLUSTER_ATTR __cluster_dims__(1, 1, S)
#endif
__device__ __forceinline__ void cp16(float* dst, const float* src) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait_group() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void wait_upto(int n) {
  switch (n) { case 0: wait_group<0>(); break; case 1: wait_group<1>(); break; case 2: wait_group<2>(); break;
               case 3: wait_group<3>(); break; default: wait_group<7>(); break; }
}
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }

// grid (N/BN, M/MT, S); block W warps. Assumes K % (S*W*4*G) == 0, N % BN == 0, M % MT == 0.
extern "C" __global__ void __launch_bounds__(W * 32) CLUSTER_ATTR
skinny(const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
       int M, int N, int K, float* __restrict__ out, int ldo) {
  constexpr int BN = 32 * CPL, T = MT * BN;
  extern __shared__ __align__(16) float smem[];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * MT, z = blockIdx.z;
  const int kb = K / S, kw = kb / W, LD = kw + 4;
  const int k0 = z * kb + w * kw;
  float* As = smem + w * (MT + BN) * LD;
  const int cpg = kw / 4 / G; // 16-byte chunks per row per group
  #pragma unroll
  for (int g = 0; g < G; g++) {
#ifndef NOLOAD
    for (int i = lane; i < (MT + BN) * cpg; i += 32) {
      const int r = i / cpg, c = g * cpg + i % cpg;
      const float* src = r < MT ? A + (long long)(m0 + r) * lda + k0 + 4 * c
                                : B + (long long)(n0 + r - MT) * ldb + k0 + 4 * c;
      cp16(As + r * LD + 4 * c, src);
    }
#endif
    commit();
  }
  const float* Bs = As + MT * LD;
  float acc[MT][CPL];
  #pragma unroll
  for (int m = 0; m < MT; m++)
    #pragma unroll
    for (int j = 0; j < CPL; j++) acc[m][j] = 0.f;
  #pragma unroll
  for (int g = 0; g < G; g++) {
    wait_upto(G - 1 - g);
    __syncwarp();
#ifndef NOCOMPUTE
    #pragma unroll 2
    for (int c = g * cpg; c < (g + 1) * cpg; c++) {
      float4 b[CPL];
      #pragma unroll
      for (int j = 0; j < CPL; j++) b[j] = *(const float4*)&Bs[(lane + 32 * j) * LD + 4 * c];
      #pragma unroll
      for (int m = 0; m < MT; m++) {
        const float4 a = *(const float4*)&As[m * LD + 4 * c];
        #pragma unroll
        for (int j = 0; j < CPL; j++)
          acc[m][j] = fmaf(a.w, b[j].w, fmaf(a.z, b[j].z, fmaf(a.y, b[j].y, fmaf(a.x, b[j].x, acc[m][j]))));
      }
    }
#else
    if (lane == 0) acc[0][0] += As[g];
#endif
  }
#ifdef NORED
  #pragma unroll
  for (int m = 0; m < MT; m++)
    #pragma unroll
    for (int j = 0; j < CPL; j++) out[(long long)(m0 + m) * ldo + n0 + lane + 32 * j] = acc[m][j];
  return;
#endif
  __syncthreads();
  float* red = smem; // [W][T]
  #pragma unroll
  for (int m = 0; m < MT; m++)
    #pragma unroll
    for (int j = 0; j < CPL; j++) red[w * T + m * BN + lane + 32 * j] = acc[m][j];
  __syncthreads();
#if S == 1
  for (int f = threadIdx.x; f < T; f += W * 32) {
    float v = 0.f;
    #pragma unroll
    for (int q = 0; q < W; q++) v += red[q * T + f];
    out[(long long)(m0 + f / BN) * ldo + n0 + f % BN] = gelu(v);
  }
#else
  float* sum = smem + W * T;
  for (int f = threadIdx.x; f < T; f += W * 32) {
    float v = 0.f;
    #pragma unroll
    for (int q = 0; q < W; q++) v += red[q * T + f];
    sum[f] = v;
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  unsigned base = (unsigned)__cvta_generic_to_shared(sum);
  for (int f = z * (T / S) + threadIdx.x; f < (z + 1) * (T / S); f += W * 32) {
    float p[S];
    #pragma unroll
    for (int s = 0; s < S; s++) {
      unsigned r;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(base + 4u * f), "r"(s));
      asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(p[s]) : "r"(r) : "memory");
    }
    float v = 0.f;
    #pragma unroll
    for (int s = 0; s < S; s++) v += p[s];
    out[(long long)(m0 + f / BN) * ldo + n0 + f % BN] = gelu(v);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
"""


def timeit(launch, n=200, rounds=3):
    for _ in range(10):
        launch()
    best = float("inf")
    for _ in range(rounds):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(n):
            launch()
        b.record()
        b.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(a, b) * 1000 / n)
    return best


def graph_time(launches, n=200):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for f in launches:
            f()
        s.synchronize()
        s.begin_capture()
        for f in launches:
            f()
        g = s.end_capture()
        for _ in range(10):
            g.launch(s)
        best = float("inf")
        for _ in range(3):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(s)
            for _ in range(n):
                g.launch(s)
            b.record(s)
            b.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(a, b) * 1000 / n)
    return best


STREAM = r"""
extern "C" __global__ void stream(const float4* __restrict__ w, long long n4, float* __restrict__ out) {
  float s = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    const float4 v = __ldcg(w + i);
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 12345.f) out[0] = s; // keeps the loads
}
"""


def stream_probe(Ws):
    """Time of reading each 4 MB weight once (no arithmetic), four in one graph."""
    k = cp.RawKernel(STREAM, "stream")
    sink = cp.zeros(1, cp.float32)
    n4 = Ws[0].size // 4
    return graph_time([lambda w=w: k((132 * 4,), (256,), (w, cp.int64(n4), sink)) for w in Ws])


def build(M, N, K, MT, CPL, W, S, G, extra=()):
    """The variant's kernel, grid, block and dynamic shared memory; extra
    are more compiler options (skinny_phases.py's stage switches)."""
    kw = K // S // W
    T = MT * 32 * CPL
    smem = 4 * max(W * (MT + 32 * CPL) * (kw + 4), W * T + (T if S > 1 else 0))
    opts = ("-std=c++17", "-arch=sm_90", f"-DMT={MT}", f"-DCPL={CPL}", f"-DW={W}", f"-DS={S}", f"-DG={G}") + tuple(extra)
    if S > 1:
        opts += ("-DCLUSTER",)
    k = cp.RawModule(code=SRC, options=opts).get_function("skinny")
    k.max_dynamic_shared_size_bytes = smem
    return k, (N // (32 * CPL), M // MT, S), (W * 32,), smem


def main():
    M, N, K = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else (32, 1024, 1024)
    print(f"# {torch.cuda.get_device_name()} M={M} N={N} K={K}")
    rng = cp.random.default_rng(1)
    x = rng.standard_normal((M, K), dtype=cp.float32)
    Ws = [(rng.standard_normal((N, K), dtype=cp.float32) * (1 / K**0.5)).astype(cp.float32) for _ in range(4)]
    ref = torch.nn.functional.gelu(torch.from_dlpack(x).double() @ torch.from_dlpack(Ws[0]).double().T)

    # cuBLAS through PyTorch, on the same arrays, and launch floors.
    tx, tw = torch.from_dlpack(x), [torch.from_dlpack(w) for w in Ws]
    rows = [("graph of 4 W reads (4 MB each)", stream_probe(Ws))]
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        rows.append((f"torch linear {'tf32' if tf32 else 'fp32'}", timeit(lambda: torch.nn.functional.linear(tx, tw[0]))))
    torch.backends.cuda.matmul.allow_tf32 = False
    empty = cp.RawKernel('extern "C" __global__ void e() {}', "e")
    rows.append(("empty kernel", timeit(lambda: empty((1,), (32,), ()))))
    rows.append(("graph of 4 empty kernels", graph_time([lambda: empty((1,), (32,), ())] * 4)))

    only = os.environ.get("ONLY", "")
    results = []
    for cfg in itertools.product((32, 16), (1, 2), (2, 4, 8), (1, 2, 4, 8), (1, 2, 4)):
        MT, CPL, W, S, G = cfg
        name = "mt%dc%dw%ds%dg%d" % cfg
        kw = K // S // W
        if M % MT or N % (32 * CPL) or K % (S * W) or kw % (4 * G) or kw < 4 * G or (only and name not in only.split(",")):
            continue
        try:
            k, grid, block, smem = build(M, N, K, *cfg)
        except Exception as e:  # noqa: BLE001 (too much shared memory, or a compile error)
            print(name, "not built:", str(e)[:300])
            continue
        out = cp.full((M, N), cp.nan, cp.float32)
        args = (x, cp.int32(K), Ws[0], cp.int32(K), cp.int32(M), cp.int32(N), cp.int32(K), out, cp.int32(N))
        k(grid, block, args, shared_mem=smem)
        cp.cuda.Device().synchronize()
        err = (torch.from_dlpack(out).double() - ref).norm().item() / ref.norm().item()
        if not err < 1e-5:
            print(name, "WRONG", err)
            continue
        t = timeit(lambda: k(grid, block, args, shared_mem=smem))
        results.append((name, t, grid[0] * grid[1] * grid[2], smem, err, cfg))
    results.sort(key=lambda r: r[1])
    print("variant                 us/launch  blocks  smem  rel.err")
    for name, t, blocks, smem, err, _ in results:
        print(f"{name:22s} {t:9.2f} {blocks:7d} {smem:6d} {err:.1e}")

    print("four layers (x·Wᵀ then GELU, 1024 wide) as one CUDA graph:")
    for name, *_, cfg in results[:6]:
        k, grid, block, smem = build(M, N, K, *cfg)
        acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]
        launches = [(lambda i=i: k(grid, block, (acts[i], cp.int32(K), Ws[i], cp.int32(K), cp.int32(M), cp.int32(N), cp.int32(K),
                                                 acts[i + 1], cp.int32(N)), shared_mem=smem)) for i in range(4)]
        print(f"  {name:22s} {graph_time(launches):8.2f} us")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            h = tx
            for w in tw:
                h = torch.nn.functional.gelu(torch.nn.functional.linear(h, w))
        s.synchronize()
        with torch.cuda.graph(g, stream=s):
            h = tx
            for w in tw:
                h = torch.nn.functional.gelu(torch.nn.functional.linear(h, w))
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(200):
        g.replay()
    b.record()
    b.synchronize()
    rows.append(("torch 4 layers fp32 graph", a.elapsed_time(b) * 1000 / 200))
    for name, t in rows:
        print(f"{name:28s} {t:8.2f} us")


if __name__ == "__main__":
    main()
