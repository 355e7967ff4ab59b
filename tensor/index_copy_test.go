package tensor

import (
	"fmt"
	"testing"
)

// IndexCopy against an index reference: every dtype and dim, negative and
// repeated indices, non-contiguous operands, an empty index, the KV-cache
// update (one position of a [B, H, S, E] cache, and a prompt's positions),
// strictly increasing indices and ones that repeat only at the end (a GPU
// block checks for the first); compiled against eager;
// the input is unchanged.
func TestIndexCopy(t *testing.T) {
	type tc struct {
		name  string
		x     layout
		dim   int
		index []int64
	}
	cases := []tc{
		{"rows", lay(5, 3), 0, []int64{4, 0, -2}},
		{"columns", lay(3, 1023), 1, []int64{1022, 0}},
		{"repeated", lay(6), 0, []int64{2, 2, 5}},
		{"empty", lay(4, 2), 0, nil},
		{"cache", lay(2, 3, 8, 4), 2, []int64{5}},
		{"transposed", layTransposed33, 1, []int64{7, 100, 3}},
		{"strided", layStepCols, -1, []int64{0, 128}},
		// Strictly increasing (a prompt's positions, also through negative
		// indices), and increasing up to a repeat at the end.
		{"positions", lay(2, 3, 40, 4), 2, []int64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33}},
		{"increasing negatives", lay(40, 3), 0, []int64{0, 2, -3}},
		{"repeat at the end", lay(9, 2), 0, []int64{1, 3, 3}},
	}
	seed := uint64(40)
	for _, c := range cases {
		for _, dt := range allTypes {
			x := c.x.make(seed, dt, domNormal)
			seed++
			shape := x.Shape()
			d := (c.dim + len(shape)) % len(shape)
			srcShape := append([]int(nil), shape...)
			srcShape[d] = len(c.index)
			src := lay(srcShape...).make(seed, dt, domNormal)
			if len(srcShape) == 2 && srcShape[0] > 1 && srcShape[1] > 1 {
				src = lay(srcShape[1], srcShape[0]).make(seed, dt, domNormal).T() // a transposed source
			}
			seed++
			index := FromSlice(c.index)
			if c.index == nil {
				index = Zeros(Int64, 0)
			}
			// The reference: x's values, then each source slice at its index.
			want, xv, sv := vals(x), vals(x), vals(src)
			inner := 1
			for _, s := range shape[d+1:] {
				inner *= s
			}
			for e := range want {
				outer, pos, in := e/(shape[d]*inner), e/inner%shape[d], e%inner
				for i, j := range c.index {
					if j < 0 {
						j += int64(shape[d])
					}
					if int(j) == pos {
						want[e] = sv[(outer*len(c.index)+i)*inner+in]
					}
				}
			}
			what := fmt.Sprintf("IndexCopy %s %v", c.name, dt)
			f := func(x, index, src *Tensor) *Tensor { return x.IndexCopy(c.dim, index, src) }
			checkClose(t, what, f(x, index, src), dt, shape, want, 0)
			checkClose(t, what+", compiled", Compile(f)(x, index, src), dt, shape, want, 0)
			checkClose(t, what+": the input", x, dt, shape, xv, 0)
		}
	}
	x := Zeros(Float32, 4, 3)
	expectError(t, "an index out of range", func() { x.IndexCopy(0, FromSlice([]int64{4}), Ones(Float32, 1, 3)) })
	expectError(t, "a source of the wrong shape", func() { x.IndexCopy(0, FromSlice([]int64{1}), Ones(Float32, 2, 3)) })
	expectError(t, "a float index", func() { x.IndexCopy(0, FromSlice([]float32{1}), Ones(Float32, 1, 3)) })
	expectError(t, "a 2-D index", func() { x.IndexCopy(0, Zeros(Int64, 1, 1), Ones(Float32, 1, 3)) })
}
