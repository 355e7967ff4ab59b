package inductor

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"gocompile/ir"
)

// MaxRank is the largest rank the strided kernels index (after adjacent
// dims are merged, which leaves most tensors with one to three).
const MaxRank = 8

// Access says how a kernel reads an operand.
type Access uint8

const (
	// Dense operands hold element i at position i (after the data pointer,
	// which carries the view's offset).
	Dense Access = iota
	// Uniform operands hold one element that every index reads.
	Uniform
	// Strided operands (of N-d and tiled kernels) are indexed through the
	// kernel's geometry, with any stride along each dim.
	Strided
	// ScalarArg operands are Go numbers passed as kernel parameters.
	ScalarArg
	// RowBroadcast operands (of dense kernels) repeat every inner elements,
	// contiguous within: element i is at i % inner. A bias of shape [D]
	// added to a [M, D] tensor is one, with inner = D.
	RowBroadcast
	// ColBroadcast operands (of dense kernels) hold one element per run of
	// inner elements: element i is at i / inner. A per-row scale of shape
	// [M, 1] applied to a [M, D] tensor is one, with inner = D.
	ColBroadcast
	// InnerContiguous operands (of N-d and tiled kernels) step by one
	// element along the innermost dim: N-d kernels read them a vector at a
	// time.
	InnerContiguous
	// InnerBroadcast operands (of N-d and tiled kernels) repeat along the
	// innermost dim (stride 0): read once per vector.
	InnerBroadcast
	// Tiled operands (of tiled kernels) step by one element along the
	// second innermost dim (grouped kernels: along their A dims, as one
	// run), across the output's order: staged through shared memory so
	// that both their loads and the output's stores coalesce.
	Tiled
)

// letter is the access's mark in kernel names.
func (a Access) letter() byte { return "dus?rcvbt"[a] }

// broadcast reports whether operands of access a take an inner parameter.
func (a Access) broadcast() bool { return a == RowBroadcast || a == ColBroadcast }

// Operand is one input of a pointwise kernel.
type Operand struct {
	DType  ir.DType // storage type (ScalarArg: unused)
	Kind   ir.Kind  // kind it is loaded in
	Access Access
}

// PointwiseKernel describes a single-op (eager) pointwise kernel: the op,
// how each operand is read, and the output.
type PointwiseKernel struct {
	Op *ir.Op
	// Expr and Label describe a fused kernel instead of Op: its whole
	// expression, and a name unique to it.
	Expr     *ir.Expr
	Label    string
	Operands []Operand
	Compute  ir.Kind
	Out      ir.DType
	// Strided is true when the output or any operand needs N-d indexing:
	// the kernel is then an N-d kernel (see layout.go) over Rank dims and
	// reads its tensor operands as Strided, InnerContiguous, InnerBroadcast
	// or Uniform.
	Strided bool
	// Tile makes an N-d kernel a tiled one: the two innermost dims are
	// walked in square tiles, the Tiled operands staged through shared
	// memory (see layout.go).
	Tile bool
	// TileEdge is the edge of a tiled kernel's tiles, 32 or 64 (0: chosen
	// by TileSize).
	TileEdge int
	// TileA and TileB make a tiled kernel a grouped one (either above 1):
	// its tiles span the last TileB dims (the output's contiguous ones),
	// flattened, and the TileA dims before them (the staged operands'
	// contiguous ones), flattened; 0 counts as 1.
	TileA, TileB int
	// Rank is the number of dims of an N-d or tiled kernel, 1 to MaxRank
	// (0: MaxRank). The kernel's loops over dims are unrolled for it.
	Rank int
	// OutStrided is true when the outputs of an N-d kernel do not step by
	// one element along the innermost dim (they are then stored one
	// element at a time).
	OutStrided bool
	// Index32 makes a kernel split indices (strided dims, broadcast
	// operands) with 32-bit arithmetic, much cheaper on GPUs than 64-bit
	// division; valid when n < 2^31. N-d and tiled kernels then also sum
	// offsets in 32 bits, which needs every tensor's span below 2^31
	// elements.
	Index32 bool
	// Unroll is how many vectors of VectorWidth elements each thread of a
	// dense kernel loads before it computes any (0: chosen by the cost of
	// the expression, see AutoUnroll).
	Unroll int
	// Extra are further outputs of a fused kernel (a horizontal group):
	// each another expression over the same operands, stored to its own
	// output pointer (out1, out2, ... after out) with the same layout as
	// the output. Fused expressions take no op parameters.
	Extra []ExtraOutput

	// member makes a dense kernel's source a device function, NAME_body,
	// that a ComboKernel calls for its range of blocks (taking the block
	// index and count as its last parameters, bid and nb).
	member bool
}

