package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// TiledAttentionKernel is ScaledDotProductAttention for many queries (a
// prefill, or ir.OpAttention wherever the split-key AttentionKernel does
// not fit), as flash attention computes it: no score matrix in memory.
//
// A block takes TiledAttentionRows query rows of one key head of one batch
// entry, row r being query r/G of query head hk·G + r%G, so that the query
// heads sharing a key head share its loads. Its warps take 16 rows each.
// The block walks the keys TiledAttentionKeys at a time: it copies the
// chunk's key and value rows into shared memory (where rows are
// contiguous and aligned, through registers with 16-byte loads issued a
// chunk ahead, so they overlap the MMAs), then each warp computes its rows' scores
// against the chunk as m16n8k16 tensor-core MMAs (key fragments read with
// ldmatrix), updates the rows' running maximum and sum (online softmax, in
// float32), and adds the chunk's weighted values as MMAs, the weights split
// into two parts of the operand type as AttentionKernel's are (value
// fragments read with ldmatrix.trans). Under a causal mask the block stops
// at its last query's diagonal; a chunk whose keys no row of the block
// sees (masked, or past a warp's diagonal) is not staged, and one no row
// of a warp sees is skipped by the warp.
// Each warp writes its rows at the end; a row whose keys are all masked
// gets zeros, as PyTorch's attention gives.
type TiledAttentionKernel struct {
	Elem   ir.DType // q, k, v and the output: bfloat16 or float16
	E, Ev  int      // features of q and k, of v: multiples of 16, at most 128
	Mask   bool     // a bool mask operand (broadcast by strides)
	Causal bool     // key j is visible to query l only where j <= l
}

// The tiled kernel's warps, rows (16 a warp) and keys a chunk.
const (
	TiledAttentionWarps = 4
	TiledAttentionRows  = 16 * TiledAttentionWarps
	TiledAttentionKeys  = 64
)

// Name is the kernel's entry point.
func (k *TiledAttentionKernel) Name() string {
	s := fmt.Sprintf("gc_attention_tiled_%v_e%d_v%d", k.Elem, k.E, k.Ev)
	if k.Mask {
		s += "_mask"
	}
	if k.Causal {
		s += "_causal"
	}
	return s
}

