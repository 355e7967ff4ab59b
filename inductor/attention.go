package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// AttentionKernel is ScaledDotProductAttention for few queries against
// many keys (ir.OpAttention: a decode step against a KV cache), split
// along the keys ("flash decoding") in two entry points:
//
// Name()+"_part" runs a block of AttentionWarps warps for each split of
// the keys and each key head of each batch entry: it computes the scores
// of the key head's Rows query rows (its query heads times the queries)
// against the split's keys, keeps a running maximum and sum per row
// (online softmax, in float32) and the sum of the value rows weighted by
// them, and writes the split's maximum, sum and weighted values to a
// float32 workspace. Each warp takes 32 keys at a time, a key a lane, for
// the scores, and then the value rows a lane a feature, so value loads are
// coalesced; the warps then merge their partial sums in shared memory.
//
// Name()+"_combine" runs a block a row: it rescales the splits' sums to
// their common maximum, adds them in split order (results do not depend
// on timing) and stores the row's output. A row whose keys are all masked
// gets zeros, as PyTorch's attention and the math reference give.
//
// Both take the shapes as parameters; Rows, E and Ev are compile-time
// constants, so the rows' sums stay in registers.
type AttentionKernel struct {
	Elem   ir.DType // q, k, v and the output
	Rows   int      // query rows of a key head: query heads per key head × queries
	E, Ev  int      // features of q and k, of v
	Mask   bool     // a bool mask operand (broadcast by strides)
	Causal bool     // key j is visible to query l only where j <= l
}

// AttentionWarps is the warps of a _part block.
const AttentionWarps = 4

// Name is the kernels' common prefix.
func (k *AttentionKernel) Name() string {
	s := fmt.Sprintf("gc_attention_%v_r%d_e%d_v%d", k.Elem, k.Rows, k.E, k.Ev)
	if k.Mask {
		s += "_mask"
	}
	if k.Causal {
		s += "_causal"
	}
	return s
}

// ChooseAttentionSplits splits S keys for blocks key heads × batch entries
// on a device of sms multiprocessors: enough splits for two blocks a
// multiprocessor, each of at least 128 keys (four warps' worth of 32).
func ChooseAttentionSplits(S, blocks, sms int) (splits, keysPerSplit int) {
	splits = max(1, min((2*sms+blocks-1)/blocks, (S+127)/128))
	keysPerSplit = (S + splits - 1) / splits
	keysPerSplit = (keysPerSplit + 31) / 32 * 32
	splits = (S + keysPerSplit - 1) / keysPerSplit
	return splits, keysPerSplit
}

