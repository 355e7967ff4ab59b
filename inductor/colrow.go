package inductor

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"strings"

	"gocompile/fuse"
	"gocompile/ir"
)

// Column kernels reduce over any set of dims. The full shape is split into
// kept dims (one output each) and reduced dims; a block of TX×TY threads
// takes TX·Vec adjacent outputs, thread (x, y) the Vec outputs from
// (blockIdx.x·TX + x)·Vec, and the threads of a column y walk the reduced
// range TY indices apart. When the kept dims hold the operands' stride-1
// dim (a reduction over dim 0 of a row-major matrix), adjacent threads read
// adjacent elements: loads coalesce. When the reduced dims hold it, the
// row form swaps the roles of x and y: a warp walks one output's range, as
// a row kernel does, and a block takes TX outputs. The threads of a column
// combine their parts through shared memory in a fixed tree, so results
// depend on the shape and launch only.

// ColGeometry is the layout of a column kernel's operands: the kept and
// reduced sizes (row-major, each at least one dim) and, per operand, its
// strides over both. Passed by value as struct { long long krank,
// ksize[8], rrank, rsize[8], kstride[n][8], rstride[n][8]; }.
type ColGeometry struct {
	KeptRank   int
	KeptSize   [MaxRank]int64
	RedRank    int
	RedSize    [MaxRank]int64
	KeptStride [][MaxRank]int64
	RedStride  [][MaxRank]int64
}

// Bytes encodes the geometry as the kernel parameter, followed by the
// magic numbers that divide by each size (Divisor; zero where a size
// passes 2^31, which only kernels without Index32 meet): unsigned
// kdiv[8][2], rdiv[8][2].
func (g *ColGeometry) Bytes() []byte {
	b := putInt64s(nil, int64(g.KeptRank))
	b = putInt64s(b, g.KeptSize[:]...)
	b = putInt64s(b, int64(g.RedRank))
	b = putInt64s(b, g.RedSize[:]...)
	for _, s := range g.KeptStride {
		b = putInt64s(b, s[:]...)
	}
	for _, s := range g.RedStride {
		b = putInt64s(b, s[:]...)
	}
	for _, sizes := range [][MaxRank]int64{g.KeptSize, g.RedSize} {
		for _, n := range sizes {
			var v Divisor
			if n >= 1 && n <= 1<<31 {
				v = NewDivisor(uint32(n))
			}
			b = binary.LittleEndian.AppendUint32(b, v.Magic)
			b = binary.LittleEndian.AppendUint32(b, v.Shift)
		}
	}
	return b
}

// ColShape is what a column kernel is specialized on besides its launch:
// the ranks of its kept and reduced dims, so that its index loops unroll,
// and whether its indices and offsets fit 32 bits (Index32), so that they
// take 32-bit arithmetic and divide by multiplying (Divisor). Without
// them a thread of a short range spends more on 64-bit divisions than on
// its loads.
type ColShape struct {
	KeptRank, RedRank int
	Index32           bool
}

// Shape is the ColShape of kernels over g with nOut outputs of nRed
// indices each.
func (g *ColGeometry) Shape(nOut, nRed int) ColShape {
	const limit = 1<<31 - 1<<20 // room for a block's overrun past the end
	fits := int64(nOut) < limit && 2*int64(nRed) < limit
	for i := range g.KeptStride {
		var reach int64 // the farthest element from the operand's start
		for d := range g.KeptRank {
			reach += (g.KeptSize[d] - 1) * max(g.KeptStride[i][d], -g.KeptStride[i][d])
		}
		for d := range g.RedRank {
			reach += (g.RedSize[d] - 1) * max(g.RedStride[i][d], -g.RedStride[i][d])
		}
		fits = fits && reach < limit
	}
	return ColShape{KeptRank: g.KeptRank, RedRank: g.RedRank, Index32: fits && colIndex32}
}

