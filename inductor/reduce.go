package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// ReduceKernel describes a single-op reduction kernel. A launch has one
// block per output element (grid.x) and, for long rows, several blocks per
// row (grid.y) that write partial accumulators; a second kernel (Final)
// then combines the partials. Short rows are reduced a warp each instead
// (warpRows). Values accumulate in Kind; max, min and the arg reductions
// carry the index of their value so that partial results merge to
// PyTorch's answer (the first index on ties, the first NaN wins), sums and
// means accumulate the value alone.
type ReduceKernel struct {
	Reducer ir.Reducer
	In      ir.DType
	Kind    ir.Kind
	Out     ir.DType
	// Unroll is how many vectors each thread loads per step over a
	// contiguous reduced range before it accumulates any (0:
	// DefaultReduceUnroll).
	Unroll int
	// TX > 0 selects the column kernel (see colSource): blocks of TX×TY
	// threads, Vec outputs a thread; Rows, its row form (see ColKernel).
	TX, TY, Vec int
	Rows        bool
	Col         ColShape // the column kernel's, from its geometry
}

// DefaultReduceUnroll is the Unroll of reductions that set none.
const DefaultReduceUnroll = 4

func (k *ReduceKernel) unroll() int {
	if k.Unroll > 0 {
		return k.Unroll
	}
	return DefaultReduceUnroll
}

// Name is the kernel's entry point; the final pass is Name()+"_final".
func (k *ReduceKernel) Name() string {
	name := fmt.Sprintf("gc_%v_%v_%v_to_%v", k.Reducer, k.In, k.Kind, k.Out)
	if k.unroll() != DefaultReduceUnroll {
		name += fmt.Sprintf("_u%d", k.unroll())
	}
	if k.TX > 0 {
		name += fmt.Sprintf("_col_x%dy%dv%d", k.TX, k.TY, k.Vec)
		if k.Rows {
			name += "r"
		}
		name += k.Col.suffix()
	}
	return name
}

// Block is the column form's block, x by y threads.
func (k *ReduceKernel) Block() (x, y int) { return colBlockDims(k.TX, k.TY, k.Rows) }

// AccBytes is the size of one partial accumulator.
func (k *ReduceKernel) AccBytes() int { return 16 }

// ReduceGeometry is the layout of a reduction's input: out index o and
// reduced index r address element offset(o over Outer) + offset(r over
// Inner). Passed by value as struct { long long orank, osize[8],
// ostride[8], rrank, rsize[8], rstride[8]; }.
type ReduceGeometry struct {
	OuterRank           int
	OuterSize, OuterStr [MaxRank]int64
	InnerRank           int
	InnerSize, InnerStr [MaxRank]int64
}

// Bytes encodes the geometry as the kernel parameter.
func (g *ReduceGeometry) Bytes() []byte {
	b := putInt64s(nil, int64(g.OuterRank))
	b = putInt64s(b, g.OuterSize[:]...)
	b = putInt64s(b, g.OuterStr[:]...)
	b = putInt64s(b, int64(g.InnerRank))
	b = putInt64s(b, g.InnerSize[:]...)
	return putInt64s(b, g.InnerStr[:]...)
}

// ReduceBlock is the number of threads per block of reduction kernels.
const ReduceBlock = 256

// WarpRowsPerBlock is the number of outputs a block reduces with warpRows
// set: one per warp.
const WarpRowsPerBlock = ReduceBlock / 32

// Source generates both kernels. Parameters of Name(): long long nOut,
// long long nRed, long long chunk (reduced elements per block), const In*
// x, Out* out, Acc* partial (used when gridDim.y > 1), int warpRows, and
// ReduceGeometry g. With warpRows 0 a block (grid.x = nOut) reduces one
// output's range, or its blockIdx.y-th chunk; with warpRows 1 (and
// gridDim.y 1) each warp reduces a whole output, WarpRowsPerBlock outputs
// per block. Parameters of the final pass: long long nOut, long long parts,
// long long nRed, const Acc* partial, Out* out (one block per output).
func (k *ReduceKernel) Source() string {
	if k.TX > 0 {
		return k.colSource()
	}
	return fmt.Sprintf("// gocompile eager kernel for reduction %q of %v, accumulating in %v\n",
		k.Reducer.String(), k.In, kindC(k.Kind)) + cudaPrelude + k.body()
}

