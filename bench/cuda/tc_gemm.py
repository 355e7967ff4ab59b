"""Sweep of a small-batch float32 GEMM on the tensor cores with float32
accuracy ("3xTF32": each operand is split into a TF32 high part and a
TF32 remainder, and hi·hi + hi·lo + lo·hi is accumulated in float32), for
the MLP's 32×1024 by 1024×1024 product (out = GELU(x·Wᵀ)):

    python3 bench/cuda/tc_gemm.py [M N K]

Each warp computes 32 rows × 8·NT columns over its share of k with
mma.sync m16n8k8; the W warps of a block split the block's k range and
add their tiles in shared memory; the S blocks splitting k add theirs
through a cluster's distributed shared memory. Operands are read straight
from global memory as 16-byte vectors: lane (g, t) reads k 4t..4t+3 of
its rows, and the MMA's k order is permuted alike for A and W, which the
sum does not see.
"""
import itertools
import os
import sys

import cupy as cp
import torch

from skinny_gemm import graph_time

SRC = r"""
#ifndef CLUSTER
#define CLUSTER_ATTR
#else
#define CLUSTER_ATTR __cluster_dims__(1, 1, S)
#endif
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ unsigned tf32(float x) { unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; }
__device__ __forceinline__ void split(float x, unsigned& hi, unsigned& lo) {
  hi = tf32(x);
  lo = tf32(x - __uint_as_float(hi));
}
__device__ __forceinline__ void mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float4 ldw(const float* p) {
  float4 v;
  asm("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float comp(const float4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// grid (N / (8 NT), ceil(M / 32), S); block W warps. K % (16 S W) == 0, N % (8 NT) == 0.
extern "C" __global__ void __launch_bounds__(W * 32) CLUSTER_ATTR
tcgemm(const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
       int M, int N, int K, float* __restrict__ out, int ldo) {
  constexpr int BN = 8 * NT, T = 32 * BN;
  extern __shared__ __align__(16) float smem[];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * 32, z = blockIdx.z;
  const int kw = K / S / W, k0 = (z * W + w) * kw;
  const float* a[4];
  #pragma unroll
  for (int r = 0; r < 4; r++) a[r] = A + (long long)min(m0 + g + 8 * r, M - 1) * lda + k0 + 4 * t;
  const float* b = B + (long long)(n0 + g) * ldb + k0 + 4 * t;
  float c[2][NT][4];
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++) c[i][j][q] = 0.f;
  float4 av[4], bv[NT];
  #pragma unroll
  for (int r = 0; r < 4; r++) av[r] = __ldg((const float4*)a[r]);
  #pragma unroll
  for (int j = 0; j < NT; j++) bv[j] = ldw(b + (long long)8 * j * ldb);
  for (int k = 0; k < kw; k += 16) {
    float4 an[4], bn[NT];
    if (k + 16 < kw) {
      #pragma unroll
      for (int r = 0; r < 4; r++) an[r] = __ldg((const float4*)(a[r] + k + 16));
      #pragma unroll
      for (int j = 0; j < NT; j++) bn[j] = ldw(b + (long long)8 * j * ldb + k + 16);
    }
    #pragma unroll
    for (int p = 0; p < 2; p++) {
      unsigned ah[4][2], al[4][2];
      #pragma unroll
      for (int r = 0; r < 4; r++) {
        split(comp(av[r], 2 * p), ah[r][0], al[r][0]);
        split(comp(av[r], 2 * p + 1), ah[r][1], al[r][1]);
      }
      #pragma unroll
      for (int j = 0; j < NT; j++) {
        unsigned bh0, bl0, bh1, bl1;
        split(comp(bv[j], 2 * p), bh0, bl0);
        split(comp(bv[j], 2 * p + 1), bh1, bl1);
        #pragma unroll
        for (int i = 0; i < 2; i++) {
          // rows g+16i (a0, a2) and g+8+16i (a1, a3); logical k t -> 2p, t+4 -> 2p+1
#if PASSES == 3
          mma(c[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bl0, bl1);
          mma(c[i][j], al[2 * i][0], al[2 * i + 1][0], al[2 * i][1], al[2 * i + 1][1], bh0, bh1);
#endif
          mma(c[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bh0, bh1);
        }
      }
    }
    if (k + 16 < kw) {
      #pragma unroll
      for (int r = 0; r < 4; r++) av[r] = an[r];
      #pragma unroll
      for (int j = 0; j < NT; j++) bv[j] = bn[j];
    }
  }
  // c[i][j][q]: row 16i + g + 8(q>>1), column 8j + 2t + (q&1) of the block tile.
#if W == 1 && S == 1
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++) {
        const int m = m0 + 16 * i + g + 8 * (q >> 1), n = n0 + 8 * j + 2 * t + (q & 1);
        if (m < M) out[(long long)m * ldo + n] = gelu(c[i][j][q]);
      }
#else
  float* red = smem; // [W][T]
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++)
        red[w * T + (16 * i + g + 8 * (q >> 1)) * BN + 8 * j + 2 * t + (q & 1)] = c[i][j][q];
  __syncthreads();
#if S == 1
  for (int f = threadIdx.x; f < T; f += W * 32) {
    float v = 0.f;
    #pragma unroll
    for (int q = 0; q < W; q++) v += red[q * T + f];
    const int m = m0 + f / BN;
    if (m < M) out[(long long)m * ldo + n0 + f % BN] = gelu(v);
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
    const int m = m0 + f / BN;
    if (m < M) out[(long long)m * ldo + n0 + f % BN] = gelu(v);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
#endif
}

// Wide variant: the block's W warps own distinct columns (8 NT each) of
// one k slice KS = K/S. The block stages the slice of A once in shared
// memory (cp.async); each warp issues all its W loads for the slice into
// registers at once, then reads A fragments from shared memory.
__device__ __forceinline__ void cp16(float* dst, const float* src) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
}
#ifdef KS
extern "C" __global__ void __launch_bounds__(W * 32) CLUSTER_ATTR
tcwide(const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
       int M, int N, int K, float* __restrict__ out, int ldo) {
  constexpr int BN = 8 * NT * W, T = 32 * BN, STEPS = KS / 16, LD = KS + 16;
  extern __shared__ __align__(16) float smem[];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * 32, z = blockIdx.z;
  const int k0 = z * KS;
  for (int i = threadIdx.x; i < 32 * KS / 4; i += W * 32) {
    const int r = i / (KS / 4), c = i % (KS / 4);
    cp16(smem + r * LD + 4 * c, A + (long long)min(m0 + r, M - 1) * lda + k0 + 4 * c);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  float4 bv[STEPS][NT];
  const float* b = B + (long long)(n0 + w * 8 * NT + g) * ldb + k0 + 4 * t;
  #pragma unroll
  for (int s = 0; s < STEPS; s++)
    #pragma unroll
    for (int j = 0; j < NT; j++) bv[s][j] = ldw(b + (long long)8 * j * ldb + 16 * s);
  float c[2][NT][4];
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++) c[i][j][q] = 0.f;
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  #pragma unroll
  for (int s = 0; s < STEPS; s++) {
    float4 av[4];
    #pragma unroll
    for (int r = 0; r < 4; r++) av[r] = *(const float4*)&smem[(g + 8 * r) * LD + 16 * s + 4 * t];
    #pragma unroll
    for (int p = 0; p < 2; p++) {
      unsigned ah[4][2], al[4][2];
      #pragma unroll
      for (int r = 0; r < 4; r++) {
        split(comp(av[r], 2 * p), ah[r][0], al[r][0]);
        split(comp(av[r], 2 * p + 1), ah[r][1], al[r][1]);
      }
      #pragma unroll
      for (int j = 0; j < NT; j++) {
        unsigned bh0, bl0, bh1, bl1;
        split(comp(bv[s][j], 2 * p), bh0, bl0);
        split(comp(bv[s][j], 2 * p + 1), bh1, bl1);
        #pragma unroll
        for (int i = 0; i < 2; i++) {
          mma(c[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bl0, bl1);
          mma(c[i][j], al[2 * i][0], al[2 * i + 1][0], al[2 * i][1], al[2 * i + 1][1], bh0, bh1);
          mma(c[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bh0, bh1);
        }
      }
    }
  }
#if S == 1
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++) {
        const int m = m0 + 16 * i + g + 8 * (q >> 1), n = n0 + w * 8 * NT + 8 * j + 2 * t + (q & 1);
        if (m < M) out[(long long)m * ldo + n] = gelu(c[i][j][q]);
      }
#else
  __syncthreads(); // the A slice's space becomes the partial tile
  float* sum = smem;
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++)
        sum[(16 * i + g + 8 * (q >> 1)) * BN + w * 8 * NT + 8 * j + 2 * t + (q & 1)] = c[i][j][q];
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
    const int m = m0 + f / BN;
    if (m < M) out[(long long)m * ldo + n0 + f % BN] = gelu(v);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
#endif
"""


