package array

import (
	"fmt"
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

// BenchmarkGPUPointwiseTileEdge times tiled kernels (x permuted + y) with
// 32- and 64-element tiles: how TileSize's choice was made.
func BenchmarkGPUPointwiseTileEdge(b *testing.B) {
	if ok, err := cuda.Available(); !ok {
		b.Skipf("no usable GPU: %v", err)
	}
	dev := ir.CUDA(0)
	defer func(e int) { pointwiseTileEdge = e }(pointwiseTileEdge)
	for _, c := range []struct {
		name  string
		dt    ir.DType
		shape []int
		perm  []int
	}{
		{"transpose8192/float32", ir.Float32, []int{8192, 8192}, []int{1, 0}},
		{"transpose8192/bfloat16", ir.BFloat16, []int{8192, 8192}, []int{1, 0}},
		{"transpose8192/float64", ir.Float64, []int{8192, 8192}, []int{1, 0}},
		{"permuted4d/float32", ir.Float32, []int{16, 64, 128, 128}, []int{0, 2, 3, 1}},
		{"batched/float32", ir.Float32, []int{64, 1000, 1000}, []int{0, 2, 1}},
	} {
		for _, edge := range []int{32, 64} {
			b.Run(fmt.Sprintf("%s/edge%d", c.name, edge), func(b *testing.B) {
				pointwiseTileEdge = edge
				x := apply(ir.OpPermute, ir.Attrs{Dims: c.perm}, newGPUArray(dev, c.dt, c.shape))
				y := newGPUArray(dev, c.dt, x.shape)
				out := newGPUArray(dev, c.dt, x.shape)
				k := &inductor.PointwiseKernel{Op: ir.OpAdd, Compute: c.dt.Compute(), Out: c.dt}
				run := func() {
					GPUKernelIn(nil, nil, false, k, "add", nil, []ir.Value{x, y}, []ir.Kind{c.dt.Compute(), c.dt.Compute()}, out)
				}
				run()
				Synchronize(dev)
				b.SetBytes(3 * int64(c.dt.Size()*x.Numel()))
				b.ResetTimer()
				for range b.N {
					run()
				}
				Synchronize(dev)
				b.StopTimer()
				b.Logf("%s", k.Name())
			})
		}
	}
}
