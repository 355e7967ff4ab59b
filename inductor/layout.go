package inductor

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"gocompile/ir"
)

// Pointwise kernels over any layout. A kernel whose output or operands are
// not all laid out alike (a transposed or permuted operand, a broadcast
// along inner dims, a strided view, a misaligned one) runs as an N-d
// kernel or, when an operand steps by one element along a dim other than
// the output's innermost one, as a tiled kernel. The host orders the dims
// (the output's strides decreasing, merged where every tensor allows) and
// passes the layout as a LayoutGeometry; the kernel's rank and each
// tensor's kind of access along the innermost dim are part of its
// configuration, so the loops over dims unroll and unit strides are
// constants.
//
// N-d kernels: each thread handles chunks of up to VectorWidth consecutive
// elements along the innermost dim. It splits its chunk index into
// coordinates once per chunk with fast divisors (32-bit multiply-high and
// shift, no division) and reads InnerContiguous operands, and writes the
// outputs, one vector per chunk. The chunks of a row start Head elements
// before the row, so that with every vector tensor misaligned alike (a
// view at an odd offset) the chunks inside the row are aligned: the first
// and last chunk of each row are partial and go element by element.
//
// Tiled kernels: the two innermost dims are walked in TileSize² tiles,
// the others a batch (one tile per block iteration). Tiled operands step
// by one along the second innermost dim: a block loads their tile with the
// warp along that dim (coalesced), keeps it in shared memory, then computes
// with the warp along the innermost dim, so that the output's stores (and
// the other operands' loads) coalesce too.
//
// Grouped tiled kernels (TileA or TileB above 1) tile two groups of dims
// instead of two dims: the last TileB dims, which the output walks in
// memory order, and the TileA dims before them, which the staged operands
// do, each flattened into one index. A permuted operand whose contiguous
// run spans several short dims (a [5, 91] run of a 4-d permute) thus still
// loads whole runs, and an output whose innermost dim is short still
// stores whole lines. Each tensor's offset is additive over the groups: a
// block first tabulates, in shared memory, every tensor's offset at each
// of its tile's A and B indices (one division chain per entry), then
// reads and writes through the tables, but along a group a tensor runs
// through as one: the staged operands along A; the outputs, and
// InnerContiguous operands, along B.

// tileThreads is the block size of tiled kernels: 32 columns by 8 rows.
const tileThreads = 256

// MaxTiled is how many operands a tiled kernel stages in shared memory.
const MaxTiled = 4

// tileShared is the most shared memory a tiled kernel's staged tiles may
// take (of the 48 KiB a block may declare statically).
const tileShared = 40 << 10

// TileSize is the edge of a tiled kernel's tiles: TileEdge when set, else
// 64 when every tensor has elements of at most 2 bytes (64 two-byte
// elements are one 128-byte line per row), else 32; 32 whenever the staged
// tiles (kept in their compute kind) would not fit in tileShared.
func (k *PointwiseKernel) TileSize() int {
	staged := 0 // bytes per element across the staged operands
	tables := 0 // bytes per unit of tile edge of a grouped kernel's offset tables
	if k.grouped() {
		tables = 2 * 8 * k.tables()
	}
	small := true
	for _, o := range k.Operands {
		if o.Access == Tiled {
			staged += kindSize(o.Kind)
		}
		if o.Access != ScalarArg && o.DType.Size() > 2 {
			small = false
		}
	}
	for _, o := range k.outputs() {
		small = small && o.out.Size() <= 2
	}
	t := 32
	if k.TileEdge > 0 {
		t = k.TileEdge
	} else if small {
		t = 64
	}
	if t*(t+1)*staged+t*tables > tileShared {
		return 32
	}
	return t
}

// kindSize is the size in bytes of a value of kind k in a kernel.
func kindSize(k ir.Kind) int {
	if k == ir.F32 {
		return 4
	}
	return 8
}

// grouped reports whether k is a grouped tiled kernel.
func (k *PointwiseKernel) grouped() bool { return k.Tile && (k.tileA() > 1 || k.tileB() > 1) }

func (k *PointwiseKernel) tileA() int { return max(k.TileA, 1) }
func (k *PointwiseKernel) tileB() int { return max(k.TileB, 1) }

// tables is how many tensors a grouped kernel indexes through offset
// tables: the outputs and the operands that are neither uniform nor
// scalars.
func (k *PointwiseKernel) tables() int {
	n := len(k.outputs())
	for _, o := range k.Operands {
		if o.Access != ScalarArg && o.Access != Uniform {
			n++
		}
	}
	return n
}

func (k *PointwiseKernel) rank() int {
	if k.Rank <= 0 {
		return MaxRank
	}
	return k.Rank
}