// ExtraOutput is one more value a fused pointwise kernel computes.
type ExtraOutput struct {
	Expr    *ir.Expr
	Compute ir.Kind
	Out     ir.DType
}

// output is one value the kernel stores: its device function, output
// pointer, expression, compute kind and type.
type output struct {
	fn, ptr string
	expr    *ir.Expr
	compute ir.Kind
	out     ir.DType
}

func (k *PointwiseKernel) outputs() []output {
	outs := []output{{"op_" + k.label(), "out", k.expr(), k.Compute, k.Out}}
	for i, x := range k.Extra {
		outs = append(outs, output{fmt.Sprintf("op_%s_%d", k.label(), i+1), fmt.Sprintf("out%d", i+1), x.Expr, x.Compute, x.Out})
	}
	return outs
}

// AutoUnroll is the Unroll of a dense kernel that sets none: the more
// costly math the expression does per element (calls such as expf or
// erff, divisions), the more loads each thread keeps in flight to cover
// it. Measured on an H200: a float32 copy is fastest with 1, gelu with 2,
// the gelu-times-sigmoid chain with 4. Narrow tensors take at least as
// many vectors as keep 16 bytes of each in flight a thread, as one
// float32 vector does: 2 for 16-bit elements.
func (k *PointwiseKernel) AutoUnroll() int {
	n := countMathOps(k.expr())
	if len(k.Extra) > 0 {
		seen := map[*ir.Expr]bool{}
		n = mathOps(k.expr(), seen)
		for _, x := range k.Extra {
			n += mathOps(x.Expr, seen)
		}
	}
	u := 4
	switch {
	case n == 0:
		u = 1
	case n == 1:
		u = 2
	}
	widest := 0 // the widest element read or written
	for _, o := range k.Operands {
		if o.Access != ScalarArg {
			widest = max(widest, o.DType.Size())
		}
	}
	widest = max(widest, k.Out.Size())
	for _, x := range k.Extra {
		widest = max(widest, x.Out.Size())
	}
	if widest > 0 {
		u = max(u, 16/(VectorWidth*widest))
	}
	return u
}

func (k *PointwiseKernel) unroll() int {
	if k.Unroll > 0 {
		return k.Unroll
	}
	return k.AutoUnroll()
}

// mathOpCounts memoizes countMathOps, for launches: expressions do not
// change once built. It is dropped when it grows past maxMathOpCounts, so
// that expressions of graphs no longer compiled are not kept for ever.
var (
	mathOpCounts    atomic.Pointer[sync.Map] // *ir.Expr → int
	mathOpCountsLen atomic.Int64
)

const maxMathOpCounts = 1 << 14

// countMathOps is mathOps of e alone.
func countMathOps(e *ir.Expr) int {
	m := mathOpCounts.Load()
	if m == nil {
		mathOpCounts.CompareAndSwap(nil, new(sync.Map))
		m = mathOpCounts.Load()
	}
	if n, ok := m.Load(e); ok {
		return n.(int)
	}
	n := mathOps(e, map[*ir.Expr]bool{})
	if mathOpCountsLen.Add(1) > maxMathOpCounts {
		mathOpCounts.Store(new(sync.Map))
		mathOpCountsLen.Store(0)
		return n
	}
	m.Store(e, n)
	return n
}

