package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// AttentionKernel is ScaledDotProductAttention for few queries against
// many keys (ir.OpAttention: a decode step against a KV cache), split
// along the keys ("flash decoding") into blocks of Warps warps, one for
// each split of the keys and each key head of each batch entry.
//
// A block computes the scores of the key head's Rows query rows (its query
// heads times the queries) against the split's keys, keeps a running
// maximum and sum per row (online softmax, in float32) and the sum of the
// value rows weighted by them. Each warp takes 32 keys at a time, a key a
// lane for the scores and two features a lane for the values, and issues
// every load of those 32 keys' key and value rows before it uses the first,
// so a chunk costs one trip to memory however long its rows (16-byte
// loads where the rows are contiguous and aligned). The warps then merge
// their sums in shared memory and write the split's maximum, sum and
// weighted values to a float32 workspace.
//
// The last block of a key head to finish (a counter per key head, left
// zero) combines the splits: it rescales their sums to the common maximum,
// adds them in split order (results do not depend on timing) and stores
// the rows. A row whose keys are all masked gets zeros, as PyTorch's
// attention and the math reference give. One launch, no second kernel.
//
// The shapes are parameters; Rows, E and Ev are compile-time constants,
// so the rows' sums stay in registers.
type AttentionKernel struct {
	Elem   ir.DType // q, k, v and the output
	Rows   int      // query rows of a key head: query heads per key head × queries
	E, Ev  int      // features of q and k, of v
	Mask   bool     // a bool mask operand (broadcast by strides)
	Causal bool     // key j is visible to query l only where j <= l
	// MMA computes the scores and the weighted values with tensor-core
	// MMAs (sm_80 and later, where AttentionMMAFits): a warp's 32-key chunk
	// is 32 MMAs instead of thousands of scalar instructions.
	MMA bool
}

// AttentionMMAFits reports whether the tensor-core kernel computes
// attention of elem operands with rows query rows a key head (one
// 16-row MMA tile), e key features (whole 16-wide MMA steps) and ev value
// features (whole 8-wide MMA tiles).
func AttentionMMAFits(elem ir.DType, rows, e, ev int) bool {
	// Up to 128 features each, a warp's fragments of a 32-key chunk fit in
	// registers.
	return (elem == ir.BFloat16 || elem == ir.Float16) && rows <= 16 && e%16 == 0 && ev%8 == 0 && e <= 128 && ev <= 128
}

// AttentionWarps is the warps of a block of the scalar kernel, and of
// the tensor-core kernel where eight warps' partial rows do not fit in
// shared memory (see Warps).
const AttentionWarps = 4

// Warps is the warps of k's blocks. A block takes 128 keys of a split at a
// time: the scalar kernel's four warps 32 keys each; the tensor-core
// kernel's eight warps 16 keys each (two MMA column tiles), since one warp
// a scheduler leaves a chunk's dependent instructions waiting on each
// other, where two interleave, unless its partial rows overflow 48 KB of
// shared memory (then four warps of 32 keys).
func (k *AttentionKernel) Warps() int {
	if k.MMA && 8*k.Rows*(2+k.Ev)*4 <= 48<<10 {
		return 8
	}
	return AttentionWarps
}

// Name is the kernel's entry point.
func (k *AttentionKernel) Name() string {
	s := fmt.Sprintf("gc_attention_%v_r%d_e%d_v%d", k.Elem, k.Rows, k.E, k.Ev)
	if k.Mask {
		s += "_mask"
	}
	if k.Causal {
		s += "_causal"
	}
	if k.MMA {
		s += "_mma"
	}
	return s
}

// ChooseAttentionSplits splits S keys for blocks key heads × batch entries
// on a device of sms multiprocessors: enough splits for two blocks a
// multiprocessor, each of at least minKeys keys (a multiple of 32; 128
// gives a 32-key chunk to each of a block's four warps).
func ChooseAttentionSplits(S, blocks, sms, minKeys int) (splits, keysPerSplit int) {
	minKeys = max(32, minKeys/32*32)
	splits = max(1, min((2*sms+blocks-1)/blocks, (S+minKeys-1)/minKeys))
	keysPerSplit = (S + splits - 1) / splits
	keysPerSplit = (keysPerSplit + 31) / 32 * 32
	splits = (S + keysPerSplit - 1) / keysPerSplit
	return splits, keysPerSplit
}

// AttentionVector is how many elements of t one vector load of a key row
// reads (16 bytes).
func AttentionVector(t ir.DType) int { return 16 / t.Size() }