// colIndex32 is false with GOCOMPILE_COL_INDEX32=off: column kernels
// index in 64 bits whatever their shape (for measuring).
var colIndex32 = os.Getenv("GOCOMPILE_COL_INDEX32") != "off"

// macros defines the shape for colCommon.
func (s ColShape) macros() (string, error) {
	if s.KeptRank < 1 || s.KeptRank > MaxRank || s.RedRank < 1 || s.RedRank > MaxRank {
		return "", fmt.Errorf("column kernel of ranks %d and %d (set its ColShape from the geometry)", s.KeptRank, s.RedRank)
	}
	i32 := 0
	if s.Index32 {
		i32 = 1
	}
	return fmt.Sprintf("#define KRANK %d\n#define RRANK %d\n#define INDEX32 %d\n", s.KeptRank, s.RedRank, i32), nil
}

// suffix names the shape in a kernel's name.
func (s ColShape) suffix() string {
	if s.Index32 {
		return fmt.Sprintf("_k%dr%di", s.KeptRank, s.RedRank)
	}
	return fmt.Sprintf("_k%dr%d", s.KeptRank, s.RedRank)
}

// colMacros defines a column kernel's launch for the C of colCommon: its
// block of TX outputs by TY threads down each range, VEC outputs a thread,
// UNROLL steps in flight, and the form (ROWS).
func colMacros(tx, ty, vec, unroll int, rows bool) string {
	r := 0
	if rows {
		r = 1
	}
	return fmt.Sprintf("\n#define TX %d\n#define TY %d\n#define VEC %d\n#define UNROLL %d\n#define ROWS %d\n", tx, ty, vec, unroll, r)
}

// colBlockDims is the block of a column kernel launch of tx outputs by ty
// threads down each range: the row form puts the range's threads along x
// (see T_OUT and T_RED in colCommon).
func colBlockDims(tx, ty int, rows bool) (x, y int) {
	if rows {
		return ty, tx
	}
	return tx, ty
}

// Block is the kernel's block, x by y threads.
func (k *ColKernel) Block() (x, y int) { return colBlockDims(k.TX, k.TY, k.Rows) }

