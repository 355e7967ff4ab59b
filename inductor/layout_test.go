package inductor

import (
	"encoding/binary"
	"strings"
	"testing"

	"gocompile/ir"
)

// N-d and tiled kernels have the structure their launch relies on, for
// each access kind: fast divisors (no division) with 32-bit indices, one
// vector per chunk for contiguous tensors, a peeled head, shared-memory
// tiles read across for tiled operands, and bounds on every edge.
func TestLayoutKernelSources(t *testing.T) {
	f32 := func(a Access) Operand { return Operand{DType: ir.Float32, Kind: ir.F32, Access: a} }
	cases := []struct {
		name   string
		k      *PointwiseKernel
		want   []string
		reject []string
	}{
		{"nd 32-bit", &PointwiseKernel{Strided: true, Rank: 4, Index32: true,
			Operands: []Operand{f32(InnerContiguous), f32(InnerBroadcast)}},
			[]string{"_nd4_i32", "gc_div(q, g.magic[4], g.shift[4])", "gc_div(row, g.magic[2], g.shift[2])",
				"*(const V4<float>*)(x0 + o1)", "const float e1 = (float)(x1[o2]);", "*(V4<float>*)(out + o0) = r0;",
				"(int)((g.head + o0) & 3) : (int)g.head", "if (g.vec && c0 >= 0 && c0 + 4 <= S)", "if (c0 + j < 0 || c0 + j >= S) continue;",
				"long long stride[3][4];"},
			[]string{" / g.size", "%", "__shared__"}},
		{"nd 64-bit strided output", &PointwiseKernel{Strided: true, Rank: 2, OutStrided: true,
			Operands: []Operand{f32(Strided), {Kind: ir.F32, Access: ScalarArg}}},
			[]string{"_nd2s", "q / g.size[2]", "o0 += c0 * (long long)g.stride[0][1];",
				"out[o0 + j * (long long)g.stride[0][1]] = r0.v[j]", "float s1"},
			[]string{"gc_div", "V4<float>*)(out"}},
		{"tile", &PointwiseKernel{Tile: true, Rank: 3, Index32: true,
			Operands: []Operand{f32(Tiled), f32(InnerContiguous), f32(Uniform)}},
			[]string{"_tile32r3_i32", "__shared__ float sh0[32][33];", "sh0[r][c] = ", "sh0[c][r]", "__syncthreads();",
				"if (r < no && c < ni)", "if (r < ni && c < no)", "gc_div(tile, g.magic[3], g.shift[3])",
				"x1[o2 + ri * (int)g.stride[2][1] + ci]", "const float u2 = (float)(x2[0]);",
				// x1 is read before the staging barrier (prefetch).
				"float pf1[4][1];", "pf1[rr][cc] = x1[o2 + ri", "(float)(pf1[rr][cc])"},
			[]string{" / g.size", "V4<float>*)(out", "pf2"}},
		{"tile 16-bit", &PointwiseKernel{Tile: true, Rank: 2, Index32: true,
			Operands: []Operand{{DType: ir.BFloat16, Kind: ir.F32, Access: Tiled}, {DType: ir.BFloat16, Kind: ir.F32, Access: Strided}}},
			[]string{"_tile64r2_i32", "__shared__ float sh0[64][65];", "for (int cc = 0; cc < 2; cc++)"},
			[]string{"pf1"}}, // 16 elements a thread: no prefetch
	}
	for _, c := range cases {
		c.k.Expr, c.k.Label, c.k.Compute = ir.Add(ir.Arg(0), ir.Arg(1)), "t", ir.F32
		c.k.Out = c.k.Operands[0].DType
		if c.k.Out == 0 {
			c.k.Out = ir.Float32
		}
		body := mustBody(t, c.k)
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: the source lacks %q:\n%s", c.name, w, body)
			}
		}
		// The loops, past the device functions and the struct, divide by no
		// variable when indices are 32-bit.
		kernel := body[strings.Index(body, "extern"):]
		for _, r := range c.reject {
			if strings.Contains(kernel, r) {
				t.Errorf("%s: the kernel has %q:\n%s", c.name, r, kernel)
			}
		}
	}
}

// Dense kernels refuse operands they cannot read; N-d kernels refuse
// tiled ones; tiled kernels need two dims.
func TestLayoutKernelsRefuse(t *testing.T) {
	f32 := func(a Access) Operand { return Operand{DType: ir.Float32, Kind: ir.F32, Access: a} }
	for _, k := range []*PointwiseKernel{
		{Operands: []Operand{f32(Dense), f32(Strided)}},
		{Strided: true, Rank: 2, Operands: []Operand{f32(Tiled), f32(Dense)}},
		{Tile: true, Rank: 1, Operands: []Operand{f32(Tiled), f32(Dense)}},
		{Tile: true, Rank: 2, OutStrided: true, Operands: []Operand{f32(Tiled), f32(InnerContiguous)}},
	} {
		k.Expr, k.Label, k.Compute, k.Out = ir.Add(ir.Arg(0), ir.Arg(1)), "t", ir.F32, ir.Float32
		if _, err := k.body(); err == nil {
			t.Errorf("%s: generated", k.Name())
		}
	}
}