// Source generates the kernel. Its parameters: const T* q, k, v; long
// long strides of q [b, h, l, e], k [b, hk, s, e], v [b, hk, s, e], mask
// [b, h, l, s] (0 where broadcast; unused without Mask); const gc_bool*
// mask; int Hkv, G (query heads per key head), L, S, keysPerSplit; float
// scale; int vecK (key rows are contiguous and 16-byte aligned, E a
// multiple of AttentionVector), vecV (value rows contiguous and their
// pairs aligned, Ev even; for the MMA kernel, rows 16-byte aligned and
// Ev a multiple of 16); float* ws (per row and split: max, sum, then Ev
// weighted values); unsigned* counters (B·Hkv, zero); T* out (contiguous
// [B, Hq, L, Ev]).
func (k *AttentionKernel) Source() string {
	if k.MMA {
		return k.mmaSource()
	}
	load := func(v string) string { return loadC(v, k.Elem, ir.F32) }
	// Key rows are read in pieces of ke features (whole vectors), all of
	// a piece's loads at once, and value rows vb at a time: what fits in
	// registers beside the rows' sums.
	vw, evg := AttentionVector(k.Elem), (k.Ev+63)/64
	ke := min(k.E, 64)
	kvec := "false"
	if k.E%vw == 0 {
		// Whole vectors that divide E: the vector path checks no bounds.
		kvec = "vecK"
		for ke = min(k.E, 64/vw*vw); k.E%ke != 0; ke -= vw {
		}
	}
	var b strings.Builder
	k.prologue(&b, "")
	fmt.Fprintf(&b, `#define EVG %[2]d
#define VW %[8]d
#define KE %[12]d
#define VB %[13]d

// gc_attn_values loads two features a lane (2·lane + 64i) of the value
// rows j0.. j0+VB-1 (rows past s1 read the last one, weighted by zero).
__device__ __forceinline__ void gc_attn_values(float (&vv)[VB][2 * EVG], const GC_ATTN_T* __restrict__ vp, long long vs, long long ve,
                                               int j0, int s1, int lane, int vecV) {
  #pragma unroll
  for (int jj = 0; jj < VB; jj++) {
    const long long row = (long long)min(j0 + jj, s1 - 1) * vs;
    #pragma unroll
    for (int i = 0; i < EVG; i++) {
      const int e = 2 * lane + 64 * i;
      if (vecV && e < EV) {
        const VN<GC_ATTN_T, 2> x = *(const VN<GC_ATTN_T, 2>*)(vp + row + e);
        vv[jj][2 * i] = %[10]s;
        vv[jj][2 * i + 1] = %[11]s;
      } else {
        vv[jj][2 * i] = e < EV ? %[6]s : 0.f;
        vv[jj][2 * i + 1] = e + 1 < EV ? %[7]s : 0.f;
      }
    }
  }
}

// Block (split, b·Hkv + hk): rows r = g·L + l are query head hk·G + g,
// query l, of batch entry b.
extern "C" __global__ void __launch_bounds__(WARPS * 32) %[1]s(`+attentionParams+`) {
  gc_dependent_entry();
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int split = blockIdx.x, splits = gridDim.x, bk = blockIdx.y, b = bk / Hkv, hk = bk %% Hkv;
  const int s0 = split * keysPerSplit, s1 = min(S, s0 + keysPerSplit);
  __shared__ float qs[ROWS * E];
  __shared__ float red[WARPS][ROWS][2 + EV];
  __shared__ bool last;
  for (int i = threadIdx.x; i < ROWS * E; i += WARPS * 32) {
    const int r = i / E, e = i %% E, g = r / L, l = r %% L;
    qs[i] = r < G * L ? %[3]s * scale : 0.f;
  }
  __syncthreads();
  const GC_ATTN_T* kp = k + b * kb + hk * kh;
  const GC_ATTN_T* vp = v + b * vb + hk * vh;
  float m[ROWS], sum[ROWS], o[ROWS][2 * EVG];
  #pragma unroll
  for (int r = 0; r < ROWS; r++) {
    m[r] = GC_NEG_INF;
    sum[r] = 0.f;
    #pragma unroll
    for (int i = 0; i < 2 * EVG; i++) o[r][i] = 0.f;
  }
  for (int j0 = s0 + 32 * w; j0 < s1; j0 += 32 * WARPS) {
    const int j = j0 + lane, n = min(32, s1 - j0);
    const bool valid = j < s1;
    const long long jr = valid ? j : s1 - 1; // rows past the end read the last one
    // Every load of the chunk first: lane j's key row (in pieces of KE
    // features where rows are long), then two features a lane of the
    // chunk's first VB value rows.
    float vv[VB][2 * EVG];
    gc_attn_values(vv, vp, vs, ve, j0, s1, lane, vecV);
    float sc[ROWS];
    #pragma unroll
    for (int r = 0; r < ROWS; r++) sc[r] = 0.f;
    #pragma unroll 1
    for (int e0 = 0; e0 < E; e0 += KE) {
      float kr[KE];
      if (%[9]s) {
        #pragma unroll
        for (int c = 0; c < KE / VW; c++) {
          const VN<GC_ATTN_T, VW> x = *(const VN<GC_ATTN_T, VW>*)(kp + jr * ks + e0 + c * VW);
          #pragma unroll
          for (int i = 0; i < VW; i++) kr[c * VW + i] = %[4]s;
        }
      } else {
        #pragma unroll
        for (int e = 0; e < KE; e++) kr[e] = e0 + e < E ? %[5]s : 0.f;
      }
      #pragma unroll
      for (int r = 0; r < ROWS; r++) {
        #pragma unroll
        for (int e = 0; e < KE; e++) sc[r] = fmaf(e0 + e < E ? qs[r * E + e0 + e] : 0.f, kr[e], sc[r]);
      }
    }
    // The rows' online softmax.
    #pragma unroll
    for (int r = 0; r < ROWS; r++) {
      const int g = r / L, l = r %% L;
      bool keep = valid && r < G * L;
      if (GC_ATTN_CAUSAL) keep = keep && j <= l;
      if (GC_ATTN_MASK) keep = keep && mask[b * mb + (hk * G + g) * mh + l * ml + (long long)jr * ms] != 0;
      const float s = keep ? sc[r] : GC_NEG_INF;
      const float mt = gc_attn_max(s);
      const float mn = fmaxf(m[r], mt);
      // Nothing visible yet: the row's sums stay zero.
      const float c = mn == GC_NEG_INF ? 1.f : expf(m[r] - mn);
      const float p = mn == GC_NEG_INF ? 0.f : expf(s - mn);
      sum[r] = sum[r] * c + gc_attn_sum(p);
      m[r] = mn;
      sc[r] = p;
      #pragma unroll
      for (int i = 0; i < 2 * EVG; i++) o[r][i] *= c;
    }
    // The chunk's value rows weighted by the scores, a key at a time, VB
    // rows loaded at once.
    #pragma unroll 1
    for (int jb = 0; jb < n; jb += VB) {
      if (jb > 0) gc_attn_values(vv, vp, vs, ve, j0 + jb, s1, lane, vecV);
      #pragma unroll
      for (int jj = 0; jj < VB; jj++) {
        if (jb + jj < n) {
          #pragma unroll
          for (int r = 0; r < ROWS; r++) {
            const float p = __shfl_sync(0xffffffffu, sc[r], jb + jj);
            #pragma unroll
            for (int i = 0; i < 2 * EVG; i++) o[r][i] = fmaf(p, vv[jj][i], o[r][i]);
          }
        }
      }
    }
  }
  // Merge the warps: rescale each to the block's maximum, add in order.
  #pragma unroll
  for (int r = 0; r < ROWS; r++) {
    if (lane == 0) {
      red[w][r][0] = m[r];
      red[w][r][1] = sum[r];
    }
    #pragma unroll
    for (int i = 0; i < 2 * EVG; i++) {
      const int e = 2 * lane + 64 * (i / 2) + i %% 2;
      if (e < EV) red[w][r][2 + e] = o[r][i];
    }
  }
%[14]s#undef EVG
#undef VW
#undef KE
#undef VB
%[15]s`, k.Name(), evg,
		load("q[b * qb + (hk * G + g) * qh + l * ql + e * qe]"),
		load("x.v[i]"),
		load("kp[jr * ks + (e0 + e) * ke]"),
		load("vp[row + e * ve]"),
		load("vp[row + (e + 1) * ve]"),
		vw, kvec,
		load("x.v[0]"), load("x.v[1]"),
		ke, max(4, 32/evg), attentionTail, attentionUndefs)
	return b.String()
}

