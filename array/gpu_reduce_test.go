package array

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// BenchmarkGPUColReduceTune times the column form of eager reductions
// under each unroll depth and split target: how reduceColUnroll and
// reduceColTarget were chosen. Compare with BenchmarkGPUColReduceCopy.
func BenchmarkGPUColReduceTune(b *testing.B) {
	if ok, err := cuda.Available(); !ok {
		b.Skipf("no usable GPU: %v", err)
	}
	dev := ir.CUDA(0)
	input := func(shape ...int) *Array {
		d := make([]float32, ir.Numel(shape))
		for i := range d {
			d[i] = float32(i%1000) / 1000
		}
		return FromData(d, ir.Float32, shape).ToDevice(dev)
	}
	square, tall := input(8192, 8192), input(1<<24, 4)
	cases := []struct {
		name string
		op   *ir.Op
		x    *Array
	}{
		{"mean0_8192x8192", ir.OpMean, square},
		{"argmax0_8192x8192", ir.OpArgMax, square},
		{"sum0_16Mx4", ir.OpSum, tall},
	}
	defer func(u, t int) { reduceColUnroll, reduceColTarget = u, t }(reduceColUnroll, reduceColTarget)
	for _, c := range cases {
		for _, u := range []int{4, 8} {
			for _, target := range []int{512, 1024, 2048} {
				b.Run(fmt.Sprintf("%s/u%d/t%d", c.name, u, target), func(b *testing.B) {
					reduceColUnroll, reduceColTarget = u, target
					a := ir.Attrs{Dims: []int{0}}
					Apply(c.op, a, c.x)
					Synchronize(dev)
					b.SetBytes(int64(4 * c.x.Numel()))
					b.ResetTimer()
					for range b.N {
						Apply(c.op, a, c.x)
					}
					Synchronize(dev)
				})
			}
		}
	}
}

// ColLayout's geometry addresses exactly the elements of the logical
// layout, each kept index with its output, over random shapes, strides of
// permuted tensors and reduced dim sets; arg reductions walk the reduced
// dims in their logical order; and the column form is chosen when a kept
// dim holds the input's stride-1 dim.
func TestColLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		rank := 1 + rng.IntN(5)
		shape := make([]int, rank)
		for d := range shape {
			shape[d] = 1 + rng.IntN(5)
		}
		// The strides of a contiguous tensor permuted into shape.
		perm := rng.Perm(rank)
		xStr := make([]int, rank)
		for st, i := 1, rank-1; i >= 0; i-- {
			xStr[perm[i]] = st
			st *= shape[perm[i]]
		}
		red := make([]bool, rank)
		var kept, reduced []int
		for d := range red {
			red[d] = rng.IntN(2) == 0
			if red[d] {
				reduced = append(reduced, d)
			} else {
				kept = append(kept, d)
			}
		}
		outStr := make([]int, rank) // the output, contiguous over the kept dims
		for st, i := 1, len(kept)-1; i >= 0; i-- {
			outStr[kept[i]] = st
			st *= shape[kept[i]]
		}
		reorder := rng.IntN(2) == 0
		geo, column, ok := ColLayout(shape, red, [][]int{xStr, outStr}, 0, reorder)
		if !ok {
			t.Fatalf("trial %d: no geometry", trial)
		}
		unravel := func(n int, sizes [inductor.MaxRank]int64, rank int, strides [inductor.MaxRank]int64) int {
			off := 0
			for d := rank - 1; d >= 0; d-- {
				off += n % int(sizes[d]) * int(strides[d])
				n /= int(sizes[d])
			}
			return off
		}
		nOut, nRed := 1, 1
		for _, d := range kept {
			nOut *= shape[d]
		}
		for _, d := range reduced {
			nRed *= shape[d]
		}
		// Every (input offset, output offset) pair, by the geometry and
		// by the logical layout.
		got, want := map[[2]int]int{}, map[[2]int]int{}
		for o := range nOut {
			for r := range nRed {
				x := unravel(o, geo.KeptSize, geo.KeptRank, geo.KeptStride[0]) + unravel(r, geo.RedSize, geo.RedRank, geo.RedStride[0])
				got[[2]int{x, unravel(o, geo.KeptSize, geo.KeptRank, geo.KeptStride[1])}]++
			}
		}
		idx := make([]int, rank)
		for i := range ir.Numel(shape) {
			x, out := 0, 0
			Unravel(i, shape, xStr, idx)
			for d := range rank {
				x += idx[d] * xStr[d]
				out += idx[d] * outStr[d]
			}
			want[[2]int{x, out}]++
		}
		if !maps.Equal(got, want) {
			t.Fatalf("trial %d: shape %v strides %v reducing %v: the geometry %+v addresses other elements", trial, shape, xStr, reduced, geo)
		}
		if !reorder { // arg reductions: reduced index r is the logical one
			rStr := make([]int, len(reduced))
			rShape := make([]int, len(reduced))
			for j, d := range reduced {
				rShape[j], rStr[j] = shape[d], xStr[d]
			}
			ridx := make([]int, len(reduced))
			for r := range nRed {
				if unravel(r, geo.RedSize, geo.RedRank, geo.RedStride[0]) != Unravel(r, rShape, rStr, ridx) {
					t.Fatalf("trial %d: reduced index %d out of logical order", trial, r)
				}
			}
		}
		inKept := false
		for _, d := range kept {
			inKept = inKept || xStr[d] == 1 && shape[d] > 1
		}
		if inKept && !column {
			t.Errorf("trial %d: shape %v strides %v reducing %v: stride 1 is kept, row form chosen", trial, shape, xStr, reduced)
		}
	}
}
