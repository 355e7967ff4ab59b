package tensor

import (
	"fmt"
	"math"
	"testing"
)

// Compiled reductions on the CPU (lone row regions, with a prologue, or
// split across the cores for few long rows) give eager's bits, on every
// floating dtype and on odd, long and transposed inputs.
func TestCPUCompiledReductionsEagerBits(t *testing.T) {
	fns := []struct {
		name string
		f    func(x *Tensor) *Tensor
	}{
		{"sum", func(x *Tensor) *Tensor { return x.Sum(-1) }},
		{"mean", func(x *Tensor) *Tensor { return x.Mean(-1) }},
		{"max", func(x *Tensor) *Tensor { return x.Max(-1) }},
		{"sum of squares", func(x *Tensor) *Tensor { return x.Mul(x).Sum(-1) }},
		{"sum over all", func(x *Tensor) *Tensor { return x.Sum() }},
	}
	for _, fn := range fns {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16} {
			for _, sz := range [][2]int{{1, 3}, {7, 1023}, {3, 4097}, {1, 200003}, {2, 70001}} {
				for _, transposed := range []bool{false, true} {
					name := fmt.Sprintf("%s/%v/%dx%d/transposed %v", fn.name, dt, sz[0], sz[1], transposed)
					x := Randn(3, Float64, sz[0], sz[1]).ToDevice(CPU).To(dt)
					if transposed {
						x = Randn(3, Float64, sz[1], sz[0]).ToDevice(CPU).To(dt).T()
					}
					got, want := Compile(fn.f, WithBackend("inductor"))(x).Float64s(), fn.f(x).Float64s()
					for i := range want {
						if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
							t.Fatalf("%s: element %d is %v compiled, %v eager", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