// prologue writes what both kernels start with: the prelude, the shapes
// and flags as macros, the operand type and its store, and the warp sums.
func (k *AttentionKernel) prologue(b *strings.Builder, form string) {
	fmt.Fprintf(b, "// gocompile eager kernel: %s (ScaledDotProductAttention, few queries, keys split%s)\n%s", k.Name(), form, cudaPrelude)
	fmt.Fprintf(b, `
#define ROWS %d
#define E %d
#define EV %d
#define WARPS %d
#define WSROW (2 + EV)
#define GC_NEG_INF __int_as_float(0xff800000)
#define GC_ATTN_T %s
#define GC_ATTN_STORE(x) %s
#define GC_ATTN_MASK %t
#define GC_ATTN_CAUSAL %t
%s
`, k.Rows, k.E, k.Ev, k.Warps(), storageC(k.Elem), storeC("x", ir.F32, k.Elem), k.Mask, k.Causal, attentionWarpSums)
}

// attentionParams are both kernels' parameters (see Source).
const attentionParams = `
    const GC_ATTN_T* __restrict__ q, const GC_ATTN_T* __restrict__ k, const GC_ATTN_T* __restrict__ v, const gc_bool* __restrict__ mask,
    long long qb, long long qh, long long ql, long long qe,
    long long kb, long long kh, long long ks, long long ke,
    long long vb, long long vh, long long vs, long long ve,
    long long mb, long long mh, long long ml, long long ms,
    int Hkv, int G, int L, int S, int keysPerSplit, float scale, int vecK, int vecV,
    float* __restrict__ ws, unsigned int* __restrict__ counters, GC_ATTN_T* __restrict__ out`