// colCommon is the C both column kernels share, for nops operands of which
// the first nwalk are read along the reduced dims: the geometry, the kept
// offsets of an output, the walk over the reduced range, and the combine
// of a column's parts. TX, TY and VEC are macros of the kernel.
func colCommon(nops, nwalk int) string {
	return divisorC + fmt.Sprintf(`
#define NOPS %d
#define NWALK %d
// A block's T_OUT threads take adjacent outputs and its T_RED threads
// share a range. The column form has them along x and y; the row form
// (ROWS 1) swaps them, so that a warp walks one output's range.
#if ROWS
#define T_OUT threadIdx.y
#define T_RED threadIdx.x
#else
#define T_OUT threadIdx.x
#define T_RED threadIdx.y
#endif
#if INDEX32
typedef int idx_t;  // every index and offset fits (ColShape.Index32)
#else
typedef long long idx_t;
#endif
struct ColGeometry {
  long long krank; long long ksize[%[3]d];
  long long rrank; long long rsize[%[3]d];
  long long kstride[NOPS][%[3]d];
  long long rstride[NOPS][%[3]d];
  unsigned kdiv[%[3]d][2], rdiv[%[3]d][2];  // magic numbers and shifts of the sizes
};

// col_div is n / size, with size's magic number where indices fit 32 bits.
__device__ __forceinline__ idx_t col_div(idx_t n, long long size, const unsigned* m) {
#if INDEX32
  return (idx_t)gc_div((unsigned)n, m[0], m[1]);
#else
  return n / size;
#endif
}

// col_split adds to off[i] (i < N) operand i's offset of index q split
// over dims top..0 (top innermost) of the sizes size, with their magic
// numbers div and the operands' strides stride.
template <int N> __device__ __forceinline__ void col_split(idx_t q, int top, const long long* size,
    const unsigned (*div)[2], const long long (*stride)[%[3]d], idx_t* off) {
  #pragma unroll
  for (int d = top; d > 0; d--) {
    const idx_t p = col_div(q, size[d], div[d]);
    const idx_t c = q - p * (idx_t)size[d];
    q = p;
    #pragma unroll
    for (int i = 0; i < N; i++) off[i] += c * (idx_t)stride[i][d];
  }
  #pragma unroll
  for (int i = 0; i < N; i++) off[i] += q * (idx_t)stride[i][0];
}

// col_kept sets kb[i] to operand i's offset of kept index o.
__device__ __forceinline__ void col_kept(const ColGeometry& g, idx_t o, idx_t* kb) {
  #pragma unroll
  for (int i = 0; i < NOPS; i++) kb[i] = 0;
  col_split<NOPS>(o, KRANK - 1, g.ksize, g.kdiv, g.kstride, kb);
}

// ColWalk steps through the reduced range TY indices at a time and keeps
// the offset of the current index in each walked operand; it divides only
// when a step leaves the innermost reduced dim.
struct ColWalk {
  idx_t ri, rq, off[NWALK];
  __device__ __forceinline__ void seek(const ColGeometry& g, idx_t r) {
    rq = col_div(r, g.rsize[RRANK - 1], g.rdiv[RRANK - 1]);
    ri = r - rq * (idx_t)g.rsize[RRANK - 1];
    outer(g);
  }
  __device__ __forceinline__ void outer(const ColGeometry& g) {
    const int L = RRANK - 1;
    #pragma unroll
    for (int i = 0; i < NWALK; i++) off[i] = ri * (idx_t)g.rstride[i][L];
    if (L > 0) col_split<NWALK>(rq, L - 1, g.rsize, g.rdiv, g.rstride, off);
  }
  __device__ __forceinline__ void step(const ColGeometry& g) {
    const int L = RRANK - 1;
    const idx_t n = (idx_t)g.rsize[L];
    ri += TY;
    if (ri < n) {
      #pragma unroll
      for (int i = 0; i < NWALK; i++) off[i] += TY * (idx_t)g.rstride[i][L];
      return;
    }
    if (ri < 2 * n) {  // into the next run: no division
      ri -= n;
      rq++;
    } else {
      const idx_t q = col_div(ri, g.rsize[L], g.rdiv[L]);
      rq += q;
      ri -= q * n;
    }
    outer(g);
  }
};

// col_allreduce combines the parts of the TY threads of a column with c,
// in a fixed tree, and gives every one of them the result. Every thread of
// the block must call it.
template <typename T, typename C> __device__ __forceinline__ T col_allreduce(T v, C c) {
  if (TY == 1) return v;
  __shared__ T part[TY][TX];
  part[T_RED][T_OUT] = v;
  __syncthreads();
  #pragma unroll
  for (int s = TY / 2; s > 0; s >>= 1) {
    if (T_RED < s) part[T_RED][T_OUT] = c(part[T_RED][T_OUT], part[T_RED + s][T_OUT]);
    __syncthreads();
  }
  v = part[0][T_OUT];
  __syncthreads();
  return v;
}
`, nops, nwalk, MaxRank)
}

// ColAccess says how a column kernel reads an input.
type ColAccess uint8

const (
	// ColVec inputs hold a thread's Vec outputs next to each other
	// (innermost kept stride 1, aligned): one vector load per step.
	ColVec ColAccess = iota
	// ColStrided inputs are read an element at a time at their strides.
	ColStrided
	// ColUniform inputs hold one value per output (reduced strides 0):
	// read once.
	ColUniform
)

// ColUnroll is how many steps of the reduced range a column kernel loads
// before it folds any.
const ColUnroll = 4

