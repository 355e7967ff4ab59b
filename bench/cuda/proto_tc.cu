
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