// attentionUndefs ends both kernels' sources, so that sources compiled
// together do not see each other's macros.
const attentionUndefs = `#undef ROWS
#undef E
#undef EV
#undef WARPS
#undef WSROW
#undef GC_NEG_INF
#undef GC_ATTN_T
#undef GC_ATTN_STORE
#undef GC_ATTN_MASK
#undef GC_ATTN_CAUSAL
`

// attentionWarpSums are both kernels' warp-wide maximum and sum.
const attentionWarpSums = `
__device__ __forceinline__ float gc_attn_max(float v) {
  #pragma unroll
  for (int s = 16; s > 0; s >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, s));
  return v;
}
__device__ __forceinline__ float gc_attn_sum(float v) {
  #pragma unroll
  for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
  return v;
}
`

// attentionTail is both kernels' end, once red holds each warp's maximum,
// sum and weighted values per row: the block merges its warps (rescaled
// to the block's maximum, added in warp order) into its split's slot of
// the workspace, and the last block of the key head to finish combines
// the splits, a warp a row, adding in split order. Up to 32 splits (a
// decode step's) of up to 128 value features, a row's maxima, sums and
// values come in one trip to memory: the combine is the kernel's serial
// tail, one block a key head after every other has finished. Otherwise
// their maxima and sums in one pass of loads, then their weighted values
// 32 splits at a time.
const attentionTail = `  __syncthreads();
  float* part = ws + (long long)bk * ROWS * splits * WSROW;
  for (int f = threadIdx.x; f < ROWS * (2 + EV); f += WARPS * 32) {
    const int r = f / (2 + EV), c = f % (2 + EV);
    float mx = GC_NEG_INF;
    #pragma unroll
    for (int s = 0; s < WARPS; s++) mx = fmaxf(mx, red[s][r][0]);
    float acc = 0.f;
    if (c == 0) {
      acc = mx;
    } else {
      #pragma unroll
      for (int s = 0; s < WARPS; s++) {
        const float ms = red[s][r][0];
        if (ms != GC_NEG_INF) acc += red[s][r][c] * expf(ms - mx);
      }
    }
    part[((long long)r * splits + split) * WSROW + c] = acc;
  }
  // The last block of this key head to finish combines the splits.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counters + bk, 1u) == (unsigned int)splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) counters[bk] = 0u;
  for (int r = w; r < G * L; r += WARPS) {
    const int g = r / L, l = r % L;
    const float* p = part + (long long)r * splits * WSROW;
    GC_ATTN_T* o = out + (((long long)b * Hkv * G + hk * G + g) * L + l) * EV;
    if (splits <= 32 && EV <= 128) {
      // One trip to memory for the row: lane i's split's maximum and sum,
      // and every split's values of the lane's features (at most 4 a lane,
      // which registers hold); then added in split order, as below.
      const bool in = lane < splits;
      const float ms = in ? __ldcg(p + (long long)lane * WSROW) : GC_NEG_INF;
      const float ls = in ? __ldcg(p + (long long)lane * WSROW + 1) : 0.f;
      float vals[(EV + 31) / 32][32];
      #pragma unroll
      for (int q = 0; q < (EV + 31) / 32; q++)
        #pragma unroll
        for (int i = 0; i < 32; i++) vals[q][i] = i < splits ? __ldcg(p + (long long)i * WSROW + 2 + min(32 * q + lane, EV - 1)) : 0.f;
      const float mx = gc_attn_max(ms);
      const float wgt = ms != GC_NEG_INF ? expf(ms - mx) : 0.f;
      const float total = gc_attn_sum(ms != GC_NEG_INF ? ls * wgt : 0.f);
      #pragma unroll
      for (int q = 0; q < (EV + 31) / 32; q++) {
        float acc = 0.f;
        #pragma unroll
        for (int i = 0; i < 32; i++) {
          const float mi = __shfl_sync(0xffffffffu, ms, i), wi = __shfl_sync(0xffffffffu, wgt, i);
          if (i < splits && mi != GC_NEG_INF) acc += vals[q][i] * wi;
        }
        const int e = 32 * q + lane;
        if (e < EV) o[e] = GC_ATTN_STORE(total > 0.f ? acc / total : 0.f);
      }
      continue;
    }
    // The splits' maxima and sums, 32 at a time a lane each.
    float mx = GC_NEG_INF, total = 0.f;
    for (int c = 0; c < splits; c += 32) {
      const bool in = c + lane < splits;
      const float ms = in ? __ldcg(p + (long long)(c + lane) * WSROW) : GC_NEG_INF;
      const float ls = in ? __ldcg(p + (long long)(c + lane) * WSROW + 1) : 0.f;
      const float mn = fmaxf(mx, gc_attn_max(ms));
      total = total * (mx == GC_NEG_INF ? 1.f : expf(mx - mn)) + (ms != GC_NEG_INF ? ls * expf(ms - mn) : 0.f);
      mx = mn;
    }
    total = gc_attn_sum(total);
    for (int e0 = 0; e0 < EV; e0 += 32) {
      const int e = e0 + lane;
      float acc = 0.f;
      for (int c = 0; c < splits; c += 32) {
        const float ms = c + lane < splits ? __ldcg(p + (long long)(c + lane) * WSROW) : GC_NEG_INF;
        const float wgt = ms != GC_NEG_INF ? expf(ms - mx) : 0.f;
        const int n = min(32, splits - c);
        // All 32 splits' values first (one trip to memory), then added in
        // split order.
        float vals[32];
        #pragma unroll
        for (int i = 0; i < 32; i++) vals[i] = i < n ? __ldcg(p + (long long)(c + i) * WSROW + 2 + min(e, EV - 1)) : 0.f;
        #pragma unroll
        for (int i = 0; i < 32; i++) {
          const float mi = __shfl_sync(0xffffffffu, ms, i), wi = __shfl_sync(0xffffffffu, wgt, i);
          if (i < n && mi != GC_NEG_INF) acc += vals[i] * wi;
        }
      }
      // No visible key: zeros, as PyTorch's attention gives (its safe softmax).
      if (e < EV) o[e] = GC_ATTN_STORE(total > 0.f ? acc / total : 0.f);
    }
  }
}
`

