// gocompile GEMM kernel: out[m, n] = epilogue(sum over k of A[m, k]·B[k, n]), float32, launch shape x2w4s8
typedef unsigned char gc_bool;
typedef unsigned short gc_half;
typedef unsigned short gc_bf16;
__device__ __forceinline__ float gc_ld_half(gc_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ gc_half gc_st_half(float f) { gc_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float gc_ld_bf16(gc_bf16 h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ gc_bf16 gc_st_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if (f != f) return (gc_bf16)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (gc_bf16)(u >> 16);
}

// V4 is four values loaded or stored with one vector instruction.
template <typename T> struct __align__(4 * sizeof(T)) V4 { T v[4]; };

// gc_row_v4 loads the vector at flat index i0 (a multiple of 4) of a
// row-broadcast operand, which repeats every inner elements: element i is
// x[i % inner]. When inner is a multiple of 4 the vector lies within one
// repeat, and x aligned makes it one vector load.
template <typename T, typename I> __device__ __forceinline__ V4<T> gc_row_v4(const T* x, I i0, I inner) {
  const I r = i0 % inner;
  if ((inner & 3) == 0 && ((unsigned long long)x & (sizeof(V4<T>) - 1)) == 0) return *(const V4<T>*)(x + r);
  V4<T> v;
  #pragma unroll
  for (int j = 0; j < 4; j++) v.v[j] = x[(i0 + j) % inner];
  return v;
}

// gc_col_v4 loads the vector at flat index i0 (a multiple of 4) of a
// column-broadcast operand, which holds one element per run of inner
// elements: element i is x[i / inner]. When inner is a multiple of 4 the
// vector lies within one run: one element, read once.
template <typename T, typename I> __device__ __forceinline__ V4<T> gc_col_v4(const T* x, I i0, I inner) {
  V4<T> v;
  if ((inner & 3) == 0) {
    const T e = x[i0 / inner];
    v.v[0] = e; v.v[1] = e; v.v[2] = e; v.v[3] = e;
    return v;
  }
  #pragma unroll
  for (int j = 0; j < 4; j++) v.v[j] = x[(i0 + j) / inner];
  return v;
}

__device__ __forceinline__ float gc_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double gc_abs(double a) { return fabs(a); }
__device__ __forceinline__ long long gc_abs(long long a) { return a < 0 ? -a : a; }
__device__ __forceinline__ float gc_max(float a, float b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double gc_max(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ long long gc_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ float gc_min(float a, float b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ double gc_min(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ long long gc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ float gc_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double gc_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ long long gc_pow(long long a, long long b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  long long r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}

// epilogue: a0 is the product; mul(mul(add(x0, x1), 0.5), add(1, erf(mul(add(x0, x1), 0.7071067811865476))))
__device__ __forceinline__ float epilogue(float a0, float a1) {
  return (((a0 + a1) * 0.5f) * (1.0f + erff(((a0 + a1) * 0.707106769f))));
}

// gc_tc_ldw loads 4 floats of B, which is read once: they bypass L1,
// leaving it to A, which every block of a row tile reads. Volatile: the
// loads stay ahead of griddepcontrol.wait, past which the compiler would
// otherwise move them.
__device__ __forceinline__ float4 gc_tc_ldw(const float* p) {
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

// gc_tc_split splits x into TF32 parts, x ≈ hi + lo. An infinite x has
// a NaN lo, which makes its sums NaN: gc_tc_exact redoes those.
__device__ __forceinline__ void gc_tc_split(float x, unsigned& hi, unsigned& lo) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
  const float r = x - __uint_as_float(hi);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(r));
}

// gc_tc_exact is v, or, when v is NaN, A's row m times B's column n
// summed in float32 one k at a time: the split turns an infinite operand
// into NaN sums, and this gives them float32's own result (an infinity,
// or NaN where float32 has one). Rare, so it may be slow.
__device__ __noinline__ float gc_tc_exact_slow(const float* A, long long lda, const float* B, long long ldb, int K, int m, int n) {
  float s = 0.f;
  for (int k = 0; k < K; k++) s = fmaf(__ldcg(A + (long long)m * lda + k), B[(long long)n * ldb + k], s);
  return s;
}
__device__ __forceinline__ float gc_tc_exact(float v, const float* A, long long lda, const float* B, long long ldb, int K, int m, int n) {
  return v == v ? v : gc_tc_exact_slow(A, lda, B, ldb, K, m, n);
}

__device__ __forceinline__ void gc_tc_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float gc_tc_at(const float4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Block (x, y, z) computes rows 32y.. and columns 16x.. of the product;
// its 4 warps and the cluster's 8 blocks split k in 16-wide steps.
// A and the epilogue's operands are not __restrict__, and A is read with
// ld.global.cg: under a dependent launch the kernel ahead writes them
// while this one runs (before its griddepcontrol.wait), so the
// non-coherent read-only path, which assumes data fixed for the kernel's
// whole life, could return stale values.
extern "C" __global__ void __launch_bounds__(4 * 32) __cluster_dims__(1, 1, 8) gc_gemm_bias_gelu_float32_f32_to_float32_x2w4s8(
    const float* A, long long lda, const float* __restrict__ B, long long ldb,
    int M, int N, int K, int vec, float* __restrict__ out, long long ldo,
    float* __restrict__ ws, unsigned int* __restrict__ counters, const float* x1, long long x1m, long long x1n) {
  constexpr int NT = 2, W = 4, S = 8, BN = 8 * NT, T = 32 * BN;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * 32, z = blockIdx.z;
  // This warp's share of k: whole 16-wide steps (K is a multiple of 16).
  const int steps = K / 16, per = (steps + S * W - 1) / (S * W);
  const int kBegin = min(K, (z * W + w) * per * 16), kw = min(K, kBegin + per * 16) - kBegin;
  // Lane (g, t) reads k 4t..4t+3 of each step; rows and columns past the
  // end read the last one, dropped at the store.
  const float* a[4];
  #pragma unroll
  for (int r = 0; r < 4; r++) a[r] = A + (long long)min(m0 + g + 8 * r, M - 1) * lda + kBegin + 4 * t;
  const float* b[NT];
  #pragma unroll
  for (int j = 0; j < NT; j++) b[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + kBegin + 4 * t;
  asm volatile("griddepcontrol.launch_dependents;");
  float acc4[2][NT][4];
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++) acc4[i][j][q] = 0.f;
  float4 av[4], bv[NT];
  #pragma unroll
  for (int j = 0; j < NT; j++) bv[j] = kw > 0 ? gc_tc_ldw(b[j]) : make_float4(0.f, 0.f, 0.f, 0.f);
  // Everything above reads only B, which no kernel of the program writes.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  #pragma unroll
  for (int r = 0; r < 4; r++) av[r] = kw > 0 ? __ldcg((const float4*)a[r]) : make_float4(0.f, 0.f, 0.f, 0.f);
  for (int k = 0; k < kw; k += 16) {
    // The next step's loads are in flight during this one's MMAs.
    float4 an[4], bn[NT];
    if (k + 16 < kw) {
      #pragma unroll
      for (int r = 0; r < 4; r++) an[r] = __ldcg((const float4*)(a[r] + k + 16));
      #pragma unroll
      for (int j = 0; j < NT; j++) bn[j] = gc_tc_ldw(b[j] + k + 16);
    }
    #pragma unroll
    for (int p = 0; p < 2; p++) {
      // MMA p takes k 4t+2p as its k t, and 4t+2p+1 as its k t+4.
      unsigned ah[4][2], al[4][2];
      #pragma unroll
      for (int r = 0; r < 4; r++) {
        gc_tc_split(gc_tc_at(av[r], 2 * p), ah[r][0], al[r][0]);
        gc_tc_split(gc_tc_at(av[r], 2 * p + 1), ah[r][1], al[r][1]);
      }
      #pragma unroll
      for (int j = 0; j < NT; j++) {
        unsigned bh0, bl0, bh1, bl1;
        gc_tc_split(gc_tc_at(bv[j], 2 * p), bh0, bl0);
        gc_tc_split(gc_tc_at(bv[j], 2 * p + 1), bh1, bl1);
        #pragma unroll
        for (int i = 0; i < 2; i++) {
          // Rows g+16i (a0, a2) and g+16i+8 (a1, a3); small terms first.
          gc_tc_mma(acc4[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bl0, bl1);
          gc_tc_mma(acc4[i][j], al[2 * i][0], al[2 * i + 1][0], al[2 * i][1], al[2 * i + 1][1], bh0, bh1);
          gc_tc_mma(acc4[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bh0, bh1);
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
  // acc4[i][j][q] is row 16i + g + 8(q/2), column 8j + 2t + q%2 of the tile.
  __shared__ float red[(W + 1) * T]; // the warps' tiles, then their sum
  #pragma unroll
  for (int fi = 0; fi < 2; fi++)
    #pragma unroll
    for (int fj = 0; fj < NT; fj++)
      #pragma unroll
      for (int q = 0; q < 4; q++)
        red[w * T + (16 * fi + g + 8 * (q >> 1)) * BN + 8 * fj + 2 * t + (q & 1)] = acc4[fi][fj][q];
  __syncthreads();
  float* sum = red + W * T;
  for (int f = threadIdx.x; f < T; f += W * 32) {
    float v = 0.f;
    #pragma unroll
    for (int s = 0; s < W; s++) v += red[s * T + f];
    sum[f] = v;
  }
  // The sums are visible to the cluster: a fence at cluster scope, then a
  // barrier without one of its own (cheaper than the barrier's release,
  // which fences at GPU scope).
  asm volatile("fence.acq_rel.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  unsigned base;
  asm("{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }" : "=r"(base) : "l"(sum));
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
    const int m = m0 + f / BN, n = n0 + f % BN;
    if (m >= M || n >= N) continue;
    const float acc[1][1] = {{gc_tc_exact(v, A, lda, B, ldb, K, m, n)}};
    const int i = 0, j = 0;
    out[(long long)m * ldo + n] = (float)(epilogue((float)acc[i][j], (float)(x1[(long long)m * x1m + (long long)n * x1n])));
  }
  // Keep this block's sums alive until the cluster has read them (the
  // reads are complete: their values are stored), no ordering needed.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}