// ColKernel is a fused row region (fuse.Row) that reduces over dims other
// than the last alone (Row.Dims), generated as a column kernel: the
// region's stages and root are Row's (see RowKernel), run per output
// column. Operands are the inputs, then the output; a root computed per
// element (Row.Expr set) is written along the reduced dims too.
type ColKernel struct {
	Row    RowKernel   // inputs, stages and root; its launch fields are unused
	Access []ColAccess // per input
	Shape  ColShape    // from the geometry (ColGeometry.Shape)
	TX, TY int         // threads per block: TX outputs (powers of two)
	Vec    int         // outputs per thread: 1, or 2, 4 or 8 with ColVec inputs
	// Rows is the row form, for inputs that are contiguous along the
	// reduced dims: a block's TY threads of an output are its x threads
	// (a warp walks one output's range) and the launch's block is TY×TX.
	Rows bool
	// Split makes each of grid.y blocks of a column reduce a chunk of the
	// reduced range into partial accumulators (CanSplit regions), combined
	// by Name()+"_final".
	Split bool
}

// NewColKernel is the column kernel of the row region r.
func NewColKernel(r *fuse.Region) *ColKernel {
	return &ColKernel{Row: *NewRowKernel(r)}
}

// Name is the kernel's entry point, unique for its configuration.
func (k *ColKernel) Name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gc_col_%s", k.Row.Label)
	for i, in := range k.Row.Inputs {
		fmt.Fprintf(&b, "_%s%c%s", in.DType, "vsu"[k.access(i)], in.Kind)
	}
	fmt.Fprintf(&b, "_%s_to_%s_x%dy%dv%d%s", k.Row.Compute, k.Row.Out, k.TX, k.TY, k.Vec, k.Shape.suffix())
	if k.Rows {
		b.WriteString("r")
	}
	if k.Split {
		b.WriteString("_split")
	}
	return b.String()
}

func (k *ColKernel) access(i int) ColAccess {
	if i < len(k.Access) {
		return k.Access[i]
	}
	return ColStrided
}

// Source generates the kernel's CUDA C. Parameters: long long nOut, long
// long nRed, [long long chunk (Split)], one const pointer per input, the
// output, [the partial accumulators, nOut per part (Split)], ColGeometry g
// over the inputs and the output. Launch with blocks of (TX, TY) threads,
// grid (ceil(nOut / (TX·Vec)), parts). A Split kernel is followed by
// Name()+"_final"(long long nOut, long long parts, long long nRed, partial,
// out, g) with blocks of (TX, TY) and grid ceil(nOut / TX).
func (k *ColKernel) Source() (string, error) {
	body, err := k.body()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("// gocompile fused column kernel %s: %s\n", k.Row.Label, k.Row.Doc) + fast16(k.Row.Out) + cudaPrelude + body, nil
}