// Source generates the kernel, launched as a grid of ⌈G·L /
// TiledAttentionRows⌉ × B·Hkv blocks of TiledAttentionWarps warps. Its
// parameters: const T* q, k, v; long long strides of q [b, h, l, e], k [b,
// hk, s, e], v [b, hk, s, e], mask [b, h, l, s] (0 where broadcast; unused
// without Mask); const gc_bool* mask; int Hkv, G (query heads per key
// head), L, S; float scale; int vecK, vecV (the key, the value rows are
// contiguous and 16-byte aligned), vecM (the mask's rows are contiguous
// and 16-byte aligned); T* out (contiguous [B, Hq, L, Ev]).
func (k *TiledAttentionKernel) Source() string {
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile eager kernel: %s (ScaledDotProductAttention, many queries, tiled)\n%s", k.Name(), cudaPrelude)
	fmt.Fprintf(&b, `
#define E %[1]d
#define EV %[2]d
#define WARPS %[3]d
#define KEYS %[4]d
// Shared-memory row pitches: 8 elements past the row, so that ldmatrix's
// eight rows fall in distinct banks.
#define KP (E + 8)
#define VP (EV + 8)
#define GC_NEG_INF __int_as_float(0xff800000)
#define GC_ATTN_T %[5]s
#define GC_ATTN_STORE(x) %[6]s
#define GC_ATTN_MASK %[7]t
#define GC_ATTN_CAUSAL %[8]t
`, k.E, k.Ev, TiledAttentionWarps, TiledAttentionKeys, storageC(k.Elem), storeC("x", ir.F32, k.Elem), k.Mask, k.Causal)
	b.WriteString(attentionMMAHelpers(k.Elem))
	fmt.Fprintf(&b, `
// gc_attn_ldsm loads four 8×8 matrices of 16-bit elements from shared
// memory, lanes 8i..8i+7 giving the addresses of matrix i's rows; TRANS
// transposes each.
template <bool TRANS>
__device__ __forceinline__ void gc_attn_ldsm(unsigned (&r)[4], const GC_ATTN_T* p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  if (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%%0,%%1,%%2,%%3}, [%%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%%0,%%1,%%2,%%3}, [%%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  }
}

// The 16-byte vectors of a chunk's key rows, and of its value rows, that
// each thread copies: the chunk's rows are whole vectors, E and EV
// multiples of 16.
#define KVEC (KEYS * E / 8 / (WARPS * 32))
#define VVEC (KEYS * EV / 8 / (WARPS * 32))

// gc_attn_fetch loads this thread's vectors of rows j0..j0+KEYS-1 of src
// (N features, contiguous; row stride rs), zeros past row s1.
template <int N, int C>
__device__ __forceinline__ void gc_attn_fetch(uint4 (&r)[C], const GC_ATTN_T* __restrict__ src, long long rs, int j0, int s1) {
  #pragma unroll
  for (int u = 0; u < C; u++) {
    const int i = threadIdx.x + u * WARPS * 32, j = i / (N / 8), f = i %% (N / 8) * 8;
    r[u] = j0 + j < s1 ? *(const uint4*)(src + (long long)(j0 + j) * rs + f) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// gc_attn_put stores what gc_attn_fetch loaded into dst (row pitch P).
template <int N, int P, int C>
__device__ __forceinline__ void gc_attn_put(GC_ATTN_T* dst, const uint4 (&r)[C]) {
  #pragma unroll
  for (int u = 0; u < C; u++) {
    const int i = threadIdx.x + u * WARPS * 32, j = i / (N / 8), f = i %% (N / 8) * 8;
    *(uint4*)(dst + j * P + f) = r[u];
  }
}

// gc_attn_stage copies the N features of rows j0..j0+KEYS-1 of src (row
// stride rs, feature stride fs) into dst (row pitch P) element by
// element, zeros past row s1: rows that are not whole vectors.
template <int N, int P>
__device__ __forceinline__ void gc_attn_stage(GC_ATTN_T* dst, const GC_ATTN_T* __restrict__ src, long long rs, long long fs,
                                              int j0, int s1) {
  const GC_ATTN_T zero = 0;
  for (int i = threadIdx.x; i < KEYS * N; i += WARPS * 32) {
    const int j = i / N, f = i %% N;
    dst[j * P + f] = j0 + j < s1 ? src[(long long)(j0 + j) * rs + f * fs] : zero;
  }
}

// gc_attn_sees reports whether the mask row at mr lets any of keys
// k0..k0+31 (before S) be seen: two 16-byte loads where vecM (the row's
// keys contiguous, 16-byte aligned) and all 32 keys are there.
__device__ __forceinline__ bool gc_attn_sees(const gc_bool* __restrict__ mask, long long mr, long long ms, int k0, int S, int vecM) {
  if (vecM && k0 + 32 <= S) {
    const uint4 x = *(const uint4*)(mask + mr + k0), y = *(const uint4*)(mask + mr + k0 + 16);
    return (x.x | x.y | x.z | x.w | y.x | y.y | y.z | y.w) != 0u;
  }
  bool any = false;
  for (int k = k0; k < min(k0 + 32, S); k++) any = any || mask[mr + k * ms] != 0;
  return any;
}

// Block (tile, b·Hkv + hk): rows r0.. r0 + WARPS·16 - 1 of the key head,
// row r being query r/G of query head hk·G + r%%G; warp w takes 16 of them.
extern "C" __global__ void __launch_bounds__(WARPS * 32) %[1]s(
    const GC_ATTN_T* __restrict__ q, const GC_ATTN_T* __restrict__ k, const GC_ATTN_T* __restrict__ v, const gc_bool* __restrict__ mask,
    long long qb, long long qh, long long ql, long long qe,
    long long kb, long long kh, long long ks, long long ke,
    long long vb, long long vh, long long vs, long long ve,
    long long mb, long long mh, long long ml, long long ms,
    int Hkv, int G, int L, int S, float scale, int vecK, int vecV, int vecM, GC_ATTN_T* __restrict__ out) {
  gc_dependent_entry();
  __align__(16) __shared__ GC_ATTN_T ksm[KEYS * KP];
  __align__(16) __shared__ GC_ATTN_T vsm[KEYS * VP];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int bk = blockIdx.y, b = bk / Hkv, hk = bk %% Hkv, rows = G * L;
  const int r0 = blockIdx.x * (16 * WARPS), wr = r0 + 16 * w;
  const GC_ATTN_T* kp = k + b * kb + hk * kh;
  const GC_ATTN_T* vp = v + b * vb + hk * vh;
  // This lane's rows of the warp's MMA tile: wr + g and wr + g + 8. q's A
  // fragments, once: step i's a0, a2 are row g's features 16i+2t (and +1)
  // and 16i+2t+8 (and +9); a1, a3 row g+8's.
  bool live[2];
  long long mrow[2];
  int lrow[2];
  unsigned qa[E / 16][4];
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = wr + g + 8 * h;
    live[h] = r < rows;
    const int gq = live[h] ? r %% G : 0, lq = live[h] ? r / G : 0;
    lrow[h] = lq;
    mrow[h] = b * mb + (hk * G + gq) * mh + lq * ml;
    const GC_ATTN_T* qr = q + b * qb + (hk * G + gq) * qh + lq * ql;
    #pragma unroll
    for (int i = 0; i < E / 16; i++) {
      const int e = 16 * i + 2 * t;
      qa[i][h] = live[h] ? gc_attn_pack(qr[e * qe], qr[(e + 1) * qe]) : 0u;
      qa[i][2 + h] = live[h] ? gc_attn_pack(qr[(e + 8) * qe], qr[(e + 9) * qe]) : 0u;
    }
  }
  // The keys this warp's rows can see.
  int wend = wr < rows ? S : 0;
  if (GC_ATTN_CAUSAL) wend = min(wend, (min(wr + 16, rows) - 1) / G + 1);
  // The chunks [lo, hi) that some row of the warp sees, then those of the
  // block: a mask over a long cache leaves most of its keys unseen, and
  // the block walks only the chunks between the first and the last seen.
  // Lane pair 2i, 2i+1 checks row i's halves of a chunk, 32 keys each.
  int lo = 0, hi = (wend + KEYS - 1) / KEYS;
  if (GC_ATTN_MASK) {
    const int r = min(wr + (lane >> 1), rows - 1);
    const long long mr = b * mb + (hk * G + r %% G) * mh + (long long)(r / G) * ml;
    lo = hi;
    int top = 0;
    #pragma unroll 4
    for (int c = 0; c < hi; c++)
      if (__any_sync(0xffffffffu, gc_attn_sees(mask, mr, ms, c * KEYS + 32 * (lane & 1), S, vecM))) {
        lo = min(lo, c);
        top = c + 1;
      }
    hi = top;
  }
  __shared__ int span[2];
  if (threadIdx.x == 0) {
    span[0] = 1 << 30;
    span[1] = 0;
  }
  __syncthreads();
  if (lane == 0 && lo < hi) {
    atomicMin(span, lo);
    atomicMax(span + 1, hi);
  }
  __syncthreads();
  // No chunk seen (every key masked): no chunk walked, and zeros out.
  const int send = min(S, span[1] * KEYS), first = send > 0 ? span[0] * KEYS : 0;
  float m[2] = {GC_NEG_INF, GC_NEG_INF}, sum[2] = {0.f, 0.f};
  float o[EV / 8][4];
  #pragma unroll
  for (int j = 0; j < EV / 8; j++)
    #pragma unroll
    for (int c = 0; c < 4; c++) o[j][c] = 0.f;
  const int mi = lane >> 3, mr = lane & 7; // the ldmatrix matrix and row this lane addresses
  // Rows of whole vectors travel through registers: the next chunk's
  // loads are issued before this chunk's MMAs, so they overlap.
  uint4 kr[KVEC], vr[VVEC];
  if (vecK && first < send) gc_attn_fetch<E>(kr, kp, ks, first, S);
  if (vecV && first < send) gc_attn_fetch<EV>(vr, vp, vs, first, S);
  for (int j0 = first; j0 < send; j0 += KEYS) {
    // Which of this lane's scores are visible (bit 16h + 2n + x: row h,
    // key j0+8n+2t+x). A chunk no row of the block sees (a long cache's
    // positions past the prompt) is not staged, and one no row of a warp
    // sees is skipped by the warp.
    unsigned seen = 0u;
    if (j0 < wend) {
      #pragma unroll
      for (int h = 0; h < 2; h++)
        #pragma unroll
        for (int n = 0; n < KEYS / 8; n++)
          #pragma unroll
          for (int x = 0; x < 2; x++) {
            const int key = j0 + 8 * n + 2 * t + x;
            bool keep = live[h] && key < S;
            if (GC_ATTN_CAUSAL) keep = keep && key <= lrow[h];
            if (GC_ATTN_MASK) keep = keep && mask[mrow[h] + (long long)min(key, S - 1) * ms] != 0;
            seen |= (unsigned)keep << (16 * h + 2 * n + x);
          }
    }
    // The barrier also means every warp is done with the previous chunk.
    const bool needed = __syncthreads_or(seen != 0u);
    if (needed) {
      if (vecK) gc_attn_put<E, KP>(ksm, kr); else gc_attn_stage<E, KP>(ksm, kp, ks, ke, j0, S);
      if (vecV) gc_attn_put<EV, VP>(vsm, vr); else gc_attn_stage<EV, VP>(vsm, vp, vs, ve, j0, S);
      __syncthreads();
    }
    if (vecK && j0 + KEYS < send) gc_attn_fetch<E>(kr, kp, ks, j0 + KEYS, S);
    if (vecV && j0 + KEYS < send) gc_attn_fetch<EV>(vr, vp, vs, j0 + KEYS, S);
    if (!__any_sync(0xffffffffu, seen != 0u)) continue;
    // Scores: column tile n is keys j0+8n..; this lane holds rows g, g+8
    // × keys 2t, 2t+1 of each. One ldmatrix gives the B fragments of
    // tiles n and n+1 for feature step i.
    float sc[KEYS / 8][4];
    #pragma unroll
    for (int n = 0; n < KEYS / 8; n++)
      #pragma unroll
      for (int c = 0; c < 4; c++) sc[n][c] = 0.f;
    #pragma unroll
    for (int i = 0; i < E / 16; i++)
      #pragma unroll
      for (int n = 0; n < KEYS / 8; n += 2) {
        unsigned kf[4];
        gc_attn_ldsm<false>(kf, ksm + (8 * (n + (mi >> 1)) + mr) * KP + 16 * i + 8 * (mi & 1));
        gc_attn_mma(sc[n], qa[i], kf[0], kf[1]);
        gc_attn_mma(sc[n + 1], qa[i], kf[2], kf[3]);
      }
    // The rows' online softmax.
    float c[2];
    #pragma unroll
    for (int h = 0; h < 2; h++) {
      float mt = GC_NEG_INF;
      #pragma unroll
      for (int n = 0; n < KEYS / 8; n++)
        #pragma unroll
        for (int x = 0; x < 2; x++) {
          const float s = (seen >> (16 * h + 2 * n + x)) & 1u ? sc[n][2 * h + x] * scale : GC_NEG_INF;
          sc[n][2 * h + x] = s;
          mt = fmaxf(mt, s);
        }
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
      const float mn = fmaxf(m[h], mt);
      // Nothing visible yet: the row's sums stay zero.
      c[h] = mn == GC_NEG_INF ? 1.f : expf(m[h] - mn);
      float ps = 0.f;
      #pragma unroll
      for (int n = 0; n < KEYS / 8; n++)
        #pragma unroll
        for (int x = 0; x < 2; x++) {
          const float p = mn == GC_NEG_INF ? 0.f : expf(sc[n][2 * h + x] - mn);
          sc[n][2 * h + x] = p;
          ps += p;
        }
      sum[h] = sum[h] * c[h] + ps;
      m[h] = mn;
    }
    #pragma unroll
    for (int j = 0; j < EV / 8; j++) {
      o[j][0] *= c[0]; o[j][1] *= c[0];
      o[j][2] *= c[1]; o[j][3] *= c[1];
    }
    // Weighted values: step i is keys j0+16i..; P's A fragment is the
    // scores' C fragments of tiles 2i and 2i+1, split into hi + lo. One
    // ldmatrix.trans gives the B fragments of value tiles j and j+1.
    #pragma unroll
    for (int i = 0; i < KEYS / 16; i++) {
      unsigned pa[4], pl[4];
      gc_attn_split(sc[2 * i][0], sc[2 * i][1], pa[0], pl[0]);
      gc_attn_split(sc[2 * i][2], sc[2 * i][3], pa[1], pl[1]);
      gc_attn_split(sc[2 * i + 1][0], sc[2 * i + 1][1], pa[2], pl[2]);
      gc_attn_split(sc[2 * i + 1][2], sc[2 * i + 1][3], pa[3], pl[3]);
      #pragma unroll
      for (int j = 0; j < EV / 8; j += 2) {
        unsigned vf[4];
        gc_attn_ldsm<true>(vf, vsm + (16 * i + 8 * (mi & 1) + mr) * VP + 8 * (j + (mi >> 1)));
        gc_attn_mma(o[j], pl, vf[0], vf[1]);
        gc_attn_mma(o[j], pa, vf[0], vf[1]);
        gc_attn_mma(o[j + 1], pl, vf[2], vf[3]);
        gc_attn_mma(o[j + 1], pa, vf[2], vf[3]);
      }
    }
  }
  // The rows' sums over the four lanes that share them, then the rows.
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    const int r = wr + g + 8 * h;
    if (r < rows) {
      GC_ATTN_T* op = out + (((long long)b * Hkv * G + hk * G + r %% G) * L + r / G) * EV;
      // No visible key: zeros, as PyTorch's attention gives (its safe softmax).
      const float inv = sum[h] > 0.f ? 1.f / sum[h] : 0.f;
      #pragma unroll
      for (int j = 0; j < EV / 8; j++) {
        op[8 * j + 2 * t] = GC_ATTN_STORE(o[j][2 * h] * inv);
        op[8 * j + 2 * t + 1] = GC_ATTN_STORE(o[j][2 * h + 1] * inv);
      }
    }
  }
}
#undef KEYS
#undef KVEC
#undef VVEC
#undef KP
#undef VP
#undef E
#undef EV
#undef WARPS
#undef GC_NEG_INF
#undef GC_ATTN_T
#undef GC_ATTN_STORE
#undef GC_ATTN_MASK
#undef GC_ATTN_CAUSAL
#undef GC_ATTN_ST
#undef GC_ATTN_LD
`, k.Name())
	return b.String()
}