// Source generates both entry points. Parameters of _part: const T* q, k,
// v; long long strides of q [b, h, l, e], k [b, hk, s, e], v [b, hk, s,
// e], mask [b, h, l, s] (0 where broadcast; unused without Mask); const
// gc_bool* mask; int Hkv, G (query heads per key head), L, S, keysPerSplit;
// float scale; float* ws (per row and split: max, sum, then Ev weighted
// values). Of _combine: const float* ws; T* out (contiguous [B, Hq, L,
// Ev]); int Hkv, G, L, splits.
func (k *AttentionKernel) Source() string {
	t := storageC(k.Elem)
	load := func(v string) string { return loadC(v, k.Elem, ir.F32) }
	evPer := (k.Ev + 31) / 32
	mask, causal := "false", "false"
	if k.Mask {
		mask = "true"
	}
	if k.Causal {
		causal = "true"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile eager kernel: %s (ScaledDotProductAttention, few queries, keys split)\n%s", k.Name(), cudaPrelude)
	fmt.Fprintf(&b, `
#define ROWS %[2]d
#define E %[3]d
#define EV %[4]d
#define EVL %[5]d
#define WARPS %[6]d
#define WSROW (2 + EV)
#define GC_NEG_INF __int_as_float(0xff800000)

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

// Block (split, b·Hkv + hk): rows r = g·L + l are query head hk·G + g,
// query l, of batch entry b.
extern "C" __global__ void __launch_bounds__(WARPS * 32) %[1]s_part(
    const %[7]s* __restrict__ q, const %[7]s* __restrict__ k, const %[7]s* __restrict__ v, const gc_bool* __restrict__ mask,
    long long qb, long long qh, long long ql, long long qe,
    long long kb, long long kh, long long ks, long long ke,
    long long vb, long long vh, long long vs, long long ve,
    long long mb, long long mh, long long ml, long long ms,
    int Hkv, int G, int L, int S, int keysPerSplit, float scale, float* __restrict__ ws) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int split = blockIdx.x, bk = blockIdx.y, b = bk / Hkv, hk = bk %% Hkv;
  const int s0 = split * keysPerSplit, s1 = min(S, s0 + keysPerSplit);
  __shared__ float qs[ROWS * E];
  __shared__ float red[WARPS][ROWS][2 + EV];
  for (int i = threadIdx.x; i < ROWS * E; i += WARPS * 32) {
    const int r = i / E, e = i %% E, g = r / L, l = r %% L;
    qs[i] = r < G * L ? %[8]s * scale : 0.f;
  }
  __syncthreads();
  const %[7]s* kp = k + b * kb + hk * kh;
  const %[7]s* vp = v + b * vb + hk * vh;
  float m[ROWS], sum[ROWS], o[ROWS][EVL];
  #pragma unroll
  for (int r = 0; r < ROWS; r++) {
    m[r] = GC_NEG_INF;
    sum[r] = 0.f;
    #pragma unroll
    for (int i = 0; i < EVL; i++) o[r][i] = 0.f;
  }
  for (int j0 = s0 + 32 * w; j0 < s1; j0 += 32 * WARPS) {
    const int j = j0 + lane;
    const bool valid = j < s1;
    // Lane j's scores against every row.
    float sc[ROWS];
    #pragma unroll
    for (int r = 0; r < ROWS; r++) sc[r] = 0.f;
    if (valid) {
      for (int e = 0; e < E; e++) {
        const float kv = %[9]s;
        #pragma unroll
        for (int r = 0; r < ROWS; r++) sc[r] = fmaf(qs[r * E + e], kv, sc[r]);
      }
    }
    #pragma unroll
    for (int r = 0; r < ROWS; r++) {
      const int g = r / L, l = r %% L;
      bool keep = valid && r < G * L;
      if (%[10]s) keep = keep && j <= l;
      if (%[11]s) keep = keep && valid && mask[b * mb + (hk * G + g) * mh + l * ml + (long long)j * ms] != 0;
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
      for (int i = 0; i < EVL; i++) o[r][i] *= c;
    }
    // The value rows of these 32 keys, a lane a feature.
    const int n = min(32, s1 - j0);
    for (int jj = 0; jj < n; jj++) {
      float vv[EVL];
      #pragma unroll
      for (int i = 0; i < EVL; i++) {
        const int e = lane + 32 * i;
        vv[i] = e < EV ? %[12]s : 0.f;
      }
      #pragma unroll
      for (int r = 0; r < ROWS; r++) {
        const float p = __shfl_sync(0xffffffffu, sc[r], jj);
        #pragma unroll
        for (int i = 0; i < EVL; i++) o[r][i] = fmaf(p, vv[i], o[r][i]);
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
    for (int i = 0; i < EVL; i++) {
      const int e = lane + 32 * i;
      if (e < EV) red[w][r][2 + e] = o[r][i];
    }
  }
  __syncthreads();
  float* out = ws + ((long long)bk * ROWS * gridDim.x + split) * WSROW;
  for (int f = threadIdx.x; f < ROWS * (2 + EV); f += WARPS * 32) {
    const int r = f / (2 + EV), c = f %% (2 + EV);
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
    out[(long long)r * gridDim.x * WSROW + c] = acc;
  }
}

// Block b·Hkv·ROWS + hk·ROWS + r, a thread a feature.
extern "C" __global__ void %[1]s_combine(const float* __restrict__ ws, %[7]s* __restrict__ out, int Hkv, int G, int L, int splits) {
  const int row = blockIdx.x, r = row %% ROWS, bk = row / ROWS, b = bk / Hkv, hk = bk %% Hkv;
  if (r >= G * L) return;
  const int g = r / L, l = r %% L;
  const float* p = ws + (long long)row * splits * WSROW;
  float mx = GC_NEG_INF;
  for (int s = 0; s < splits; s++) mx = fmaxf(mx, p[s * WSROW]);
  float total = 0.f;
  for (int s = 0; s < splits; s++) {
    const float ms = p[s * WSROW];
    if (ms != GC_NEG_INF) total += p[s * WSROW + 1] * expf(ms - mx);
  }
  %[7]s* o = out + (((long long)b * Hkv * G + hk * G + g) * L + l) * EV;
  for (int e = threadIdx.x; e < EV; e += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < splits; s++) {
      const float ms = p[s * WSROW];
      if (ms != GC_NEG_INF) acc += p[s * WSROW + 2 + e] * expf(ms - mx);
    }
    // No visible key: zeros, as PyTorch's attention gives (its safe softmax).
    o[e] = %[13]s;
  }
}
#undef ROWS
#undef E
#undef EV
#undef EVL
#undef WARPS
#undef WSROW
#undef GC_NEG_INF
`, k.Name(), k.Rows, k.E, k.Ev, evPer, AttentionWarps, t,
		load("q[b * qb + (hk * G + g) * qh + l * ql + e * qe]"),
		load("kp[(long long)j * ks + e * ke]"),
		causal, mask,
		load("vp[(long long)(j0 + jj) * vs + e * ve]"),
		storeC("total > 0.f ? acc / total : 0.f", ir.F32, k.Elem))
	return b.String()
}
