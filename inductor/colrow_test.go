package inductor

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"gocompile/fuse"
	"gocompile/ir"
)

// dimsRegion partitions op over an input of shape [6, 7, 8] in dtype dt and
// returns its one row region, which must reduce over dims.
func dimsRegion(t *testing.T, op *ir.Op, a ir.Attrs, dt ir.DType, dims []int) *fuse.Region {
	t.Helper()
	g := &ir.Graph{}
	x := g.Input([]int{6, 7, 8}, dt, ir.CPU, "")
	y, err := g.Call(op, a, "", x)
	if err != nil {
		t.Fatal(err)
	}
	g.Outputs = []*ir.Node{y}
	if _, err := ir.Decompose(g); err != nil {
		t.Fatal(err)
	}
	rs, err := fuse.Partition(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Row == nil || !slices.Equal(rs[0].Row.Dims, dims) {
		t.Fatalf("%s: regions %v, want one row region over dims %v", op.Name, rs, dims)
	}
	return rs[0]
}

// Column kernels generate for every launch shape, access and dtype, name
// each configuration apart, say what they compute, and split only a lone
// reduction.
func TestColKernelSource(t *testing.T) {
	type tc struct {
		name  string
		op    *ir.Op
		a     ir.Attrs
		dims  []int
		split bool // a lone reduction: the kernel may split
	}
	cases := []tc{
		{"var", ir.OpVar, ir.Attrs{Dims: []int{0, 2}, Scalars: []float64{1}}, []int{0, 2}, false},
		{"softmax", ir.OpSoftmax, ir.Attrs{Dim: 0}, []int{0}, false},
		{"mean", ir.OpMean, ir.Attrs{Dims: []int{1}, KeepDim: true}, []int{1}, true},
	}
	names := map[string]bool{}
	for _, c := range cases {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16} {
			r := dimsRegion(t, c.op, c.a, dt, c.dims)
			for _, launch := range [][3]int{{32, 8, 4}, {64, 4, 2}, {32, 8, 8}, {32, 32, 1}, {1, 256, 1}, {4, 64, 1}} {
				for _, acc := range []ColAccess{ColVec, ColStrided, ColUniform} {
					for _, split := range []bool{false, true} {
						k := NewColKernel(r)
						k.TX, k.TY, k.Vec, k.Split = launch[0], launch[1], launch[2], split
						k.Shape = ColShape{KeptRank: 2, RedRank: len(c.dims), Index32: split}
						for range k.Row.Inputs {
							k.Access = append(k.Access, acc)
						}
						src, err := k.Source()
						if split && !c.split {
							if err == nil {
								t.Errorf("%s %v: a split kernel of several stages generated", c.name, dt)
							}
							continue
						}
						if err != nil {
							t.Fatalf("%s %v %v: %v", c.name, dt, launch, err)
						}
						if names[k.Name()] {
							t.Errorf("%s: name %s given twice", c.name, k.Name())
						}
						names[k.Name()] = true
						for _, want := range []string{"extern \"C\" __global__", k.Name() + "(", "over the reduced dims of", "col_allreduce("} {
							if !strings.Contains(src, want) {
								t.Errorf("%s %v %v: source lacks %q", c.name, dt, launch, want)
							}
						}
						if split != strings.Contains(src, k.Name()+"_final(") {
							t.Errorf("%s %v: split %v, final pass present %v", c.name, dt, split, !split)
						}
					}
				}
			}
		}
	}
	k := NewColKernel(dimsRegion(t, ir.OpMean, ir.Attrs{Dims: []int{0}}, ir.Float32, []int{0}))
	k.TX, k.TY, k.Vec = 32, 8, 1
	if _, err := k.Source(); err == nil {
		t.Errorf("a kernel of no ColShape generated")
	}
	k.Shape = ColShape{KeptRank: 1, RedRank: 1}
	for _, bad := range [][3]int{{3, 8, 1}, {32, 6, 1}, {32, 8, 3}, {0, 8, 1}} {
		k.TX, k.TY, k.Vec = bad[0], bad[1], bad[2]
		if _, err := k.Source(); err == nil {
			t.Errorf("launch %v generated", bad)
		}
	}
}