// valueOnly reports whether the reduction accumulates values without
// their indices (sums and means).
func (k *ReduceKernel) valueOnly() bool { return k.Reducer == ir.RSum || k.Reducer == ir.RMean }

func (k *ReduceKernel) body() string {
	var b strings.Builder
	fmt.Fprintf(&b, `
struct ReduceGeometry {
  long long orank; long long osize[%[1]d]; long long ostride[%[1]d];
  long long rrank; long long rsize[%[1]d]; long long rstride[%[1]d];
};
`, MaxRank)
	b.WriteString(k.parts())
	k.rowBody(&b)
	return b.String()
}

// parts is the C of accumulators both forms share: struct Acc (a partial
// result, as written between passes), the reducer's merge, and Part, what
// a thread accumulates, with add (one element at an index) and add4 (a
// vector of four).
func (k *ReduceKernel) parts() string {
	K := kindC(k.Kind)
	In := storageC(k.In)
	ld := func(v string) string { return loadC(v, k.In, k.Kind) }
	var b strings.Builder
	fmt.Fprintf(&b, `
// Acc is a partial result, as written between the two passes.
struct __align__(16) Acc { %[1]s v; long long i; };  // i: index of v, -1 when empty

`, K)

	b.WriteString(k.Reducer.CMerge()) // the reducer's merge, as package ir defines it
	fmt.Fprintf(&b, `
__device__ __forceinline__ Acc shfl_down(Acc a, int d) {
  Acc r; r.v = __shfl_down_sync(0xffffffffu, a.v, d); r.i = __shfl_down_sync(0xffffffffu, a.i, d); return r;
}

`)
	// Part is what a thread accumulates; add folds in element v at index r,
	// add4 a vector of four at r, r+1, r+2, r+3.
	if k.valueOnly() {
		fmt.Fprintf(&b, `// A thread accumulates the plain sum: sums need no index.
typedef %[1]s Part;
__device__ __forceinline__ Part part_empty() { return 0; }
__device__ __forceinline__ Part part_merge(Part a, Part b) { return a + b; }
__device__ __forceinline__ Part part_shfl_down(Part a, int d) { return __shfl_down_sync(0xffffffffu, a, d); }
__device__ __forceinline__ Acc part_acc(Part a) { Acc e; e.v = a; e.i = 0; return e; }
__device__ __forceinline__ Part part_of(Acc a) { return a.v; }
__device__ __forceinline__ void add(Part& a, %[1]s v, long long r) { a += v; }
__device__ __forceinline__ void add4(Part& a, V4<%[2]s> t, long long r) {
  a += (%[3]s + %[4]s) + (%[5]s + %[6]s);
}
`, K, In, ld("t.v[0]"), ld("t.v[1]"), ld("t.v[2]"), ld("t.v[3]"))
	} else {
		fmt.Fprintf(&b, `// A thread accumulates a value with its index (see merge).
typedef Acc Part;
__device__ __forceinline__ Part part_empty() { Acc e; e.v = 0; e.i = -1; return e; }
__device__ __forceinline__ Part part_merge(Part a, Part b) { return merge(a, b); }
__device__ __forceinline__ Part part_shfl_down(Part a, int d) { return shfl_down(a, d); }
__device__ __forceinline__ Acc part_acc(Part a) { return a; }
__device__ __forceinline__ Part part_of(Acc a) { return a; }
__device__ __forceinline__ void add(Part& a, %[1]s v, long long r) { Acc e; e.v = v; e.i = r; a = merge(a, e); }
__device__ __forceinline__ void add4(Part& a, V4<%[2]s> t, long long r) {
  #pragma unroll
  for (int j = 0; j < 4; j++) add(a, %[3]s, r + j);
}
`, K, In, ld("t.v[j]"))
	}
	return b.String()
}