// LayoutGeometry is the layout an N-d or tiled kernel walks: the iteration
// shape (the kernel's Rank dims, innermost last) and each tensor's strides
// in elements, the outputs first (out, out1, ...), then the tensor
// operands in order.
type LayoutGeometry struct {
	Sizes   []int
	Strides [][]int
	// Head is how many elements each row's chunks start before the row
	// (0 to VectorWidth-1), and Vec whether every vector tensor's chunks
	// are then aligned for vector access (N-d kernels only).
	Head int
	Vec  bool
	// RowHead makes the head differ by row: each row's chunks start
	// (Head + the first output's offset of the row) mod VectorWidth
	// elements before it, for rows misaligned differently (a row length
	// that is not a multiple of VectorWidth) but alike in every vector
	// tensor.
	RowHead bool
}

// Work is the number of work items of k over g: chunks of an N-d kernel,
// tiles of a tiled one. Index32 kernels need it below 2^31.
func (k *PointwiseKernel) Work(g *LayoutGeometry) int64 {
	w, _, _ := k.work(g)
	return w
}

// work returns the work items and the kernel's two derived counts: the
// chunks per row (N-d), or the tiles along the innermost and the second
// innermost dim (tiled).
func (k *PointwiseKernel) work(g *LayoutGeometry) (count, a, b int64) {
	r := len(g.Sizes)
	rows := int64(1)
	for _, s := range g.Sizes[:r-1] {
		rows *= int64(s)
	}
	if k.Tile {
		// The B group (the innermost dim, or the last TileB) and the A
		// group before it, each flattened.
		t := int64(k.TileSize())
		nb, na := int64(1), int64(1)
		for _, s := range g.Sizes[r-k.tileB():] {
			nb *= int64(s)
		}
		for _, s := range g.Sizes[r-k.tileB()-k.tileA() : r-k.tileB()] {
			na *= int64(s)
		}
		a = (nb + t - 1) / t
		b = (na + t - 1) / t
		return rows * int64(g.Sizes[r-1]) / (na * nb) * a * b, a, b
	}
	head := g.Head
	if g.RowHead {
		head = VectorWidth - 1 // the most any row's head can be
	}
	a = (int64(g.Sizes[r-1]+head) + VectorWidth - 1) / VectorWidth
	return rows * a, a, 1
}

// Launch is the grid and block size of k over g.
func (k *PointwiseKernel) Launch(g *LayoutGeometry, block int) (grid, threads int) {
	w := k.Work(g)
	if k.Tile {
		return int(min(w, 1<<31-1)), tileThreads
	}
	return int(min((w+int64(block)-1)/int64(block), 1<<31-1)), block
}