// The column form of eager reductions names its launch, and carries
// indices for arg reductions only.
func TestReduceKernelColumnSource(t *testing.T) {
	for _, r := range []ir.Reducer{ir.RSum, ir.RMean, ir.RMax, ir.RMin, ir.RArgMax, ir.RArgMin} {
		k := &ReduceKernel{Reducer: r, In: ir.BFloat16, Kind: ir.F32, Out: ir.BFloat16, TX: 32, TY: 8, Vec: 4, Col: ColShape{KeptRank: 1, RedRank: 2, Index32: true}}
		if r.IsArg() {
			k.Out = ir.Int64
		}
		src := k.Source()
		if !strings.Contains(k.Name(), "_col_x32y8v4_k1r2i") || !strings.Contains(src, k.Name()+"(") || !strings.Contains(src, k.Name()+"_final(") {
			t.Errorf("%v: column kernel %s lacks its entry points", r, k.Name())
		}
		if got := strings.Contains(src, "typedef Acc Part;"); got != (r != ir.RSum && r != ir.RMean) {
			t.Errorf("%v: accumulates indices %v", r, got)
		}
		row := &ReduceKernel{Reducer: r, In: ir.BFloat16, Kind: ir.F32, Out: k.Out}
		if row.Name() == k.Name() || strings.Contains(row.Source(), "ColWalk") {
			t.Errorf("%v: the row form is not apart from the column form", r)
		}
	}
}

// ColParts splits by shape alone: the parts cover the range, each at
// least the minimum chunk, within the grid's limits; and ColLaunch keeps
// blocks of powers of two no larger than 256 threads.
func TestColLaunchAndParts(t *testing.T) {
	for _, tiles := range []int{1, 3, 64, 1000, 5000} {
		for _, nRed := range []int{1, 7, 4096, 100_003, 1 << 24} {
			for _, ty := range []int{1, 8, 256} {
				parts, chunk := ColParts(tiles, nRed, ty, DefaultColTarget)
				if parts < 1 || parts > 65535 || parts*chunk < nRed || (parts-1)*chunk >= nRed {
					t.Errorf("tiles %d, nRed %d, ty %d: %d parts of %d", tiles, nRed, ty, parts, chunk)
				}
				if parts > 1 && (chunk < ty*ColUnroll*4 || tiles*parts > 2*DefaultColTarget) {
					t.Errorf("tiles %d, nRed %d, ty %d: %d parts of %d: too fine", tiles, nRed, ty, parts, chunk)
				}
			}
		}
	}
	for _, column := range []bool{true, false} {
		for _, kInner := range []int{1, 2, 4, 6, 64, 8192} {
			for _, nOut := range []int{1, 3, kInner, 1 << 20} {
				for _, nRed := range []int{1, 3, 15, 16, 100, 1000, 1 << 20} {
					for _, maxVec := range []int{1, 2, 4, 8} {
						tx, ty, vec := ColLaunch(column, kInner, max(nOut, kInner), nRed, maxVec)
						pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
						want := 1 // the widest vector within maxVec that divides kInner
						for w := maxVec; column && w > 1 && want == 1; w /= 2 {
							if kInner%w == 0 {
								want = w
							}
						}
						if !pow2(tx) || !pow2(ty) || tx*ty > 256 || vec != want {
							t.Errorf("column %v, kInner %d, nOut %d, nRed %d, maxVec %d: %dx%d vec %d, want vec %d", column, kInner, nOut, nRed, maxVec, tx, ty, vec, want)
						}
					}
					tx, ty, _ := ColLaunch(column, kInner, max(nOut, kInner), nRed, 4)
					steps := (nRed + ty - 1) / ty // indices a thread walks
					switch {
					case !column && ty < 32:
						t.Errorf("row form with %d threads an output: less than a warp", ty)
					case column && ty > 1 && steps < ColSteps:
						t.Errorf("column %v, nRed %d: %d threads down a column walk %d indices each", column, nRed, ty, steps)
					case nOut >= 1<<20 && tx*ty != 256:
						t.Errorf("column %v, nOut %d, nRed %d: a block of %dx%d", column, nOut, nRed, tx, ty)
					case column && nOut >= 1<<20 && tx < 32:
						t.Errorf("column %v, nRed %d: %d adjacent outputs a block", column, nRed, tx)
					}
				}
			}
		}
	}
}