func (k *ColKernel) body() (string, error) {
	row := &k.Row
	nIn := len(row.Inputs)
	if k.Vec != 1 && k.Vec != 2 && k.Vec != 4 && k.Vec != 8 || k.TX < 1 || k.TY < 1 || k.TX&(k.TX-1) != 0 || k.TY&(k.TY-1) != 0 {
		return "", fmt.Errorf("column kernel %s: launch %dx%d, vector %d", row.Label, k.TX, k.TY, k.Vec)
	}
	if k.Split && !row.CanSplit() {
		return "", fmt.Errorf("column kernel %s: only a lone reduction splits", row.Label)
	}
	fullOut := row.Expr != nil
	nwalk := nIn
	if fullOut {
		nwalk++
	}
	kinds := row.leafKinds()
	outIdx := nIn // the output's operand index
	outType := storageC(row.Out)
	var b strings.Builder
	shape, err := k.Shape.macros()
	if err != nil {
		return "", fmt.Errorf("column kernel %s: %w", row.Label, err)
	}
	b.WriteString(colMacros(k.TX, k.TY, k.Vec, ColUnroll, k.Rows))
	b.WriteString(shape)
	b.WriteString(colCommon(nIn+1, max(nwalk, 1)))
	b.WriteString(stageCombines(row.Stages))

	params := []string{"long long nOut", "long long nRed"}
	if k.Split {
		params = append(params, "long long chunk")
	}
	for i, in := range row.Inputs {
		params = append(params, fmt.Sprintf("const %s* __restrict__ x%d", storageC(in.DType), i))
	}
	params = append(params, fmt.Sprintf("%s* __restrict__ out", outType))
	if k.Split {
		params = append(params, fmt.Sprintf("%s* __restrict__ partial", kindC(row.Stages[0].Compute)))
	}
	params = append(params, "ColGeometry g")
	fmt.Fprintf(&b, "\nextern \"C\" __global__ void __launch_bounds__(TX * TY) %s(\n    %s) {\n  gc_dependent_entry();\n", k.Name(), strings.Join(params, ",\n    "))
	b.WriteString(`  // This thread's outputs: VEC of them from o0.
  const idx_t o0 = ((idx_t)blockIdx.x * TX + T_OUT) * VEC;
  const bool live = o0 < nOut;
  idx_t kb[NOPS];
  col_kept(g, live ? o0 : 0, kb);
`)
	if k.Split {
		b.WriteString("  const idx_t rlo = (idx_t)blockIdx.y * (idx_t)chunk, rhi = min((idx_t)nRed, rlo + (idx_t)chunk);\n")
	} else {
		b.WriteString("  const idx_t rlo = 0, rhi = (idx_t)nRed;\n")
	}
	for i, in := range row.Inputs {
		if k.access(i) == ColUniform {
			fmt.Fprintf(&b, "  %s u%d[VEC];  // one value per output\n", kindC(in.Kind), i)
			fmt.Fprintf(&b, "  for (int v = 0; v < VEC; v++) u%d[v] = live ? %s : 0;\n", i,
				loadC(fmt.Sprintf("x%d[kb[%d] + v * (idx_t)g.kstride[%[2]d][KRANK - 1]]", i, i), in.DType, in.Kind))
		}
	}

	// elem names leaf i for unrolled step u and output v.
	elem := func(u string) func(i int) string {
		return func(i int) string {
			switch {
			case i >= nIn:
				return fmt.Sprintf("rv%d[v]", i-nIn)
			case k.access(i) == ColUniform:
				return fmt.Sprintf("u%d[v]", i)
			}
			return fmt.Sprintf("e%d[%s][v]", i, u)
		}
	}
	// loads declares e<i>[n][VEC] for the walked inputs e reads and loads
	// step u's elements at offsets off<u>[], for the steps guard (a C
	// condition on u; "" for all) holds.
	loads := func(indent string, n int, guard string, e *ir.Expr) string {
		var l strings.Builder
		for i, in := range row.Inputs {
			if k.access(i) == ColUniform || !uses(e, i) {
				continue
			}
			fmt.Fprintf(&l, "%s%s e%d[%d][VEC];\n", indent, kindC(in.Kind), i, n)
			fmt.Fprintf(&l, "%s#pragma unroll\n%sfor (int u = 0; u < %d; u++) {\n", indent, indent, n)
			if guard != "" {
				fmt.Fprintf(&l, "%s  if (!(%s)) continue;\n", indent, guard)
			}
			x := fmt.Sprintf("x%d + kb[%d] + off[u][%d]", i, i, i)
			if k.access(i) == ColVec && k.Vec > 1 {
				fmt.Fprintf(&l, "%s  const VN<%s, VEC> q = *(const VN<%[2]s, VEC>*)(%s);\n", indent, storageC(in.DType), x)
				fmt.Fprintf(&l, "%s  for (int v = 0; v < VEC; v++) e%d[u][v] = %s;\n", indent, i, loadC("q.v[v]", in.DType, in.Kind))
			} else {
				fmt.Fprintf(&l, "%s  for (int v = 0; v < VEC; v++) e%d[u][v] = %s;\n", indent, i,
					loadC(fmt.Sprintf("(%s)[v * (idx_t)g.kstride[%d][KRANK - 1]]", x, i), in.DType, in.Kind))
			}
			fmt.Fprintf(&l, "%s}\n", indent)
		}
		return l.String()
	}
	// walk wraps body (code for the elements of step u, outputs v) in the
	// loop over this thread's part of [rlo, rhi), UNROLL steps at a time;
	// the last steps, fewer than UNROLL, are loaded together where one
	// tensor is walked.
	walk := func(body string, e *ir.Expr) string {
		var l strings.Builder
		// batch writes n steps' offsets, loads and folds; with partial,
		// only the first left of them (left, a C count, is set).
		batch := func(n int, partial bool) {
			stop, guard := "", ""
			if partial {
				stop, guard = "        if (u >= left) break;\n", "u < left"
			}
			fmt.Fprintf(&l, "      idx_t off[%d][NWALK];\n", n)
			fmt.Fprintf(&l, "      for (int u = 0; u < %d; u++) {\n%s        for (int i = 0; i < NWALK; i++) off[u][i] = w.off[i];\n        w.step(g);\n      }\n", n, stop)
			l.WriteString(loads("      ", n, guard, e))
			fmt.Fprintf(&l, "      #pragma unroll\n      for (int u = 0; u < %d; u++) {\n%s        #pragma unroll\n        for (int v = 0; v < VEC; v++) {\n", n, stop)
			l.WriteString(body)
			l.WriteString("        }\n      }\n    }\n")
		}
		l.WriteString("  if (live) {\n    ColWalk w;\n    w.seek(g, rlo + T_RED);\n    idx_t r = rlo + T_RED;\n")
		fmt.Fprintf(&l, "    for (; r + (%d - 1) * TY < rhi; r += %[1]d * TY) {\n", ColUnroll)
		batch(ColUnroll, false)
		if nwalk > 1 {
			// Several walked tensors: the last steps one at a time. Their
			// loads batched too measured slower on an H200 (2-input
			// fused reductions, 1.2x), where one walked input gained
			// (1.1x).
			l.WriteString("    for (; r < rhi; r += TY) {\n")
			batch(1, false)
		} else {
			l.WriteString("    if (r < rhi) {  // the last steps\n      const int left = (int)((rhi - r + TY - 1) / TY);\n")
			batch(ColUnroll-1, true)
		}
		l.WriteString("  }\n")
		return l.String()
	}

	for s, st := range row.Stages {
		K := kindC(st.Kind)
		if !st.Reduce {
			v, err := row.onceValue(st, elem("0"), kinds, "column kernel")
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  // %s, once per output\n  %s rv%d[VEC];\n  for (int v = 0; v < VEC; v++) rv%[3]d[v] = %s;\n", st.Name, K, s, v)
			continue
		}
		e, err := st.Expr.C(elem("u"), noParam, kinds, st.Compute)
		if err != nil {
			return "", fmt.Errorf("column kernel %s: stage %s: %w", row.Label, st.Name, err)
		}
		A := kindC(st.Compute)
		fmt.Fprintf(&b, "  // %s: %v over the reduced dims of %s\n  %s acc%d[VEC];\n  for (int v = 0; v < VEC; v++) acc%[5]d[v] = %s;\n",
			st.Name, st.Reducer, row.exprDoc(st.Expr), A, s, st.Reducer.CIdentity(st.Compute))
		b.WriteString(walk(fmt.Sprintf("          acc%[1]d[v] = combine%[1]d()(acc%[1]d[v], (%[2]s)(%[3]s));\n", s, A, e), st.Expr))
		fmt.Fprintf(&b, "  for (int v = 0; v < VEC; v++) acc%d[v] = col_allreduce(acc%[1]d[v], combine%[1]d());\n", s)
		if k.Split {
			fin, err := k.finalStages(st, s, elem, kinds)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  if (live && T_RED == 0)\n    for (int v = 0; v < VEC; v++) partial[(long long)blockIdx.y * nOut + (long long)o0 + v] = acc%d[v];\n}\n", s)
			fmt.Fprintf(&b, `
// The second pass: each output's partial accumulators, combined in a
// fixed order.
extern "C" __global__ void __launch_bounds__(TX * TY) %s_final(
    long long nOut, long long parts, long long nRed, const %s* __restrict__ partial, %s* __restrict__ out, ColGeometry g) {
  const idx_t o = (idx_t)blockIdx.x * TX + T_OUT;
  %s acc = %s;
  if (o < nOut)
    for (long long p = T_RED; p < parts; p += TY) acc = combine%d()(acc, partial[p * nOut + (long long)o]);
  acc = col_allreduce(acc, combine%[6]d());
  if (o < nOut && T_RED == 0) {
    idx_t kb[NOPS];
    col_kept(g, o, kb);
%[8]s    out[kb[%[7]d]] = %[9]s;
  }
}
`, k.Name(), A, outType, A, st.Reducer.CIdentity(st.Compute), s, outIdx, fin, storeC(fmt.Sprintf("rv%d[0]", len(row.Stages)-1), row.Stages[len(row.Stages)-1].Kind, row.Out))
			return b.String(), nil
		}
		fmt.Fprintf(&b, "  %s rv%d[VEC];\n  for (int v = 0; v < VEC; v++) rv%[2]d[v] = %s;\n", K, s,
			loadC(storeC(k.finish(fmt.Sprintf("acc%d[v]", s), st), st.Compute, st.DType), st.DType, st.Kind))
	}

	if !fullOut {
		if len(row.Stages) == 0 {
			return "", fmt.Errorf("column kernel %s: no root", row.Label)
		}
		last := len(row.Stages) - 1
		fmt.Fprintf(&b, "  if (live && T_RED == 0)\n    for (int v = 0; v < VEC; v++) out[kb[%d] + v * (idx_t)g.kstride[%[1]d][KRANK - 1]] = %s;\n}\n",
			outIdx, storeC(fmt.Sprintf("rv%d[v]", last), row.Stages[last].Kind, row.Out))
		return b.String(), nil
	}
	e, outKind, err := row.rootC(elem("u"), kinds, "column kernel")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "  // the root, per element: %s\n", row.exprDoc(row.Expr))
	b.WriteString(walk(fmt.Sprintf("          out[kb[%d] + off[u][%[1]d] + v * (idx_t)g.kstride[%[1]d][KRANK - 1]] = %s;\n", outIdx, storeC(e, outKind, row.Out)), row.Expr))
	b.WriteString("}\n")
	return b.String(), nil
}

