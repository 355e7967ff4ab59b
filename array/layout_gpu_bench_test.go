package array

import (
	"testing"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// BenchmarkGPUPointwiseKernel times one add kernel on preallocated arrays,
// launched straight from GPUKernelIn: no output allocation, no op
// dispatch, so that for kernels of a few microseconds the device, not the
// host, sets the pace (compare the sizes' ns/op: equal figures mean the
// host does). Odd lengths near a million elements, aligned, all views
// misaligned alike (head peeling) and misaligned unalike.
func BenchmarkGPUPointwiseKernel(b *testing.B) {
	if ok, err := cuda.Available(); !ok {
		b.Skipf("no usable GPU: %v", err)
	}
	dev := ir.CUDA(0)
	for _, c := range []struct {
		name string
		n    int
		offs [3]int // element offsets of x, y and the output
	}{
		{"999983", 999_983, [3]int{}},
		{"1000000", 1_000_000, [3]int{}},
		{"1048576", 1 << 20, [3]int{}},
		{"999983/offset1", 999_983, [3]int{1, 1, 1}},
		{"999983/offsets013", 999_983, [3]int{0, 1, 3}},
		{"16777259", 1<<24 + 43, [3]int{}},
		{"16777259/offset2", 1<<24 + 43, [3]int{2, 2, 2}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var ts [3]*Array
			for i := range ts {
				ts[i] = newGPUArray(dev, ir.Float32, []int{c.n + 4}).Slice(0, c.offs[i], c.offs[i]+c.n, 1)
			}
			k := &inductor.PointwiseKernel{Op: ir.OpAdd, Compute: ir.F32, Out: ir.Float32}
			run := func() {
				GPUKernelIn(nil, nil, false, k, "add", nil, []ir.Value{ts[0], ts[1]}, []ir.Kind{ir.F32, ir.F32}, ts[2])
			}
			run()
			Synchronize(dev)
			b.SetBytes(3 * 4 * int64(c.n))
			b.ResetTimer()
			for range b.N {
				run()
			}
			Synchronize(dev)
			b.StopTimer()
			b.Logf("%s: %s", c.name, k.Name())
		})
	}
}