// A column kernel indexes in 32 bits only where every index and offset
// fits with room to spare; the geometry's parameter carries each size's
// magic number, zero where a size passes 2^31.
func TestColGeometryShapeAndBytes(t *testing.T) {
	geo := func(kept, red []int64, kst, rst [][]int64) *ColGeometry {
		g := &ColGeometry{KeptRank: len(kept), RedRank: len(red)}
		copy(g.KeptSize[:], kept)
		copy(g.RedSize[:], red)
		for i := range kst {
			var k, r [MaxRank]int64
			copy(k[:], kst[i])
			copy(r[:], rst[i])
			g.KeptStride = append(g.KeptStride, k)
			g.RedStride = append(g.RedStride, r)
		}
		return g
	}
	for _, c := range []struct {
		name       string
		g          *ColGeometry
		nOut, nRed int
		index32    bool
	}{
		{"small", geo([]int64{386, 506}, []int64{50}, [][]int64{{1, 19300}, {1, 386}}, [][]int64{{386}, {0}}), 506 * 386, 50, true},
		{"offsets past 2^31", geo([]int64{3}, []int64{2}, [][]int64{{1 << 30}, {1}}, [][]int64{{1}, {0}}), 3, 2, false},
		{"negative strides count by size", geo([]int64{3}, []int64{2}, [][]int64{{-(1 << 30)}, {1}}, [][]int64{{1}, {0}}), 3, 2, false},
		{"too many outputs", geo([]int64{1 << 31}, []int64{2}, [][]int64{{1}, {1}}, [][]int64{{0}, {0}}), 1 << 31, 2, false},
		{"a range past 2^30", geo([]int64{2}, []int64{1 << 30}, [][]int64{{1}, {1}}, [][]int64{{2}, {0}}), 2, 1 << 30, false},
	} {
		s := c.g.Shape(c.nOut, c.nRed)
		if s.Index32 != c.index32 || s.KeptRank != c.g.KeptRank || s.RedRank != c.g.RedRank {
			t.Errorf("%s: shape %+v, want ranks %d, %d and Index32 %v", c.name, s, c.g.KeptRank, c.g.RedRank, c.index32)
		}
	}
	g := geo([]int64{7, 1 << 32}, []int64{3}, [][]int64{{1, 7}}, [][]int64{{0}})
	b := g.Bytes()
	tail := b[len(b)-2*MaxRank*8:] // kdiv then rdiv, two uint32 a size
	div := func(i int) Divisor {
		return Divisor{Magic: binary.LittleEndian.Uint32(tail[8*i:]), Shift: binary.LittleEndian.Uint32(tail[8*i+4:])}
	}
	if want := NewDivisor(7); div(0).Magic != want.Magic || div(0).Shift != want.Shift {
		t.Errorf("the first kept size's magic number is %+v, want %+v", div(0), want)
	}
	if d := div(1); d.Magic != 0 || d.Shift != 0 {
		t.Errorf("a size of 2^32 has magic number %+v, want none", d)
	}
	if want := NewDivisor(3); div(MaxRank).Magic != want.Magic || div(MaxRank).Shift != want.Shift {
		t.Errorf("the reduced size's magic number is %+v, want %+v", div(MaxRank), want)
	}
}