// mmaSource is the tensor-core kernel, for operands AttentionMMAFits
// accepts. Its blocks, workspace and end are the scalar kernel's (with
// Warps warps); a warp computes a chunk of KC keys (16 or 32) as MMAs of
// m16n8k16 (16 rows, of which rows past ROWS are zero): the scores
// S = q·kᵀ as NT column tiles of 8 keys over E/16 steps, then the
// weighted values P·v as EV/8 column tiles over NT/2 steps of 16 keys, P
// split into two parts of the operands' type (about 16 bits of each
// weight for bfloat16, 22 for float16, where one part would keep 8 or
// 11). Lane (g, t) (g = lane/4, t = lane%4) holds rows g and g+8 of the
// fragments; q's fragments are loaded once, k's and v's in vector pieces
// where rows are contiguous and aligned, else element by element (any
// strides), every load of a chunk issued before its MMAs.
// The online softmax keeps each row's maximum uniform over the four lanes
// of a row, and each lane's share of the row's sum, added at the end.
func (k *AttentionKernel) mmaSource() string {
	var b strings.Builder
	k.prologue(&b, ", tensor-core MMAs")
	b.WriteString(attentionMMAHelpers(k.Elem))
	// VW16: the 32-bit words of a lane's piece of a value row with vector
	// value loads (EV/8 features), 0 where EV/8 is odd; VWN: at least 1.
	vw16 := 0
	if k.Ev%16 == 0 {
		vw16 = k.Ev / 16
	}
	fmt.Fprintf(&b, "#define VW16 %d\n#define VWN %d\n", vw16, max(1, vw16))
	// NT: a warp's chunk is NT column tiles of 8 keys, KC keys.
	nt := 128 / k.Warps() / 8
	fmt.Fprintf(&b, "#define NT %d\n#define KC %d\n", nt, 8*nt)
	fmt.Fprintf(&b, `
// Block (split, b·Hkv + hk): rows r = g·L + l are query head hk·G + g,
// query l, of batch entry b. Warp w takes the split's KC-key chunks w,
// w + WARPS, ...
extern "C" __global__ void __launch_bounds__(WARPS * 32) %[1]s(`+attentionParams+`) {
  gc_dependent_entry();
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, splits = gridDim.x, bk = blockIdx.y, b = bk / Hkv, hk = bk %% Hkv;
  const int s0 = split * keysPerSplit, s1 = min(S, s0 + keysPerSplit), rows = G * L;
  __shared__ float red[WARPS][ROWS][2 + EV];
  __shared__ bool last;
  const GC_ATTN_T* kp = k + b * kb + hk * kh;
  const GC_ATTN_T* vp = v + b * vb + hk * vh;
  const GC_ATTN_T zero = 0;
  // This lane's rows of the MMA tile: rr[0] = g, rr[1] = g + 8.
  const int rr[2] = {g, g + 8};
  // q's feature pairs are 32-bit words: contiguous features, even
  // strides, an aligned start.
  const bool qpair = qe == 1 && ((qb | qh | ql) & 1) == 0 && ((unsigned long long)q & 3) == 0;
  bool live[2];
  long long mrow[2];
  int lrow[2];
  // q's A fragments, once: step i's a0, a2 are row g's features 16i+2t
  // (and +1) and 16i+2t+8 (and +9); a1, a3 row g+8's.
  unsigned qa[E / 16][4];
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = rr[h];
    live[h] = r < rows;
    const int gq = live[h] ? r / L : 0, lq = live[h] ? r %% L : 0;
    lrow[h] = lq;
    mrow[h] = b * mb + (hk * G + gq) * mh + lq * ml;
    const GC_ATTN_T* qr = q + b * qb + (hk * G + gq) * qh + lq * ql;
    #pragma unroll
    for (int i = 0; i < E / 16; i++) {
      // With vector key loads step i's features are permuted (see below):
      // q follows the keys, as a dot product allows.
      const int e0 = vecK ? E / 4 * t + 4 * i : 16 * i + 2 * t, e1 = vecK ? e0 + 2 : e0 + 8;
      if (qpair) {
        // Whole pairs: loads whose values the first MMA waits for, so they
        // share a trip to memory with the keys'.
        qa[i][h] = live[h] ? *(const unsigned*)(qr + e0) : 0u;
        qa[i][2 + h] = live[h] ? *(const unsigned*)(qr + e1) : 0u;
      } else {
        qa[i][h] = live[h] ? gc_attn_pack(qr[e0 * qe], qr[(e0 + 1) * qe]) : 0u;
        qa[i][2 + h] = live[h] ? gc_attn_pack(qr[e1 * qe], qr[(e1 + 1) * qe]) : 0u;
      }
    }
  }
  float m[2] = {GC_NEG_INF, GC_NEG_INF}, sum[2] = {0.f, 0.f};
  float o[EV / 8][4];
  #pragma unroll
  for (int j = 0; j < EV / 8; j++)
    #pragma unroll
    for (int c = 0; c < 4; c++) o[j][c] = 0.f;
  for (int j0 = s0 + KC * w; j0 < s1; j0 += KC * WARPS) {
    // Every load of the chunk first, so it costs one trip to memory: the
    // B fragments of the scores (column tile n is keys j0+8n.., this lane
    // loading key j0+8n+g's features) and of the weighted values (step i
    // is keys j0+16i.., this lane loading keys 2t, 2t+1, 2t+8, 2t+9 of
    // feature 8j+g). Keys past the split's end read zero values.
    unsigned kf[NT][E / 16][2], vf[NT / 2][EV / 8][2];
    #pragma unroll
    for (int n = 0; n < NT; n++) {
      const GC_ATTN_T* kr = kp + (long long)min(j0 + 8 * n + g, s1 - 1) * ks;
      if (vecK) {
        // The lane's quarter of the key row in vector loads: features
        // E/4·t.. are the k positions of its fragments, step i's first
        // pair features E/4·t+4i.., its second E/4·t+4i+2...
        unsigned kw[E / 8];
        gc_attn_ldw<E / 8>(kr + E / 4 * t, kw);
        #pragma unroll
        for (int i = 0; i < E / 16; i++) {
          kf[n][i][0] = kw[2 * i];
          kf[n][i][1] = kw[2 * i + 1];
        }
        continue;
      }
      #pragma unroll
      for (int i = 0; i < E / 16; i++) {
        const int e = 16 * i + 2 * t;
        kf[n][i][0] = gc_attn_pack(kr[e * ke], kr[(e + 1) * ke]);
        kf[n][i][1] = gc_attn_pack(kr[(e + 8) * ke], kr[(e + 9) * ke]);
      }
    }
    #pragma unroll
    for (int i = 0; i < NT / 2 && VW16 && vecV; i++) {
      // Vector value loads: output column g of tile j is feature
      // EV/8·g + j, so the lane's columns are one piece of each row it
      // reads; pairs of keys are packed from the pieces' halves.
      const int key = j0 + 16 * i + 2 * t;
      unsigned vw[4][VWN];
      #pragma unroll
      for (int d = 0; d < 4; d++) {
        const int kd = key + (d & 1) + 8 * (d >> 1);
        gc_attn_ldw<VWN>(vp + (long long)min(kd, s1 - 1) * vs + EV / 8 * g, vw[d]);
        if (kd >= s1)
          #pragma unroll
          for (int x = 0; x < VWN; x++) vw[d][x] = 0u;
      }
      #pragma unroll
      for (int j = 0; j < EV / 8; j++) {
        const unsigned sel = j & 1 ? 0x7632u : 0x5410u;
        vf[i][j][0] = __byte_perm(vw[0][j / 2], vw[1][j / 2], sel);
        vf[i][j][1] = __byte_perm(vw[2][j / 2], vw[3][j / 2], sel);
      }
    }
    #pragma unroll
    for (int i = 0; i < NT / 2 && !(VW16 && vecV); i++) {
      const int key = j0 + 16 * i + 2 * t;
      const GC_ATTN_T* v0 = vp + (long long)min(key, s1 - 1) * vs;
      const GC_ATTN_T* v1 = vp + (long long)min(key + 1, s1 - 1) * vs;
      const GC_ATTN_T* v8 = vp + (long long)min(key + 8, s1 - 1) * vs;
      const GC_ATTN_T* v9 = vp + (long long)min(key + 9, s1 - 1) * vs;
      #pragma unroll
      for (int j = 0; j < EV / 8; j++) {
        const long long f = (long long)(8 * j + g) * ve;
        vf[i][j][0] = gc_attn_pack(key < s1 ? v0[f] : zero, key + 1 < s1 ? v1[f] : zero);
        vf[i][j][1] = gc_attn_pack(key + 8 < s1 ? v8[f] : zero, key + 9 < s1 ? v9[f] : zero);
      }
    }
    // The mask's entries of this lane's scores, loaded with the keys.
    bool mk[2][NT][2];
    #pragma unroll
    for (int h = 0; h < 2; h++)
      #pragma unroll
      for (int n = 0; n < NT; n++)
        #pragma unroll
        for (int x = 0; x < 2; x++)
          mk[h][n][x] = !GC_ATTN_MASK || !live[h] || mask[mrow[h] + (long long)min(j0 + 8 * n + 2 * t + x, s1 - 1) * ms] != 0;
    // Scores: this lane holds rows g, g+8 × keys 2t, 2t+1 of each tile.
    float sc[NT][4];
    #pragma unroll
    for (int n = 0; n < NT; n++) {
      #pragma unroll
      for (int c = 0; c < 4; c++) sc[n][c] = 0.f;
      #pragma unroll
      for (int i = 0; i < E / 16; i++) gc_attn_mma(sc[n], qa[i], kf[n][i][0], kf[n][i][1]);
    }
    // The rows' online softmax.
    float c[2];
    #pragma unroll
    for (int h = 0; h < 2; h++) {
      float mt = GC_NEG_INF;
      #pragma unroll
      for (int n = 0; n < NT; n++)
        #pragma unroll
        for (int x = 0; x < 2; x++) {
          const int key = j0 + 8 * n + 2 * t + x;
          bool keep = live[h] && key < s1;
          if (GC_ATTN_CAUSAL) keep = keep && key <= lrow[h];
          if (GC_ATTN_MASK) keep = keep && mk[h][n][x];
          const float s = keep ? sc[n][2 * h + x] * scale : GC_NEG_INF;
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
      for (int n = 0; n < NT; n++)
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
    // Weighted values: step i is keys j0+16i.. ; P's A fragment is the
    // scores' C fragments of tiles 2i and 2i+1, rounded to the operand type.
    #pragma unroll
    for (int i = 0; i < NT / 2; i++) {
      // P = hi + lo, both in the operand type: two MMAs keep about 16
      // (bfloat16) or 22 (float16) bits of each weight, one would keep 8 or 11.
      unsigned pa[4], pl[4];
      gc_attn_split(sc[2 * i][0], sc[2 * i][1], pa[0], pl[0]);
      gc_attn_split(sc[2 * i][2], sc[2 * i][3], pa[1], pl[1]);
      gc_attn_split(sc[2 * i + 1][0], sc[2 * i + 1][1], pa[2], pl[2]);
      gc_attn_split(sc[2 * i + 1][2], sc[2 * i + 1][3], pa[3], pl[3]);
      #pragma unroll
      for (int j = 0; j < EV / 8; j++) {
        gc_attn_mma(o[j], pl, vf[i][j][0], vf[i][j][1]);
        gc_attn_mma(o[j], pa, vf[i][j][0], vf[i][j][1]);
      }
    }
  }
  // The rows' sums over the four lanes that share them, then the warp's
  // maximum, sum and weighted values per row into shared memory.
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    const int r = rr[h];
    if (r < ROWS) {
      if (t == 0) {
        red[w][r][0] = m[h];
        red[w][r][1] = sum[h];
      }
      #pragma unroll
      for (int j = 0; j < EV / 8; j++) {
        // Columns 2t, 2t+1 of tile j: features 8j+2t, +1, or with vector
        // value loads EV/8·2t+j, EV/8·(2t+1)+j.
        const int f0 = VW16 && vecV ? EV / 8 * 2 * t + j : 8 * j + 2 * t, f1 = VW16 && vecV ? f0 + EV / 8 : f0 + 1;
        red[w][r][2 + f0] = o[j][2 * h];
        red[w][r][2 + f1] = o[j][2 * h + 1];
      }
    }
  }
%[2]s#undef GC_ATTN_ST
#undef GC_ATTN_LD
#undef VW16
#undef VWN
#undef NT
#undef KC
%[3]s`, k.Name(), attentionTail, attentionUndefs)
	return b.String()
}