// rowBody writes the row form's kernels.
func (k *ReduceKernel) rowBody(b *strings.Builder) {
	In := storageC(k.In)
	ld := func(v string) string { return loadC(v, k.In, k.Kind) }
	b.WriteString(`
// warp_reduce leaves the merge of its warp's parts in lane 0.
__device__ __forceinline__ Part warp_reduce(Part a) {
  for (int d = 16; d > 0; d >>= 1) a = part_merge(a, part_shfl_down(a, d));
  return a;
}

// block_reduce leaves the merge of every thread's part in thread 0.
__device__ Part block_reduce(Part a) {
  __shared__ Part warps[32];
  a = warp_reduce(a);
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) warps[w] = a;
  __syncthreads();
  if (w == 0) {
    a = lane < (int)((blockDim.x + 31) >> 5) ? warps[lane] : part_empty();
    a = warp_reduce(a);
  }
  return a;
}

`)
	b.WriteString(k.finishC())

	u := k.unroll()
	fmt.Fprintf(b, `extern "C" __global__ void __launch_bounds__(%[1]d) %[2]s(
    long long nOut, long long nRed, long long chunk, const %[3]s* __restrict__ x,
    %[4]s* __restrict__ out, Acc* __restrict__ partial, int warpRows, ReduceGeometry g) {
  // The threads of a block (or, with warpRows, of a warp) share output o.
  const int t = warpRows ? (threadIdx.x & 31) : threadIdx.x;
  const int width = warpRows ? 32 : blockDim.x;
  const long long o = warpRows ? (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5) : blockIdx.x;
  if (o >= nOut) return;  // whole warps of the last warpRows block
  long long base = 0, rem = o;  // the offset of output o; o < nOut needs no division by the outermost size
  for (int d = (int)g.orank - 1; d > 0; d--) { base += (rem %% g.osize[d]) * g.ostride[d]; rem /= g.osize[d]; }
  if (g.orank > 0) base += rem * g.ostride[0];
  const long long r0 = (long long)blockIdx.y * chunk, r1 = min(nRed, r0 + chunk);
  Part a = part_empty();
  if (g.rrank == 1 && g.rstride[0] == 1) {
    // The reduced range is contiguous: the elements before the first one
    // aligned for vector access, then vectors of 4 (%[5]d per thread in
    // flight), then the last few elements.
    const %[3]s* p = x + base + r0;
    const long long len = r1 - r0;
    const long long head = min(len, (long long)((4 - (((unsigned long long)p / sizeof(%[3]s)) & 3)) & 3));
    if (t < head) add(a, %[6]s, r0 + t);
    const V4<%[3]s>* pv = (const V4<%[3]s>*)(p + head);
    const long long nv = (len - head) / 4;
    long long v = t;
    for (; v + (long long)(%[5]d - 1) * width < nv; v += (long long)%[5]d * width) {
      V4<%[3]s> q[%[5]d];
      #pragma unroll
      for (int u = 0; u < %[5]d; u++) q[u] = pv[v + (long long)u * width];
      #pragma unroll
      for (int u = 0; u < %[5]d; u++) add4(a, q[u], r0 + head + 4 * (v + (long long)u * width));
    }
    for (; v < nv; v += width) add4(a, pv[v], r0 + head + 4 * v);
    const long long tail = head + 4 * nv + t;
    if (tail < len) add(a, %[7]s, r0 + tail);
  } else {
    for (long long r = r0 + t; r < r1; r += width) {
      long long off = base, q = r;
      if (g.rrank == 1) {
        off += q * g.rstride[0];
      } else {
        for (int d = (int)g.rrank - 1; d >= 0; d--) { off += (q %% g.rsize[d]) * g.rstride[d]; q /= g.rsize[d]; }
      }
      add(a, %[8]s, r);
    }
  }
  if (warpRows) {
    a = warp_reduce(a);
    if (t == 0) out[o] = finish(part_acc(a), nRed);
    return;
  }
  a = block_reduce(a);
  if (threadIdx.x == 0) {
    if (gridDim.y == 1) out[o] = finish(part_acc(a), nRed);
    else partial[o * gridDim.y + blockIdx.y] = part_acc(a);
  }
}

`, ReduceBlock, k.Name(), In, storageC(k.Out), u, ld("p[t]"), ld("p[tail]"), ld("x[off]"))
	fmt.Fprintf(b, `// The final pass merges each output's partials.
extern "C" __global__ void __launch_bounds__(%[1]d) %[2]s_final(
    long long nOut, long long parts, long long nRed, const Acc* __restrict__ partial, %[3]s* __restrict__ out) {
  long long o = blockIdx.x;
  Part a = part_empty();
  for (long long p = threadIdx.x; p < parts; p += blockDim.x) a = part_merge(a, part_of(partial[o * parts + p]));
  a = block_reduce(a);
  if (threadIdx.x == 0) out[o] = finish(part_acc(a), nRed);
}
`, ReduceBlock, k.Name(), storageC(k.Out))
}