// mathOps counts the nodes of e (each shared node once) that compile to
// more than a few instructions.
func mathOps(e *ir.Expr, seen map[*ir.Expr]bool) int {
	if seen[e] {
		return 0
	}
	seen[e] = true
	n := 0
	switch e.Prim {
	case ir.PRecip, ir.PExp, ir.PLog, ir.PSqrt, ir.PRsqrt, ir.PSin, ir.PCos, ir.PTanh, ir.PErf, ir.PDiv, ir.PPow:
		n = 1
	}
	for _, a := range e.Args {
		n += mathOps(a, seen)
	}
	return n
}

// indexed reports whether the kernel splits flat indices (and so depends
// on Index32).
func (k *PointwiseKernel) indexed() bool {
	for _, o := range k.Operands {
		if o.Access.broadcast() {
			return true
		}
	}
	return k.Strided || k.Tile
}

// Name is the kernel's entry point, unique for its configuration.
func (k *PointwiseKernel) Name() string {
	var b strings.Builder
	b.WriteString("gc_")
	b.WriteString(k.label())
	for _, o := range k.Operands {
		b.WriteByte('_')
		if o.Access == ScalarArg {
			b.WriteString("s" + o.Kind.String())
			continue
		}
		b.WriteString(o.DType.String())
		b.WriteByte(o.Access.letter())
	}
	b.WriteString("_" + k.Compute.String() + "_to_" + k.Out.String())
	for _, x := range k.Extra {
		b.WriteString("_and_" + x.Compute.String() + "_to_" + x.Out.String())
	}
	switch {
	case k.Tile:
		fmt.Fprintf(&b, "_tile%dr%d", k.TileSize(), k.rank())
		if k.grouped() {
			fmt.Fprintf(&b, "a%db%d", k.tileA(), k.tileB())
		}
		if k.Index32 {
			b.WriteString("_i32")
		}
	case k.Strided:
		fmt.Fprintf(&b, "_nd%d", k.rank())
		if k.OutStrided {
			b.WriteString("s")
		}
		if k.Index32 {
			b.WriteString("_i32")
		}
	case k.indexed() && k.Index32:
		b.WriteString("_i32")
	}
	if !k.Strided && !k.Tile && k.Unroll > 0 && k.Unroll != k.AutoUnroll() {
		fmt.Fprintf(&b, "_u%d", k.Unroll)
	}
	return b.String()
}

// Geometry is the N-d layout an index kernel (IndexKernel) indexes by: the
// iteration shape and, per tensor (the output first, then each tensor
// operand in order), strides in elements. It is passed to the kernel by value.
type Geometry struct {
	Rank    int
	Sizes   [MaxRank]int64
	Strides [][MaxRank]int64
}

// Bytes encodes g as the kernel's geometry parameter: struct { long long
// rank; long long size[MaxRank]; long long stride[n][MaxRank]; }.
func (g *Geometry) Bytes() []byte {
	b := make([]byte, 0, 8*(1+MaxRank*(1+len(g.Strides))))
	b = putInt64s(b, int64(g.Rank))
	b = putInt64s(b, g.Sizes[:]...)
	for _, st := range g.Strides {
		b = putInt64s(b, st[:]...)
	}
	return b
}