// attentionMMAHelpers are the tensor-core kernels' conversions and MMA of
// elem operands (bfloat16 or float16) in float32.
func attentionMMAHelpers(elem ir.DType) string {
	mma := "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
	if elem == ir.Float16 {
		mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
	}
	return fmt.Sprintf(`#define GC_ATTN_ST(x) %[2]s
#define GC_ATTN_LD(x) %[3]s

// gc_attn_pack packs two 16-bit elements, lo the lower k (or column).
__device__ __forceinline__ unsigned gc_attn_pack(GC_ATTN_T lo, GC_ATTN_T hi) {
  return (unsigned)lo | ((unsigned)hi << 16);
}

// gc_attn_split packs x and y (lo the lower column) as hi, the operand
// type's rounding, and lo, the rounding of what hi leaves.
__device__ __forceinline__ void gc_attn_split(float x, float y, unsigned& hi, unsigned& lo) {
  const GC_ATTN_T xh = GC_ATTN_ST(x), yh = GC_ATTN_ST(y);
  hi = gc_attn_pack(xh, yh);
  lo = gc_attn_pack(GC_ATTN_ST(x - GC_ATTN_LD(xh)), GC_ATTN_ST(y - GC_ATTN_LD(yh)));
}

// gc_attn_ldw loads N 32-bit words from p, aligned to 4·N bytes, in the
// widest vector loads that divide them.
template <int N>
__device__ __forceinline__ void gc_attn_ldw(const GC_ATTN_T* p, unsigned (&w)[N]) {
  if (N %% 4 == 0) {
    #pragma unroll
    for (int i = 0; i < N / 4; i++) {
      const uint4 x = ((const uint4*)p)[i];
      w[4 * i] = x.x, w[4 * i + 1] = x.y, w[4 * i + 2] = x.z, w[4 * i + 3] = x.w;
    }
  } else if (N %% 2 == 0) {
    #pragma unroll
    for (int i = 0; i < N / 2; i++) {
      const uint2 x = ((const uint2*)p)[i];
      w[2 * i] = x.x, w[2 * i + 1] = x.y;
    }
  } else {
    #pragma unroll
    for (int i = 0; i < N; i++) w[i] = ((const unsigned*)p)[i];
  }
}

__device__ __forceinline__ void gc_attn_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("%[1]s {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, {%%8,%%9}, {%%0,%%1,%%2,%%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
`, mma, storeC("x", ir.F32, elem), loadC("x", elem, ir.F32))
}