// finalStages is the code of a split kernel's final pass that computes,
// from the combined accumulator acc of reduction stage s, that stage's
// value and those of the stages after it (computed once per output, see
// RowKernel.CanSplit) as rv<i>[0].
func (k *ColKernel) finalStages(st RowStage, s int, elem func(string) func(int) string, kinds []ir.Kind) (string, error) {
	row := &k.Row
	var b strings.Builder
	b.WriteString("    const int v = 0;\n")
	fmt.Fprintf(&b, "    %s rv%d[1];\n    rv%[2]d[0] = %s;\n", kindC(st.Kind), s, loadC(storeC(k.finish("acc", st), st.Compute, st.DType), st.DType, st.Kind))
	for i := s + 1; i < len(row.Stages); i++ {
		st := row.Stages[i]
		v, err := row.onceValue(st, elem("0"), kinds, "column kernel")
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "    // %s, once per output\n    %s rv%d[1];\n    rv%[3]d[0] = %s;\n", st.Name, kindC(st.Kind), i, v)
	}
	return b.String(), nil
}

// finish is a reduction stage's value from its accumulator acc: the mean
// divides by the reduced count.
func (k *ColKernel) finish(acc string, st RowStage) string {
	if st.Reducer == ir.RMean {
		return fmt.Sprintf("%s / (%s)nRed", acc, kindC(st.Compute))
	}
	return acc
}