// The geometry parameter holds the strides, the sizes and derived counts,
// the work, head and vec, then the fast divisors, in that order; Work and
// Launch agree with it.
func TestLayoutGeometryBytes(t *testing.T) {
	k := &PointwiseKernel{Expr: ir.Add(ir.Arg(0), ir.Arg(1)), Label: "t", Compute: ir.F32, Out: ir.Float32,
		Strided: true, Rank: 2, Index32: true,
		Operands: []Operand{{DType: ir.Float32, Kind: ir.F32, Access: InnerContiguous}, {DType: ir.Float32, Kind: ir.F32, Access: Strided}}}
	g := &LayoutGeometry{Sizes: []int{5, 10}, Strides: [][]int{{10, 1}, {12, 1}, {1, 7}}, Head: 3, Vec: true}
	b := k.Bytes(g)
	const r = 2
	words := 3*r + (r + 2) + 3 // 64-bit: strides, sizes and counts, count/head/vec
	if len(b) != 8*words+4*2*(r+2) {
		t.Fatalf("%d bytes", len(b))
	}
	w := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	// Chunks per row: (10 + 3 head) / 4 rounded up = 4; work 5 rows × 4.
	if w(5) != 7 || w(6) != 5 || w(7) != 10 || w(8) != 4 || w(10) != 20 || w(11) != 3 || w(12) != 1 {
		t.Fatalf("geometry words %v", []int64{w(5), w(6), w(7), w(8), w(10), w(11), w(12)})
	}
	magic := func(i int) uint32 { return binary.LittleEndian.Uint32(b[8*words+4*i:]) }
	shift := func(i int) uint32 { return binary.LittleEndian.Uint32(b[8*words+4*(r+2)+4*i:]) }
	if d := NewDivisor(4); magic(2) != d.Magic || shift(2) != d.Shift {
		t.Fatalf("divisor of the chunks per row: %d %d", magic(2), shift(2))
	}
	if k.Work(g) != 20 {
		t.Fatalf("work %d", k.Work(g))
	}
	if grid, block := k.Launch(g, 8); grid != 3 || block != 8 {
		t.Fatalf("launch %d×%d", grid, block)
	}
	k.Strided, k.Tile, k.Operands[0].Access = false, true, Tiled
	g = &LayoutGeometry{Sizes: []int{3, 70, 33}, Strides: [][]int{{2310, 33, 1}, {2310, 1, 70}, {0, 1, 0}}}
	k.Rank = 3
	// Tiles: ceil(33/32) = 2 along the innermost, ceil(70/32) = 3 across, 3 batches.
	if k.Work(g) != 18 {
		t.Fatalf("tiles %d", k.Work(g))
	}
	if grid, block := k.Launch(g, 128); grid != 18 || block != tileThreads {
		t.Fatalf("launch %d×%d", grid, block)
	}
}

// Tiles are 64 wide for 16-bit tensors and 32 otherwise, and shrink to 32
// when the staged tiles (in their compute kind) would not fit.
func TestTileSize(t *testing.T) {
	op := func(dt ir.DType, k ir.Kind, a Access) Operand { return Operand{DType: dt, Kind: k, Access: a} }
	for _, c := range []struct {
		out  ir.DType
		ops  []Operand
		edge int
		want int
	}{
		{ir.Float32, []Operand{op(ir.Float32, ir.F32, Tiled)}, 0, 32},
		{ir.BFloat16, []Operand{op(ir.BFloat16, ir.F32, Tiled)}, 0, 64},
		{ir.Float32, []Operand{op(ir.BFloat16, ir.F32, Tiled)}, 0, 32},
		{ir.Bool, []Operand{op(ir.Bool, ir.I64, Tiled), op(ir.Bool, ir.I64, Tiled)}, 0, 32}, // 2×64×65×8 bytes
		{ir.Float32, []Operand{op(ir.Float32, ir.F32, Tiled)}, 64, 64},
		{ir.Float64, []Operand{op(ir.Float64, ir.F64, Tiled), op(ir.Float64, ir.F64, Tiled)}, 64, 32},
	} {
		k := &PointwiseKernel{Out: c.out, Operands: c.ops, TileEdge: c.edge, Tile: true}
		if got := k.TileSize(); got != c.want {
			t.Errorf("%v %v edge %d: tile %d, want %d", c.out, c.ops, c.edge, got, c.want)
		}
	}
}