// Bytes encodes g as k's geometry parameter, the struct GcGeo the kernel
// declares: long long stride[tensors][Rank], size[Rank+2] (the sizes,
// then the two derived counts), count (work items), head, vec; unsigned
// int magic[Rank+2], shift[Rank+2] (fast divisors of size, with Index32).
func (k *PointwiseKernel) Bytes(g *LayoutGeometry) []byte {
	r := len(g.Sizes)
	if r != k.rank() {
		panic(fmt.Sprintf("inductor: geometry of rank %d for a kernel of rank %d", r, k.rank()))
	}
	count, a, c := k.work(g)
	sizes := make([]int64, 0, r+2)
	for _, s := range g.Sizes {
		sizes = append(sizes, int64(s))
	}
	sizes = append(sizes, a, c)
	var b []byte
	for _, st := range g.Strides {
		for _, s := range st {
			b = binary.LittleEndian.AppendUint64(b, uint64(s))
		}
	}
	vec := int64(0) // the kernel's g.vec: 1 aligned chunks, 2 with a head per row
	switch {
	case g.Vec && g.RowHead:
		vec = 2
	case g.Vec:
		vec = 1
	}
	b = putInt64s(b, sizes...)
	b = putInt64s(b, count, int64(g.Head), vec)
	var magic, shift []uint32
	for _, s := range sizes {
		var d Divisor
		if k.Index32 && s >= 1 && s <= 1<<31 {
			d = NewDivisor(uint32(s))
		}
		magic, shift = append(magic, d.Magic), append(shift, d.Shift)
	}
	for _, v := range append(magic, shift...) {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// kernelCtx holds what the parts of a kernel's body share.
type kernelCtx struct {
	k        *PointwiseKernel
	nparams  int       // op parameters output 0 takes
	outKinds []ir.Kind // the kind each output's function returns
	bid, nb  string    // an N-d kernel's block index and block count
}

// fixed is the value of an operand that is the same at every index.
func (c *kernelCtx) fixed(i int, o Operand) (string, bool) {
	switch o.Access {
	case Uniform:
		return fmt.Sprintf("u%d", i), true
	case ScalarArg:
		return fmt.Sprintf("s%d", i), true
	}
	return "", false
}

// store is output m's value, converted to its storage type, from the
// operands load gives.
func (c *kernelCtx) store(m int, load func(i int, o Operand) string) string {
	var as []string
	for i, o := range c.k.Operands {
		as = append(as, load(i, o))
	}
	if m == 0 {
		for i := range c.nparams {
			as = append(as, fmt.Sprintf("p%d", i))
		}
	}
	out := c.k.outputs()[m]
	return storeC(fmt.Sprintf("%s(%s)", out.fn, strings.Join(as, ", ")), c.outKinds[m], out.out)
}

// storeOutputs gives the statements that store every output (to dst(m))
// from the operands load gives. With several outputs each operand is
// loaded once, into a local, before any store: an output may overwrite an
// operand that another output reads at the same index (package program's
// direct stores), and the outputs share the loads.
func (c *kernelCtx) storeOutputs(indent string, dst func(m int) string, load func(i int, o Operand) string) string {
	var b strings.Builder
	outs := c.k.outputs()
	if len(outs) > 1 {
		names := make([]string, len(c.k.Operands))
		for i, o := range c.k.Operands {
			if s, ok := c.fixed(i, o); ok {
				names[i] = s
				continue
			}
			names[i] = fmt.Sprintf("ld%d", i)
			fmt.Fprintf(&b, "%sconst %s ld%d = %s;\n", indent, kindC(o.Kind), i, load(i, o))
		}
		load = func(i int, _ Operand) string { return names[i] }
	}
	for m := range outs {
		fmt.Fprintf(&b, "%s%s = %s;\n", indent, dst(m), c.store(m, load))
	}
	return b.String()
}

// tileLoad is operand i's value in a tiled kernel's compute loop: a
// fixed value, its tile in shared memory, its prefetched element (early),
// or the element at direct(), loaded from memory.
func (c *kernelCtx) tileLoad(i int, o Operand, early []bool, direct func() string) string {
	if s, ok := c.fixed(i, o); ok {
		return s
	}
	if o.Access == Tiled {
		return fmt.Sprintf("sh%d[c][r]", i)
	}
	if early[i] {
		return loadC(fmt.Sprintf("pf%d[rr][cc]", i), o.DType, o.Kind)
	}
	return loadC(direct(), o.DType, o.Kind)
}

// uniforms reads each Uniform operand once.
func (c *kernelCtx) uniforms(b *strings.Builder) {
	for i, o := range c.k.Operands {
		if o.Access == Uniform {
			fmt.Fprintf(b, "  const %s u%d = %s;\n", kindC(o.Kind), i, loadC(fmt.Sprintf("x%d[0]", i), o.DType, o.Kind))
		}
	}
}

// layoutBody writes an N-d or tiled kernel: its geometry struct, its
// signature (params, then the geometry) and its body.
func (c *kernelCtx) layoutBody(b *strings.Builder, params []string) error {
	k := c.k
	r := k.rank()
	if r > MaxRank {
		return fmt.Errorf("rank %d above %d", r, MaxRank)
	}
	if k.Tile && (r < 2 || k.OutStrided) {
		return fmt.Errorf("a tiled kernel needs rank 2 or more and unit-stride outputs")
	}
	if k.grouped() && k.tileA()+k.tileB() > r {
		return fmt.Errorf("tile groups of %d and %d dims in a kernel of rank %d", k.tileA(), k.tileB(), r)
	}
	outs := k.outputs()
	// geo is each tensor's row of the geometry's strides: the outputs, then
	// the tensor operands.
	geo := map[int]int{}
	nt := len(outs)
	staged := 0
	for i, o := range k.Operands {
		switch o.Access {
		case ScalarArg:
			continue
		case Tiled:
			if !k.Tile {
				return fmt.Errorf("operand %d is tiled in an N-d kernel", i)
			}
			staged++
		case Strided, InnerContiguous, InnerBroadcast, Uniform:
		default:
			return fmt.Errorf("an N-d kernel cannot read operand %d with access %c", i, o.Access.letter())
		}
		geo[i] = nt
		nt++
	}
	if staged > MaxTiled {
		return fmt.Errorf("%d tiled operands, at most %d", staged, MaxTiled)
	}
	I, O := "long long", "long long" // index and offset types
	if k.Index32 {
		I, O = "unsigned int", "int"
	}
	div := func(n string, d int) string {
		if k.Index32 {
			return fmt.Sprintf("gc_div(%s, g.magic[%d], g.shift[%d])", n, d, d)
		}
		return fmt.Sprintf("%s / g.size[%d]", n, d)
	}
	// A combo's member (N-d only) is a device function over the blocks
	// the combo gives it, with a geometry struct of its own name; the
	// combo defines gc_div once.
	geoName, bid, nb := "GcGeo", "blockIdx.x", "gridDim.x"
	if k.member {
		if k.Tile {
			return fmt.Errorf("a tiled kernel cannot be a combo's member")
		}
		geoName, bid, nb = k.Name()+"_geo", "bid", "nb"
	} else if k.Index32 {
		b.WriteString(divisorC + "\n")
	}
	fmt.Fprintf(b, `// %[5]s is the layout the kernel walks: each tensor's strides in elements
// (outputs, then tensor operands) over %[1]d dims, innermost last; the sizes
// and two counts derived from them (%[3]s); the work items; the head
// and whether vector access is valid (N-d kernels); fast divisors of size.
struct %[5]s {
  long long stride[%[2]d][%[1]d];
  long long size[%[4]d];
  long long count, head, vec;
  unsigned int magic[%[4]d], shift[%[4]d];
};

`, r, nt, map[bool]string{false: "chunks per row, unused", true: "tiles along the innermost and the second innermost dim"}[k.Tile], r+2, geoName)
	params = append(params, geoName+" g")
	if k.member {
		fmt.Fprintf(b, "__device__ __forceinline__ void %s_body(\n    %s,\n    long long bid, long long nb) {\n", k.Name(), strings.Join(params, ",\n    "))
	} else {
		fmt.Fprintf(b, "extern \"C\" __global__ void %s(\n    %s) {\n  gc_dependent_entry();\n", k.Name(), strings.Join(params, ",\n    "))
	}
	c.bid, c.nb = bid, nb
	c.uniforms(b)

	// off declares the offset of every indexed tensor, summed over the
	// dims from..0 of index v (consumed).
	var tensors []int // geometry rows of the outputs and indexed operands
	for m := range outs {
		tensors = append(tensors, m)
	}
	for i, o := range k.Operands {
		if o.Access != ScalarArg && o.Access != Uniform {
			tensors = append(tensors, geo[i])
		}
	}
	offsets := func(indent, v string, from int) {
		var decl []string
		for _, t := range tensors {
			decl = append(decl, fmt.Sprintf("o%d = 0", t))
		}
		fmt.Fprintf(b, "%s%s %s;\n", indent, O, strings.Join(decl, ", "))
		for d := from; d >= 0; d-- {
			cd := v
			if d > 0 {
				fmt.Fprintf(b, "%s{\n%s  const %s next = %s, c = %s - next * (%s)g.size[%d];\n", indent, indent, I, div(v, d), v, I, d)
				cd = "c"
			}
			for _, t := range tensors {
				fmt.Fprintf(b, "%s  o%d += (%s)%s * (%s)g.stride[%d][%d];\n", indent, t, O, cd, O, t, d)
			}
			if d > 0 {
				fmt.Fprintf(b, "%s  %s = next;\n%s}\n", indent, v, indent)
			}
		}
	}
	switch {
	case k.grouped():
		c.groupedTileBody(b, geo, offsets, tensors, I, O, div)
	case k.Tile:
		c.tileBody(b, geo, offsets, I, O, div)
	default:
		c.ndBody(b, geo, offsets, I, O, div)
	}
	b.WriteString("}\n")
	return nil
}

// ndBody is the loop of an N-d kernel.
func (c *kernelCtx) ndBody(b *strings.Builder, geo map[int]int, offsets func(indent, v string, from int), I, O string, div func(string, int) string) {
	k := c.k
	r := k.rank()
	outs := k.outputs()
	fmt.Fprintf(b, "  // Chunk q covers up to %d consecutive elements along the innermost dim.\n", VectorWidth)
	fmt.Fprintf(b, "  const %[1]s S = (%[1]s)g.size[%[2]d], nchunk = (%[1]s)g.size[%[3]d];\n", O, r-1, r)
	fmt.Fprintf(b, "  for (%[1]s q = (%[1]s)%[2]s * blockDim.x + threadIdx.x; q < (%[1]s)g.count; q += (%[1]s)%[3]s * blockDim.x) {\n", I, c.bid, c.nb)
	if r > 1 {
		fmt.Fprintf(b, "    %s row = %s;\n", I, div("q", r))
		fmt.Fprintf(b, "    const %s cq = (%s)(q - row * (%s)nchunk);\n", O, O, I)
		offsets("    ", "row", r-2)
		b.WriteString("    // The head: the same for every row, or (g.vec 2) by the first output's offset.\n")
		fmt.Fprintf(b, "    const %s c0 = cq * %d - (g.vec == 2 ? (%s)((g.head + o0) & %d) : (%s)g.head);\n", O, VectorWidth, O, VectorWidth-1, O)
	} else {
		fmt.Fprintf(b, "    const %s c0 = (%s)(q * %d) - (%s)g.head;\n", O, O, VectorWidth, O)
		offsets("    ", "q", -1)
	}
	// Along the innermost dim: unit strides are constants.
	inner := func(t int, acc Access) {
		switch acc {
		case InnerContiguous:
			fmt.Fprintf(b, "    o%d += c0;\n", t)
		case Strided:
			fmt.Fprintf(b, "    o%d += c0 * (%s)g.stride[%d][%d];\n", t, O, t, r-1)
		}
	}
	outAcc := InnerContiguous
	if k.OutStrided {
		outAcc = Strided
	}
	for m := range outs {
		inner(m, outAcc)
	}
	for i, o := range k.Operands {
		if o.Access != ScalarArg && o.Access != Uniform {
			inner(geo[i], o.Access)
		}
	}
	// at is tensor t's element j of the chunk.
	at := func(t int, acc Access, j string) string {
		switch acc {
		case InnerContiguous:
			return fmt.Sprintf("o%d + %s", t, j)
		case InnerBroadcast:
			return fmt.Sprintf("o%d", t)
		}
		return fmt.Sprintf("o%d + %s * (%s)g.stride[%d][%d]", t, j, O, t, r-1)
	}
	// A whole chunk, aligned: one vector per contiguous tensor.
	b.WriteString("    if (g.vec && c0 >= 0 && c0 + " + fmt.Sprint(VectorWidth) + " <= S) {\n")
	for i, o := range k.Operands {
		switch o.Access {
		case InnerContiguous:
			fmt.Fprintf(b, "      const V4<%[1]s> w%[2]d = *(const V4<%[1]s>*)(x%[2]d + o%[3]d);\n", storageC(o.DType), i, geo[i])
		case InnerBroadcast:
			fmt.Fprintf(b, "      const %s e%d = %s;\n", kindC(o.Kind), i, loadC(fmt.Sprintf("x%d[o%d]", i, geo[i]), o.DType, o.Kind))
		}
	}
	for m, o := range outs {
		fmt.Fprintf(b, "      V4<%s> r%d;\n", storageC(o.out), m)
	}
	fmt.Fprintf(b, "      #pragma unroll\n      for (int j = 0; j < %d; j++) {\n", VectorWidth)
	for m := range outs {
		fmt.Fprintf(b, "        r%d.v[j] = %s;\n", m, c.store(m, func(i int, o Operand) string {
			if s, ok := c.fixed(i, o); ok {
				return s
			}
			switch o.Access {
			case InnerContiguous:
				return loadC(fmt.Sprintf("w%d.v[j]", i), o.DType, o.Kind)
			case InnerBroadcast:
				return fmt.Sprintf("e%d", i)
			}
			return loadC(fmt.Sprintf("x%d[%s]", i, at(geo[i], o.Access, "j")), o.DType, o.Kind)
		}))
	}
	b.WriteString("      }\n")
	for m, o := range outs {
		if k.OutStrided {
			fmt.Fprintf(b, "      for (int j = 0; j < %d; j++) %s[%s] = r%d.v[j];\n", VectorWidth, o.ptr, at(m, Strided, "j"), m)
		} else {
			fmt.Fprintf(b, "      *(V4<%s>*)(%s + o%d) = r%d;\n", storageC(o.out), o.ptr, m, m)
		}
	}
	// The chunks at a row's ends, and tensors misaligned unlike the others:
	// element by element.
	b.WriteString("    } else {\n")
	fmt.Fprintf(b, "      for (int j = 0; j < %d; j++) {\n", VectorWidth)
	b.WriteString("        if (c0 + j < 0 || c0 + j >= S) continue;\n")
	b.WriteString(c.storeOutputs("        ", func(m int) string { return fmt.Sprintf("%s[%s]", outs[m].ptr, at(m, outAcc, "j")) }, func(i int, o Operand) string {
		if s, ok := c.fixed(i, o); ok {
			return s
		}
		return loadC(fmt.Sprintf("x%d[%s]", i, at(geo[i], o.Access, "j")), o.DType, o.Kind)
	}))
	b.WriteString("      }\n    }\n  }\n")
}

// tileBody is the loop of a tiled kernel.
func (c *kernelCtx) tileBody(b *strings.Builder, geo map[int]int, offsets func(indent, v string, from int), I, O string, div func(string, int) string) {
	k := c.k
	r := k.rank()
	t := k.TileSize()
	outs := k.outputs()
	for i, o := range k.Operands {
		if o.Access == Tiled {
			fmt.Fprintf(b, "  // x%d's tile, loaded along its contiguous dim (the second innermost).\n", i)
			fmt.Fprintf(b, "  __shared__ %s sh%d[%d][%d];\n", kindC(o.Kind), i, t, t+1)
		}
	}
	b.WriteString("  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n")
	fmt.Fprintf(b, "  const %[1]s SI = (%[1]s)g.size[%[2]d], SO = (%[1]s)g.size[%[3]d], nto = (%[1]s)g.size[%[4]d];\n", I, r-2, r-1, r)
	fmt.Fprintf(b, "  for (%[1]s tile = blockIdx.x; tile < (%[1]s)g.count; tile += gridDim.x) {\n", I)
	fmt.Fprintf(b, "    %s rest = %s;\n", I, div("tile", r))
	fmt.Fprintf(b, "    const %s bo = (tile - rest * nto) * %d;\n", I, t)
	if r > 2 {
		fmt.Fprintf(b, "    %s batch = %s;\n", I, div("rest", r+1))
		fmt.Fprintf(b, "    const %s bi = (rest - batch * (%s)g.size[%d]) * %d;\n", I, I, r+1, t)
		offsets("    ", "batch", r-3)
	} else {
		fmt.Fprintf(b, "    const %s bi = rest * %d;\n", I, t)
		offsets("    ", "rest", -1)
	}
	fmt.Fprintf(b, "    const int ni = (int)min((%[1]s)%d, SI - bi), no = (int)min((%[1]s)%d, SO - bo);\n", I, t, t)
	at := func(t int, acc Access) string {
		row := fmt.Sprintf("o%d + ri * (%s)g.stride[%d][%d]", t, O, t, r-2)
		switch acc {
		case InnerContiguous:
			return row + " + ci"
		case InnerBroadcast:
			return row
		}
		return fmt.Sprintf("%s + ci * (%s)g.stride[%d][%d]", row, O, t, r-1)
	}
	early := c.prefetched(t)
	if k.hasTiled() {
		c.prefetch(b, t, early, "r < ni && c < no", func(indent string) {
			fmt.Fprintf(b, "%sconst %[2]s ri = (%[2]s)(bi + r), ci = (%[2]s)(bo + c);\n", indent, O)
		}, func(i int, o Operand) string { return fmt.Sprintf("x%d[%s]", i, at(geo[i], o.Access)) })
		b.WriteString("    // Stage: r along the innermost dim, c (the warp) along the tiled operands' contiguous one.\n")
		tileLoop(b, t, "r < no && c < ni", func(indent string) {
			for i, o := range k.Operands {
				if o.Access == Tiled {
					g := geo[i]
					fmt.Fprintf(b, "%ssh%d[r][c] = %s;\n", indent, i, loadC(fmt.Sprintf("x%d[o%d + (%s)(bi + c) + (%s)(bo + r) * (%s)g.stride[%d][%d]]", i, g, O, O, O, g, r-1), o.DType, o.Kind))
				}
			}
		})
		b.WriteString("    __syncthreads();\n")
	}
	b.WriteString("    // Compute: r along the second innermost dim, c (the warp) along the innermost: stores coalesce.\n")
	tileLoop(b, t, "r < ni && c < no", func(indent string) {
		fmt.Fprintf(b, "%sconst %[2]s ri = (%[2]s)(bi + r), ci = (%[2]s)(bo + c);\n", indent, O)
		b.WriteString(c.storeOutputs(indent, func(m int) string { return fmt.Sprintf("%s[%s]", outs[m].ptr, at(m, InnerContiguous)) }, func(i int, o Operand) string {
			return c.tileLoad(i, o, early, func() string { return fmt.Sprintf("x%d[%s]", i, at(geo[i], o.Access)) })
		}))
	})
	if k.hasTiled() {
		b.WriteString("    __syncthreads(); // the tiles are reused\n")
	}
	b.WriteString("  }\n")
}

// groupedTileBody is the loop of a grouped tiled kernel (see the doc at
// the top of this file): tensors are the geometry rows of the outputs and
// indexed operands, each given offset tables along the tile's A and B
// indices.
func (c *kernelCtx) groupedTileBody(b *strings.Builder, geo map[int]int, offsets func(indent, v string, from int), tensors []int, I, O string, div func(string, int) string) {
	k := c.k
	r := k.rank()
	t := k.TileSize()
	outs := k.outputs()
	nb, na := k.tileB(), k.tileA()
	loB, loA := r-nb, r-nb-na // the first dim of each group
	slot := map[int]int{}     // each tensor's row of the tables
	for j, g := range tensors {
		slot[g] = j
	}
	fmt.Fprintf(b, "  // Offsets of each indexed tensor at the tile's A (dims %d..%d) and B (dims %d..%d) indices.\n", loA, loB-1, loB, r-1)
	fmt.Fprintf(b, "  __shared__ %s tabA[%d][%d], tabB[%[2]d][%[3]d];\n", O, len(tensors), t)
	for i, o := range k.Operands {
		if o.Access == Tiled {
			fmt.Fprintf(b, "  // x%d's tile, loaded along its contiguous run (the A dims).\n", i)
			fmt.Fprintf(b, "  __shared__ %s sh%d[%d][%d];\n", kindC(o.Kind), i, t, t+1)
		}
	}
	b.WriteString("  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n")
	prod := func(lo, hi int) string {
		var f []string
		for d := lo; d < hi; d++ {
			f = append(f, fmt.Sprintf("(%s)g.size[%d]", I, d))
		}
		return strings.Join(f, " * ")
	}
	fmt.Fprintf(b, "  const %[1]s NA = %[2]s, NB = %[3]s, ntb = (%[1]s)g.size[%[4]d];\n", I, prod(loA, loB), prod(loB, r), r)
	fmt.Fprintf(b, "  for (%[1]s tile = blockIdx.x; tile < (%[1]s)g.count; tile += gridDim.x) {\n", I)
	fmt.Fprintf(b, "    %s rest = %s;\n", I, div("tile", r))
	fmt.Fprintf(b, "    const %s b0 = (tile - rest * ntb) * %d;\n", I, t)
	fmt.Fprintf(b, "    %s batch = %s;\n", I, div("rest", r+1))
	fmt.Fprintf(b, "    const %s a0 = (rest - batch * (%s)g.size[%d]) * %d;\n", I, I, r+1, t)
	offsets("    ", "batch", loA-1)
	fmt.Fprintf(b, "    const int na = (int)min((%[1]s)%d, NA - a0), nb = (int)min((%[1]s)%d, NB - b0);\n", I, t, t)
	// table fills entry e of tab with every tensor's offset at index v of
	// the group of dims lo..hi-1 (the last fastest).
	table := func(tab, v string, lo, hi int) {
		fmt.Fprintf(b, "      %s q = %s;\n", I, v)
		for _, g := range tensors {
			fmt.Fprintf(b, "      %s e%d = 0;\n", O, g)
		}
		for d := hi - 1; d >= lo; d-- {
			cd := "q"
			if d > lo {
				fmt.Fprintf(b, "      {\n        const %s next = %s, cd = q - next * (%s)g.size[%d];\n", I, div("q", d), I, d)
				cd = "cd"
			}
			for _, g := range tensors {
				fmt.Fprintf(b, "        e%d += (%s)%s * (%s)g.stride[%d][%d];\n", g, O, cd, O, g, d)
			}
			if d > lo {
				b.WriteString("        q = next;\n      }\n")
			}
		}
		for _, g := range tensors {
			fmt.Fprintf(b, "      %s[%d][e] = e%d;\n", tab, slot[g], g)
		}
	}
	fmt.Fprintf(b, "    if (threadIdx.x < %d) {\n      const int e = threadIdx.x;\n", t)
	table("tabA", "a0 + (e < na ? e : 0)", loA, loB)
	fmt.Fprintf(b, "    } else if (threadIdx.x < %d) {\n      const int e = threadIdx.x - %d;\n", 2*t, t)
	table("tabB", "b0 + (e < nb ? e : 0)", loB, r)
	b.WriteString("    }\n    __syncthreads();\n")
	// at is tensor g's element at A index ra and B index rb of the tile:
	// through the tables, but for a group the tensor runs through as one
	// (acc Tiled: A; InnerContiguous or an output: B).
	at := func(g int, acc Access, ra, rb string) string {
		offA := fmt.Sprintf("tabA[%d][%s]", slot[g], ra)
		if acc == Tiled {
			offA = fmt.Sprintf("(%s)(a0 + %s)", O, ra)
		}
		offB := fmt.Sprintf("tabB[%d][%s]", slot[g], rb)
		if acc == InnerContiguous {
			offB = fmt.Sprintf("(%s)(b0 + %s)", O, rb)
		}
		return fmt.Sprintf("o%d + %s + %s", g, offA, offB)
	}
	early := c.prefetched(t)
	if k.hasTiled() {
		c.prefetch(b, t, early, "r < na && c < nb", func(string) {}, func(i int, o Operand) string {
			return fmt.Sprintf("x%d[%s]", i, at(geo[i], o.Access, "r", "c"))
		})
		b.WriteString("    // Stage: r along B, c (the warp) along A, the tiled operands' contiguous run.\n")
		tileLoop(b, t, "r < nb && c < na", func(indent string) {
			for i, o := range k.Operands {
				if o.Access == Tiled {
					fmt.Fprintf(b, "%ssh%d[r][c] = %s;\n", indent, i, loadC(fmt.Sprintf("x%d[%s]", i, at(geo[i], Tiled, "c", "r")), o.DType, o.Kind))
				}
			}
		})
		b.WriteString("    __syncthreads();\n")
	}
	b.WriteString("    // Compute: r along A, c (the warp) along B, the output's contiguous run: stores coalesce.\n")
	tileLoop(b, t, "r < na && c < nb", func(indent string) {
		b.WriteString(c.storeOutputs(indent, func(m int) string { return fmt.Sprintf("%s[%s]", outs[m].ptr, at(m, InnerContiguous, "r", "c")) }, func(i int, o Operand) string {
			return c.tileLoad(i, o, early, func() string { return fmt.Sprintf("x%d[%s]", i, at(geo[i], o.Access, "r", "c")) })
		}))
	})
	b.WriteString("    __syncthreads(); // the tables and tiles are reused\n  }\n")
}

// Prefetching in tiled kernels: a thread's elements of a tile at most
// which it pays (prefetchMaxPer), and the 32-bit registers a thread may
// give it (prefetchRegs). On an H200 it made tiles of 32 (4 elements a
// thread) up to 1.2x faster and tiles of 64 (16 a thread, already that
// many loads in flight) up to 1.7x slower, even with one operand.
const (
	prefetchMaxPer = 4
	prefetchRegs   = 16
)

// prefetched reports, per operand, whether a tiled kernel with tiles of
// t reads it before its staging barrier: where a thread's share of a tile
// is small, the operands read from memory in the compute loop (not Tiled,
// Uniform or scalars), first to last, while they fit in prefetchRegs.
func (c *kernelCtx) prefetched(t int) []bool {
	early := make([]bool, len(c.k.Operands))
	per := (t / (tileThreads / 32)) * (t / 32) // elements a thread
	if !c.k.hasTiled() || per > prefetchMaxPer {
		return early
	}
	regs := 0
	for i, o := range c.k.Operands {
		if _, ok := c.fixed(i, o); ok || o.Access == Tiled {
			continue
		}
		n := per * max(o.DType.Size()/4, 1)
		if regs+n > prefetchRegs {
			break
		}
		regs += n
		early[i] = true
	}
	return early
}

// prefetch writes the loads of a tiled kernel's early operands (see
// prefetched) into registers, pf<i>[rr][cc] at the compute loop's element
// (rr, cc), so that they are in flight with the staged tile's loads and a
// tile costs one round trip to memory, not two (one to stage, then one to
// compute). head writes what the compute loop computes per element before
// its loads; elem is operand i's element there.
func (c *kernelCtx) prefetch(b *strings.Builder, t int, early []bool, cond string, head func(indent string), elem func(i int, o Operand) string) {
	if !slices.Contains(early, true) {
		return
	}
	rows := tileThreads / 32
	b.WriteString("    // The compute loop's operands, read now: in flight with the staged tile.\n")
	for i, o := range c.k.Operands {
		if early[i] {
			fmt.Fprintf(b, "    %s pf%d[%d][%d];\n", storageC(o.DType), i, t/rows, t/32)
		}
	}
	tileLoop(b, t, cond, func(indent string) {
		head(indent)
		for i, o := range c.k.Operands {
			if early[i] {
				fmt.Fprintf(b, "%spf%d[rr][cc] = %s;\n", indent, i, elem(i, o))
			}
		}
	})
}

// tileLoop writes the loops over a tile's t×t elements by a block of
// tileThreads: r by the warps, c by the lanes (the coalesced dim), each
// element where cond holds; body writes its statements at indent.
func tileLoop(b *strings.Builder, t int, cond string, body func(indent string)) {
	rows := tileThreads / 32
	fmt.Fprintf(b, "    #pragma unroll\n    for (int rr = 0; rr < %d; rr++) {\n      const int r = ty + %d * rr;\n", t/rows, rows)
	fmt.Fprintf(b, "      #pragma unroll\n      for (int cc = 0; cc < %d; cc++) {\n        const int c = tx + 32 * cc;\n", t/32)
	fmt.Fprintf(b, "        if (%s) {\n", cond)
	body("          ")
	b.WriteString("        }\n      }\n    }\n")
}

func (k *PointwiseKernel) hasTiled() bool {
	for _, o := range k.Operands {
		if o.Access == Tiled {
			return true
		}
	}
	return false
}