// finishC is the C function finish(Acc a, long long nRed) that turns an
// accumulator into the stored result.
func (k *ReduceKernel) finishC() string {
	result := "a.v"
	switch {
	case k.Reducer == ir.RMean:
		result = fmt.Sprintf("a.v / (%s)nRed", kindC(k.Kind))
	case k.Reducer.IsArg():
		result = "a.i"
	}
	resultKind := k.Kind
	if k.Reducer.IsArg() {
		resultKind = ir.I64
	}
	return fmt.Sprintf("__device__ __forceinline__ %s finish(Acc a, long long nRed) { return %s; }\n\n", storageC(k.Out),
		storeC(result, resultKind, k.Out))
}

// colSource generates the column form: blocks of TX×TY threads, each
// thread taking Vec adjacent outputs (see ColGeometry: operand 0 is the
// input, operand 1 the output) and walking the reduced range TY indices
// apart, UNROLL steps in flight. Parameters of Name(): long long nOut,
// long long nRed, long long chunk (the reduced indices of each of grid.y
// parts), const In* x, Out* out, Acc* partial (nOut per part; used when
// gridDim.y > 1), ColGeometry g. Grid: (ceil(nOut / (TX·Vec)), parts).
// The final pass Name()+"_final"(long long nOut, long long parts, long
// long nRed, const Acc* partial, Out* out, ColGeometry g) takes blocks of
// TX×TY threads, grid ceil(nOut / TX).
func (k *ReduceKernel) colSource() string {
	In := storageC(k.In)
	ld := func(v string) string { return loadC(v, k.In, k.Kind) }
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile eager column kernel for reduction %q of %v, accumulating in %v\n", k.Reducer.String(), k.In, kindC(k.Kind))
	b.WriteString(cudaPrelude)
	b.WriteString(colMacros(k.TX, k.TY, k.Vec, k.unroll(), k.Rows))
	shape, err := k.Col.macros()
	if err != nil {
		shape = fmt.Sprintf("#error \"%v\"\n", err) // Source has no error: NVRTC reports it
	}
	b.WriteString(shape)
	b.WriteString(colCommon(2, 1))
	b.WriteString(k.parts())
	b.WriteString("struct PartMerge { __device__ __forceinline__ Part operator()(Part a, Part b) const { return part_merge(a, b); } };\n\n")
	b.WriteString(k.finishC())
	// load reads steps [0, n) of a batch and folds them; with partial,
	// only the first left of them.
	load := func(n string, partial bool) string {
		when, stop := "", ""
		if partial {
			when, stop = "if (u < left) ", "        if (u >= left) break;\n"
		}
		if k.Vec > 1 {
			return fmt.Sprintf(`      VN<%[1]s, VEC> q[%[3]s];
      #pragma unroll
      for (int u = 0; u < %[3]s; u++) %[4]sq[u] = *(const VN<%[1]s, VEC>*)(px + off[u]);
      #pragma unroll
      for (int u = 0; u < %[3]s; u++) {
%[5]s        #pragma unroll
        for (int v = 0; v < VEC; v++) add(a[v], %[2]s, r + u * TY);
      }
`, In, ld("q[u].v[v]"), n, when, stop)
		}
		return fmt.Sprintf(`      %[1]s q[%[3]s];
      #pragma unroll
      for (int u = 0; u < %[3]s; u++) %[4]sq[u] = px[off[u]];
      #pragma unroll
      for (int u = 0; u < %[3]s; u++) {
%[5]s        add(a[0], %[2]s, r + u * TY);
      }
`, In, ld("q[u]"), n, when, stop)
	}
	fmt.Fprintf(&b, `extern "C" __global__ void __launch_bounds__(TX * TY) %[1]s(
    long long nOut, long long nRed, long long chunk, const %[2]s* __restrict__ x,
    %[3]s* __restrict__ out, Acc* __restrict__ partial, ColGeometry g) {
  // This thread's outputs: VEC of them from o0, over part blockIdx.y of
  // the reduced range.
  const idx_t o0 = ((idx_t)blockIdx.x * TX + T_OUT) * VEC;
  const bool live = o0 < nOut;
  idx_t kb[NOPS];
  col_kept(g, live ? o0 : 0, kb);
  const idx_t rlo = (idx_t)blockIdx.y * (idx_t)chunk, rhi = min((idx_t)nRed, rlo + (idx_t)chunk);
  Part a[VEC];
  #pragma unroll
  for (int v = 0; v < VEC; v++) a[v] = part_empty();
  if (live) {
    const %[2]s* px = x + kb[0];
    ColWalk w;
    w.seek(g, rlo + T_RED);
    idx_t r = rlo + T_RED;
    for (; r + (UNROLL - 1) * TY < rhi; r += UNROLL * TY) {
      idx_t off[UNROLL];
      #pragma unroll
      for (int u = 0; u < UNROLL; u++) { off[u] = w.off[0]; w.step(g); }
%[4]s    }
#if UNROLL > 1
    if (r < rhi) {  // the last steps, fewer than UNROLL, loaded together
      const int left = (int)((rhi - r + TY - 1) / TY);
      idx_t off[UNROLL - 1];
      #pragma unroll
      for (int u = 0; u < UNROLL - 1; u++) {
        if (u >= left) break;
        off[u] = w.off[0];
        w.step(g);
      }
%[5]s    }
#endif
  }
  #pragma unroll
  for (int v = 0; v < VEC; v++) a[v] = col_allreduce(a[v], PartMerge());
  if (live && T_RED == 0) {
    #pragma unroll
    for (int v = 0; v < VEC; v++) {
      if (gridDim.y == 1) out[kb[1] + v * (idx_t)g.kstride[1][KRANK - 1]] = finish(part_acc(a[v]), nRed);
      else partial[(long long)blockIdx.y * nOut + (long long)o0 + v] = part_acc(a[v]);
    }
  }
}

// The final pass merges each output's partials in a fixed order.
extern "C" __global__ void __launch_bounds__(TX * TY) %[1]s_final(
    long long nOut, long long parts, long long nRed, const Acc* __restrict__ partial, %[3]s* __restrict__ out, ColGeometry g) {
  const idx_t o = (idx_t)blockIdx.x * TX + T_OUT;
  Part a = part_empty();
  if (o < nOut)
    for (long long p = T_RED; p < parts; p += TY) a = part_merge(a, part_of(partial[p * nOut + (long long)o]));
  a = col_allreduce(a, PartMerge());
  if (o < nOut && T_RED == 0) {
    idx_t kb[NOPS];
    col_kept(g, o, kb);
    out[kb[1]] = finish(part_acc(a), nRed);
  }
}
`, k.Name(), In, storageC(k.Out), load("UNROLL", false), load("UNROLL - 1", true))
	return b.String()
}