// ColLaunch picks a column kernel's block for nOut outputs over reduced
// ranges of nRed indices. Both forms aim each thread at ColSteps indices
// of the range, so that short ranges still keep several loads in flight a
// thread, and take 256 threads a block where the outputs fill them.
//
// In the column form (column set) a thread takes vec outputs: 8, 4 or 2
// where the operands are aligned for maxVec elements at a time and the
// innermost kept dim of kInner elements divides by it, so that a thread's
// loads are vectors, else 1. TX threads take adjacent outputs (at least
// 32 where there are as many) and TY threads share a column.
//
// In the row form (the launch's Rows) TY threads, a warp at least, walk
// each output's range and a block takes TX outputs.
func ColLaunch(column bool, kInner, nOut, nRed int, maxVec int) (tx, ty, vec int) {
	if !column {
		ty = min(colBlock, max(32, pow2Ceil((nRed+ColSteps-1)/ColSteps)))
		return max(1, min(colBlock/ty, pow2Ceil(nOut))), ty, 1
	}
	vec = 8
	for vec > 1 && (vec > maxVec || kInner%vec != 0) {
		vec /= 2
	}
	lanes := pow2Ceil((nOut + vec - 1) / vec)
	ty = max(1, min(pow2Floor(nRed/ColSteps), colBlock/min(32, lanes)))
	tx = max(1, min(colBlock/ty, lanes))
	return tx, ty, vec
}

