package tensor

import (
	"fmt"
	"strings"
	"testing"
)

// Rotary embeddings written with ops, as a LLaMA decoder writes them (a
// 16-bit tensor read in float32 through two slices, rotated, joined with
// Cat and cast back), compile to one pointwise kernel, which writes both
// halves into the Cat's result: the casts move into the kernel that reads
// the slices (ir.SinkCasts, ir.SplitCasts) and below the Cat, whose parts
// are then that kernel's values (fuse.InPlaceCats). Compiled equals eager
// on every floating dtype, odd sizes and a transposed input.
func TestRotaryEmbeddingFuses(t *testing.T) {
	rope := func(x, cos, sin *Tensor) *Tensor {
		hd := x.Size(3)
		xf := x.To(Float32)
		x1, x2 := xf.Narrow(3, 0, hd/2), xf.Narrow(3, hd/2, hd/2)
		out := Cat([]*Tensor{x1.Mul(cos).Sub(x2.Mul(sin)), x2.Mul(cos).Add(x1.Mul(sin))}, 3)
		return out.To(x.DType())
	}
	for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
		for _, s := range []struct{ b, t, h, hd int }{{1, 1, 1, 2}, {1, 1, 3, 6}, {2, 3, 5, 64}, {1, 7, 4, 34}} {
			for _, transposed := range []bool{false, true} {
				what := fmt.Sprintf("%v %v transposed %v", dt, s, transposed)
				var x *Tensor
				if transposed { // [b, h, t, hd] viewed as [b, t, h, hd]
					x = Randn(3, Float32, s.b, s.h, s.t, s.hd).To(dt).Transpose(1, 2)
				} else {
					x = Randn(3, Float32, s.b, s.t, s.h, s.hd).To(dt)
				}
				ang := Randn(4, Float32, s.t, 1, s.hd/2)
				cos, sin := ang.Cos(), ang.Sin()
				want := rope(x, cos, sin)
				got := Compile(rope)(x, cos, sin)
				checkClose(t, what, got, dt, want.Shape(), want.Float64s(), 4)
				e, err := Explain(rope, x, cos, sin)
				if err != nil {
					t.Fatal(err)
				}
				kernels, inPlace := 0, false
				for _, r := range e.Regions {
					if strings.HasSuffix(r, "(cat, in place)") {
						inPlace = true
						continue
					}
					kernels++
				}
				if kernels != 1 || !inPlace {
					t.Errorf("%s: %d kernels besides the Cat, want 1 writing the Cat in place: %q", what, kernels, e.Regions)
				}
			}
		}
	}
}