def build_wide(M, N, K, NT, W, S):
    BN = 8 * NT * W
    smem = 4 * max(32 * (K // S + 16), 32 * BN)
    opts = ("-std=c++17", "-arch=sm_90", f"-DNT={NT}", f"-DW={W}", f"-DS={S}", f"-DKS={K // S}", "-DPASSES=3")
    if S > 1:
        opts += ("-DCLUSTER",)
    k = cp.RawModule(code=SRC, options=opts).get_function("tcwide")
    k.max_dynamic_shared_size_bytes = smem
    return k, (N // BN, (M + 31) // 32, S), (W * 32,), smem


def build(M, N, K, NT, W, S, passes=3):
    T = 32 * 8 * NT
    smem = 4 * (W * T + (T if S > 1 else 0)) if W * S > 1 else 0
    opts = ("-std=c++17", "-arch=sm_90", f"-DNT={NT}", f"-DW={W}", f"-DS={S}", f"-DPASSES={passes}")
    if S > 1:
        opts += ("-DCLUSTER",)
    k = cp.RawModule(code=SRC, options=opts).get_function("tcgemm")
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    grid = (N // (8 * NT), (M + 31) // 32, S)
    return k, grid, (W * 32,), smem


def main():
    M, N, K = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else (32, 1024, 1024)
    print(f"# {torch.cuda.get_device_name()} M={M} N={N} K={K}")
    rng = cp.random.default_rng(2)
    x = rng.standard_normal((M, K), dtype=cp.float32)
    Ws = [(rng.standard_normal((N, K), dtype=cp.float32) * (1 / K**0.5)).astype(cp.float32) for _ in range(4)]
    ref = torch.nn.functional.gelu(torch.from_dlpack(x).double() @ torch.from_dlpack(Ws[0]).double().T)
    f32 = torch.nn.functional.gelu(torch.from_dlpack(x) @ torch.from_dlpack(Ws[0]).T).double()
    print(f"cuBLAS float32 rel.err {(f32 - ref).norm().item() / ref.norm().item():.1e}")
    only = os.environ.get("ONLY", "")
    todo = []
    for NT, W, S, passes in itertools.product((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), (3, 1)):
        kw = K // S // W
        name = f"n{NT}w{W}s{S}x{passes}"
        if K % (S * W) or kw % 16 or N % (8 * NT) or (only and name not in only.split(",")):
            continue
        if passes == 1 and name not in ("n4w4s4x1", "n2w4s8x1", "n4w2s8x1", "n8w4s4x1"):
            continue
        T = 32 * 8 * NT
        if 4 * (W * T + T) > 200 * 1024:
            continue
        todo.append((name, NT, W, S, passes))
    for NT, W, S in itertools.product((1, 2, 4), (2, 4, 8, 16), (1, 2, 4, 8)):
        BN, ks = 8 * NT * W, K // S
        name = f"wide_n{NT}w{W}s{S}"
        if N % BN or ks % 16 or (ks // 16) * NT > 16 or (only and name not in only.split(",")):
            continue
        todo.append((name, NT, W, S, 0))

    def compile_one(v):
        name, NT, W, S, passes = v
        try:
            if name.startswith("wide_"):
                return (name, *build_wide(M, N, K, NT, W, S))
            return (name, *build(M, N, K, NT, W, S, passes))
        except Exception as e:  # noqa: BLE001
            print("compile failed", name, str(e)[:400])
            return None

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(16) as ex:
        compiled = [c for c in ex.map(compile_one, todo) if c]
    out = cp.empty((M, N), cp.float32)
    results = []
    for name, k, grid, block, smem in compiled:
        args = (x, cp.int32(K), Ws[0], cp.int32(K), cp.int32(M), cp.int32(N), cp.int32(K), out, cp.int32(N))
        out.fill(cp.nan)
        k(grid, block, args, shared_mem=smem)
        cp.cuda.Device().synchronize()
        err = (torch.from_dlpack(out).double() - ref).norm().item() / ref.norm().item()
        if not err < (1e-2 if name.endswith("x1") else 1e-5):
            print(name, "WRONG", err)
            continue
        t = graph_time([lambda: k(grid, block, args, shared_mem=smem)] * 8) / 8
        results.append((name, t, grid[0] * grid[1] * grid[2], err, (k, grid, block, smem)))
    results.sort(key=lambda r: r[1])
    print("variant          us/launch (8 in a graph)  blocks  rel.err")
    for name, t, blocks, err, _ in results[:30]:
        print(f"{name:16s} {t:9.2f} {blocks:7d}   {err:.1e}")
    print("four layers (x·Wᵀ then GELU) as one CUDA graph:")
    for name, *_, (k, grid, block, smem) in [r for r in results if not r[0].endswith("x1")][:6]:
        acts = [x] + [cp.empty((M, N), cp.float32) for _ in range(4)]
        launches = [(lambda i=i: k(grid, block, (acts[i], cp.int32(K), Ws[i], cp.int32(K), cp.int32(M), cp.int32(N),
                                                 cp.int32(K), acts[i + 1], cp.int32(N)), shared_mem=smem))
                    for i in range(4)]
        print(f"  {name:16s} {graph_time(launches):8.2f} us")


if __name__ == "__main__":
    main()