// ColSteps is how many indices of a reduced range a column kernel's
// launch aims to give each thread.
const ColSteps = 4 * ColUnroll

// colBlock is the threads of a column kernel's block, unless the outputs
// are too few to fill it.
const colBlock = 256

// ColParts splits the reduced range of a launch of tiles blocks across
// grid.y parts of chunk indices each, so that about target blocks run
// (DefaultColTarget) and each thread still takes several unrolled steps.
// It depends on the shape and launch only, never on the device, so that
// the partial results, and their merge, are the same on every GPU.
func ColParts(tiles, nRed, ty, target int) (parts, chunk int) {
	minChunk := ty * ColUnroll * 4
	parts = 1
	if tiles < target && nRed >= 2*minChunk {
		parts = min((target+tiles-1)/tiles, nRed/minChunk, 65535)
	}
	chunk = (nRed + parts - 1) / parts
	return (nRed + chunk - 1) / chunk, chunk
}

// DefaultColTarget is the blocks a split column launch aims at: about a
// wave of a large GPU (an H200 holds 132×8 blocks of 256 threads); on an
// H200, 1024 read faster than 2048 or 4096 (BenchmarkGPUColReduceTune in
// package array).
const DefaultColTarget = 1024

// ColLaunchFused picks the block of a fused column kernel that cannot
// split its reduced range (several stages): ColLaunch's with one output a
// thread, and as many more threads down each range as it takes to fill a
// device of about 256k resident threads, at most 1024 a block (Vec 1: 4
// outputs a thread is untimed for these kernels; this is the shape
// measured on an H200).
func ColLaunchFused(column bool, kInner, nOut, nRed int) (tx, ty int) {
	tx, ty, _ = ColLaunch(column, kInner, nOut, nRed, 1)
	tiles := (nOut + tx - 1) / tx
	for ty < 1024/tx && ty < pow2Ceil(nRed) && tiles*tx*ty < 1<<18 {
		ty *= 2
	}
	return tx, ty
}

// pow2Floor is the largest power of two at most n, or 0.
func pow2Floor(n int) int {
	if n < 1 {
		return 0
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

func pow2Ceil(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}
