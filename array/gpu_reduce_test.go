package array

import (
	"fmt"
	"testing"

	"gocompile/cuda"
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
