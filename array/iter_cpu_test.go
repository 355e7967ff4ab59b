package array_test

import (
	"math/rand/v2"
	"testing"

	"gocompile/array"
	"gocompile/ir"
)

// Operand.Load gives the elements of a strided view in iteration order,
// whatever the layout (contiguous runs read in place, broadcast dims,
// steps, reversed strides) and wherever the block starts and ends.
func TestOperandLoadLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const size = 1 << 12
	vals := make([]float64, size)
	for i := range vals {
		vals[i] = float64(i)
	}
	layouts := []struct {
		shape, strides []int
		offset         int
	}{
		{[]int{4, 300}, []int{0, 1}, 5},        // a broadcast row
		{[]int{7, 100}, []int{301, 1}, 2},      // rows of a wider array
		{[]int{3, 5, 64}, []int{0, 64, 1}, 0},  // broadcast over a middle dim
		{[]int{50, 40}, []int{1, 50}, 0},       // transposed
		{[]int{30, 20}, []int{41, 2}, 3},       // stepped
		{[]int{10, 64}, []int{-64, 1}, 64 * 9}, // rows in reverse
		{[]int{9}, []int{0}, 17},               // one value
	}
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.BFloat16} {
		data := array.FromFloat64s(vals, dt, size)
		for li, l := range layouts {
			n := ir.Numel(l.shape)
			want := make([]float64, n)
			idx := make([]int, len(l.shape))
			for i := range want {
				want[i] = float64(l.offset + array.Unravel(i, l.shape, l.strides, idx))
			}
			for _, k := range []ir.Kind{ir.F32, ir.F64} {
				o := data.Operand(l.shape, l.strides, l.offset)
				for range 200 {
					start := rng.IntN(n)
					m := 1 + rng.IntN(min(n-start, array.BlockSize))
					got := o.Load(start, m, k, ir.NewVec(k, array.BlockSize))
					for j := range m {
						g := float64(0)
						if k == ir.F32 {
							g = float64(got.F32[j])
						} else {
							g = got.F64[j]
						}
						w := want[start+j]
						if dt == ir.BFloat16 {
							w = float64(ir.BF16ToF32(ir.F32ToBF16(float32(w))))
						}
						if g != w {
							t.Fatalf("%v layout %d, %v, load [%d, %d): element %d is %v, want %v", dt, li, k, start, start+m, j, g, w)
						}
					}
				}
			}
		}
	}
}

// RunBlocks stores its results into any views: slices of a larger tensor
// at an offset (the parts of a Cat's result), a transposed view, and a
// contiguous tensor, together in one pass, in every dtype, at odd sizes
// spanning many blocks and workers; elements outside the views stay as
// they were.
func TestRunBlocksIntoViews(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int64} {
		k := dt.Compute()
		y0, err := ir.CompileBlock(ir.Add(ir.Mul(ir.Arg(0), ir.Arg(0)), ir.Arg(1)), []ir.Kind{k, k}, k)
		if err != nil {
			t.Fatal(err)
		}
		y1, err := ir.CompileBlock(ir.Sub(ir.Arg(0), ir.Arg(1)), []ir.Kind{k, k}, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, shape := range [][]int{{1, 1}, {3, 1023}, {37, 129}, {4097, 3}} {
			rows, cols := shape[0], shape[1]
			n := rows * cols
			av, bv := make([]float64, n), make([]float64, n)
			for i := range n {
				av[i], bv[i] = float64(rng.IntN(9)-4), float64(rng.IntN(9)-4)
			}
			a, b := array.FromFloat64s(av, dt, rows, cols), array.FromFloat64s(bv, dt, rows, cols)
			// Results: y0 into columns [2, 2+cols) of a [rows, cols+5]
			// tensor of sentinels, y1 into the transpose of a [cols, rows]
			// tensor, the first result strided and then the other.
			const sentinel = 7
			wide := func() *array.Array {
				v := make([]float64, rows*(cols+5))
				for i := range v {
					v[i] = sentinel
				}
				return array.FromFloat64s(v, dt, rows, cols+5)
			}
			transposed := func() *array.Array {
				return array.FromFloat64s(make([]float64, n), dt, cols, rows)
			}
			for _, swap := range []bool{false, true} {
				w, tr := wide(), transposed()
				slice := w.Slice(1, 2, 2+cols, 1)
				trv := tr.WithLayout(ir.Layout{Shape: []int{rows, cols}, Strides: []int{1, rows}})
				res := []*array.Array{slice, trv}
				blks := []*ir.Block{y0, y1}
				if swap {
					res[0], res[1] = trv, slice
					blks[0], blks[1] = y1, y0
				}
				array.RunBlocks(blks, []ir.Value{a, b}, nil, res)
				wv, tv := w.Float64s(), tr.Float64s()
				for r := range rows {
					for c := range cols + 5 {
						want := float64(sentinel)
						if c >= 2 && c < 2+cols {
							x, y := av[r*cols+c-2], bv[r*cols+c-2]
							want = x*x + y
						}
						if got := wv[r*(cols+5)+c]; got != want {
							t.Fatalf("%v %v swap %v: slice element [%d, %d] is %v, want %v", dt, shape, swap, r, c, got, want)
						}
					}
				}
				for c := range cols {
					for r := range rows {
						x, y := av[r*cols+c], bv[r*cols+c]
						want := x - y
						if got := tv[c*rows+r]; got != want {
							t.Fatalf("%v %v swap %v: transposed element [%d, %d] is %v, want %v", dt, shape, swap, r, c, got, want)
						}
					}
				}
			}
		}
	}
}