// putInt64s appends vs as little-endian 64-bit integers, the layout of a
// kernel's long long parameters.
func putInt64s(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// VectorWidth is how many consecutive elements a thread of a dense kernel
// loads with one vector instruction.
const VectorWidth = 4

// Source generates the CUDA C of the kernel. Launch a dense kernel with
// blocks of any size up to 1024 and any grid: block b handles the tiles
// b, b + gridDim.x, ... of TileElems(blockDim.x) elements (a grid of
// ceil(n / TileElems) blocks handles one tile each). Launch N-d and tiled
// kernels as LayoutGeometry.Launch says.
// Parameters, in order: long long n; one pointer per tensor operand; the
// output pointer (then one per extra output); one value per scalar operand
// (of its kind); one value per op parameter (of the kind the expression
// uses it in); then, for dense kernels, int aligned (the output and every
// Dense pointer aligned for vector access) and one inner per RowBroadcast
// or ColBroadcast operand in order (unsigned int with Index32, else long
// long); for N-d and tiled kernels the geometry (LayoutGeometry.Bytes).
func (k *PointwiseKernel) Source() (string, error) {
	body, err := k.body()
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("// gocompile eager kernel for op %q: %s\n", k.label(), k.doc())
	if k.Op == nil {
		head = fmt.Sprintf("// gocompile fused kernel %s\n", k.label())
	}
	return head + fast16(k.outDTypes()...) + cudaPrelude + body, nil
}

// outDTypes is the dtype of each value the kernel stores.
func (k *PointwiseKernel) outDTypes() []ir.DType {
	outs := []ir.DType{k.Out}
	for _, x := range k.Extra {
		outs = append(outs, x.Out)
	}
	return outs
}

func (k *PointwiseKernel) expr() *ir.Expr {
	if k.Op == nil {
		return k.Expr
	}
	return k.Op.Expr
}

func (k *PointwiseKernel) label() string {
	if k.Op == nil {
		return k.Label
	}
	return k.Op.Name
}

func (k *PointwiseKernel) doc() string {
	if k.Op == nil {
		return k.Expr.String()
	}
	return k.Op.Doc
}

// ParamKinds is the kind of each op parameter the kernel takes.
func (k *PointwiseKernel) ParamKinds() ([]ir.Kind, error) {
	argKinds := make([]ir.Kind, len(k.Operands))
	for i, o := range k.Operands {
		argKinds[i] = o.Kind
	}
	pk, _, err := k.expr().ParamKinds(argKinds, k.Compute)
	return pk, err
}

// body is the kernel's source after the prelude.
func (k *PointwiseKernel) body() (string, error) {
	src, _, err := k.bodyParams()
	return src, err
}

// bodyParams is body, and the declarations of the kernel's parameters (a
// combo's kernel passes its members theirs; an N-d kernel's end with its
// geometry only where it is a combo's member).
func (k *PointwiseKernel) bodyParams() (string, []string, error) {
	argKinds := make([]ir.Kind, len(k.Operands))
	for i, o := range k.Operands {
		argKinds[i] = o.Kind
	}
	paramKinds, outKind, err := k.expr().ParamKinds(argKinds, k.Compute)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", k.label(), err)
	}
	expr, err := k.expr().C(
		func(i int) string { return fmt.Sprintf("a%d", i) },
		func(i int) string { return fmt.Sprintf("p%d", i) },
		argKinds, k.Compute)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", k.label(), err)
	}

	var b strings.Builder
	// The op's semantics, once, as a device function of the loaded values.
	var fargs []string
	for i, o := range k.Operands {
		fargs = append(fargs, fmt.Sprintf("%s a%d", kindC(o.Kind), i))
	}
	for i, pk := range paramKinds {
		fargs = append(fargs, fmt.Sprintf("%s p%d", kindC(pk), i))
	}
	fmt.Fprintf(&b, "\n// %s = %v\n", k.label(), k.expr())
	fmt.Fprintf(&b, "__device__ __forceinline__ %s op_%s(%s) {\n  return %s;\n}\n\n",
		kindC(outKind), k.label(), strings.Join(fargs, ", "), expr)
	outKinds := []ir.Kind{outKind}
	for i, o := range k.outputs()[1:] {
		pk, ok, err := o.expr.ParamKinds(argKinds, o.compute)
		if err == nil && len(pk) > 0 {
			err = fmt.Errorf("output %d takes op parameters", i+1)
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", k.label(), err)
		}
		e, err := o.expr.C(func(i int) string { return fmt.Sprintf("a%d", i) }, nil, argKinds, o.compute)
		if err != nil {
			return "", nil, fmt.Errorf("%s: output %d: %w", k.label(), i+1, err)
		}
		fmt.Fprintf(&b, "// output %d: %v\n", i+1, o.expr)
		fmt.Fprintf(&b, "__device__ __forceinline__ %s %s(%s) {\n  return %s;\n}\n\n", kindC(ok), o.fn, strings.Join(fargs, ", "), e)
		outKinds = append(outKinds, ok)
	}

	// Kernel signature: what every kind of kernel takes first.
	idx := "long long"
	if k.Index32 {
		idx = "unsigned int"
	}
	params := []string{"long long n"}
	for i, o := range k.Operands {
		if o.Access != ScalarArg {
			params = append(params, fmt.Sprintf("const %s* __restrict__ x%d", storageC(o.DType), i))
		}
	}
	for _, o := range k.outputs() {
		params = append(params, fmt.Sprintf("%s* __restrict__ %s", storageC(o.out), o.ptr))
	}
	for i, o := range k.Operands {
		if o.Access == ScalarArg {
			params = append(params, fmt.Sprintf("%s s%d", kindC(o.Kind), i))
		}
	}
	for i, pk := range paramKinds {
		params = append(params, fmt.Sprintf("%s p%d", kindC(pk), i))
	}
	c := &kernelCtx{k: k, nparams: len(paramKinds), outKinds: outKinds}
	if k.Strided || k.Tile {
		if err := c.layoutBody(&b, params); err != nil {
			return "", nil, fmt.Errorf("%s: %w", k.label(), err)
		}
		if k.member {
			params = append(params, k.Name()+"_geo g")
		}
		return b.String(), params, nil
	}
	params = append(params, "int aligned")
	for i, o := range k.Operands {
		switch {
		case o.Access.broadcast():
			params = append(params, fmt.Sprintf("%s inner%d", idx, i))
		case o.Access != Dense && o.Access != Uniform && o.Access != ScalarArg:
			return "", nil, fmt.Errorf("%s: a dense kernel cannot read operand %d with access %c", k.label(), i, o.Access.letter())
		}
	}
	block, grid := "blockIdx.x", "gridDim.x"
	if k.member {
		fmt.Fprintf(&b, "__device__ __forceinline__ void %s_body(\n    %s,\n    long long bid, long long nb) {\n", k.Name(), strings.Join(params, ",\n    "))
		block, grid = "bid", "nb"
	} else {
		fmt.Fprintf(&b, "extern \"C\" __global__ void %s(\n    %s) {\n  gc_dependent_entry();\n", k.Name(), strings.Join(params, ",\n    "))
	}
	c.uniforms(&b)
	// storeAll stores every output at index at, its operands loaded by load.
	storeAll := func(indent, at string, load func(i int, o Operand) string) string {
		outs := k.outputs()
		return c.storeOutputs(indent, func(m int) string { return fmt.Sprintf("%s[%s]", outs[m].ptr, at) }, load)
	}

	// Dense: the output is written at flat index i. Each thread handles
	// Unroll vectors of VectorWidth consecutive elements per tile, loading
	// all of them (one vector instruction per operand when every pointer is
	// aligned for it) before computing any, so that several loads are in
	// flight; the vectors of a warp are adjacent, so every access coalesces.
	// (Unaligned tensors run N-d kernels, which peel a head.)
	u := k.unroll()
	for i, o := range k.Operands {
		switch o.Access {
		case RowBroadcast:
			fmt.Fprintf(&b, "  // x%d is row-broadcast: element i is x%[1]d[i %% inner%[1]d].\n", i)
		case ColBroadcast:
			fmt.Fprintf(&b, "  // x%d is column-broadcast: element i is x%[1]d[i / inner%[1]d].\n", i)
		}
	}
	fmt.Fprintf(&b, "  const long long tile = (long long)blockDim.x * %d;\n", VectorWidth*u)
	fmt.Fprintf(&b, "  for (long long t0 = (long long)%s * tile; t0 < n; t0 += (long long)%s * tile) {\n", block, grid)
	b.WriteString("    if (aligned && t0 + tile <= n) {\n")
	// vecIndex is the first flat index of a thread's vector v.
	vecIndex := fmt.Sprintf("t0 + ((long long)v * blockDim.x + threadIdx.x) * %d", VectorWidth)
	var vec []int // operands loaded as vectors
	for i, o := range k.Operands {
		if o.Access == Dense || o.Access.broadcast() {
			vec = append(vec, i)
		}
	}
	if len(vec) > 0 {
		// Declared together by storage type.
		byType := map[string][]string{}
		var types []string
		for _, i := range vec {
			t := storageC(k.Operands[i].DType)
			if byType[t] == nil {
				types = append(types, t)
			}
			byType[t] = append(byType[t], fmt.Sprintf("v%d[%d]", i, u))
		}
		for _, t := range types {
			fmt.Fprintf(&b, "      V4<%s> %s;\n", t, strings.Join(byType[t], ", "))
		}
		fmt.Fprintf(&b, "      #pragma unroll\n      for (int v = 0; v < %d; v++) {\n", u)
		fmt.Fprintf(&b, "        const long long i0 = %s;\n", vecIndex)
		for _, i := range vec {
			switch k.Operands[i].Access {
			case Dense:
				fmt.Fprintf(&b, "        v%d[v] = *(const V4<%s>*)(x%d + i0);\n", i, storageC(k.Operands[i].DType), i)
			case RowBroadcast:
				fmt.Fprintf(&b, "        v%d[v] = gc_row_v4(x%d, (%s)i0, inner%d);\n", i, i, idx, i)
			case ColBroadcast:
				fmt.Fprintf(&b, "        v%d[v] = gc_col_v4(x%d, (%s)i0, inner%d);\n", i, i, idx, i)
			}
		}
		b.WriteString("      }\n")
	}
	fmt.Fprintf(&b, "      #pragma unroll\n      for (int v = 0; v < %d; v++) {\n", u)
	fmt.Fprintf(&b, "        const long long i0 = %s;\n", vecIndex)
	for m, o := range k.outputs() {
		fmt.Fprintf(&b, "        V4<%s> r%d;\n", storageC(o.out), m)
	}
	fmt.Fprintf(&b, "        #pragma unroll\n        for (int j = 0; j < %d; j++) {\n", VectorWidth)
	vecLoad := func(i int, o Operand) string {
		if s, ok := c.fixed(i, o); ok {
			return s
		}
		return loadC(fmt.Sprintf("v%d[v].v[j]", i), o.DType, o.Kind)
	}
	for m := range k.outputs() {
		fmt.Fprintf(&b, "          r%d.v[j] = %s;\n", m, c.store(m, vecLoad))
	}
	b.WriteString("        }\n")
	for m, o := range k.outputs() {
		fmt.Fprintf(&b, "        *(V4<%s>*)(%s + i0) = r%d;\n", storageC(o.out), o.ptr, m)
	}
	b.WriteString("      }\n")
	// The last, partial tile: element by element.
	b.WriteString("    } else {\n")
	fmt.Fprintf(&b, "      for (int v = 0; v < %d; v++) {\n", u)
	fmt.Fprintf(&b, "        for (int j = 0; j < %d; j++) {\n", VectorWidth)
	fmt.Fprintf(&b, "          const long long i = %s + j;\n", vecIndex)
	b.WriteString("          if (i >= n) break;\n")
	b.WriteString(storeAll("          ", "i", func(i int, o Operand) string {
		if s, ok := c.fixed(i, o); ok {
			return s
		}
		switch o.Access {
		case RowBroadcast:
			return loadC(fmt.Sprintf("x%d[(%s)i %% inner%d]", i, idx, i), o.DType, o.Kind)
		case ColBroadcast:
			return loadC(fmt.Sprintf("x%d[(%s)i / inner%d]", i, idx, i), o.DType, o.Kind)
		}
		return loadC(fmt.Sprintf("x%d[i]", i), o.DType, o.Kind)
	}))
	b.WriteString("        }\n      }\n    }\n  }\n}\n")
	return b.String(), params, nil
}

// TileElems is the number of elements a block of the given size handles
// per tile in a dense kernel.
func (k *PointwiseKernel) TileElems(block int) int { return block * VectorWidth * k.unroll() }
