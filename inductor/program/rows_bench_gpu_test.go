package program_test

import (
	"fmt"
	"testing"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/ir"
	"gocompile/tensor"
)

// GPU benchmarks of row ops. Each queues b.N calls and synchronises once,
// so ns/op is the device time per call for large tensors and the host
// time per call for small ones. GB/s counts one read of the input and one
// write of the result (and the norms' weights); compare it with
// BenchmarkGPURowCopy's from the same run.

func requireGPU(t testing.TB) {
	t.Helper()
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
}

var eagerShapes = [][2]int{{8192, 4096}, {32, 1024}}

func benchGPU(b *testing.B, bytes int64, f func()) {
	requireGPU(b)
	f() // compiles the kernel, warms the allocator
	tensor.Synchronize(tensor.CUDA(0))
	b.SetBytes(bytes)
	b.ResetTimer()
	for range b.N {
		f()
	}
	tensor.Synchronize(tensor.CUDA(0))
}

func BenchmarkGPUEagerSoftmax(b *testing.B) {
	for _, s := range eagerShapes {
		b.Run(fmt.Sprintf("%dx%d", s[0], s[1]), func(b *testing.B) {
			requireGPU(b)
			x := tensor.Randn(1, tensor.Float32, s[0], s[1]).ToDevice(tensor.CUDA(0))
			benchGPU(b, int64(2*4*s[0]*s[1]), func() { x.Softmax(-1) })
		})
	}
}

func BenchmarkGPUEagerLayerNorm(b *testing.B) {
	for _, s := range eagerShapes {
		b.Run(fmt.Sprintf("%dx%d", s[0], s[1]), func(b *testing.B) {
			requireGPU(b)
			x := tensor.Randn(1, tensor.Float32, s[0], s[1]).ToDevice(tensor.CUDA(0))
			w := tensor.Randn(2, tensor.Float32, s[1]).ToDevice(tensor.CUDA(0))
			bias := tensor.Randn(3, tensor.Float32, s[1]).ToDevice(tensor.CUDA(0))
			benchGPU(b, int64(2*4*s[0]*s[1]+2*4*s[1]), func() { x.LayerNorm([]int{s[1]}, w, bias, 1e-5) })
		})
	}
}

func BenchmarkGPUEagerRMSNorm(b *testing.B) {
	for _, s := range eagerShapes {
		b.Run(fmt.Sprintf("%dx%d", s[0], s[1]), func(b *testing.B) {
			requireGPU(b)
			x := tensor.Randn(1, tensor.Float32, s[0], s[1]).ToDevice(tensor.CUDA(0))
			w := tensor.Randn(2, tensor.Float32, s[1]).ToDevice(tensor.CUDA(0))
			benchGPU(b, int64(2*4*s[0]*s[1]+4*s[1]), func() { x.RMSNorm([]int{s[1]}, w, 1e-6) })
		})
	}
}

// BenchmarkGPURowLong is a compiled softmax over rows from a few columns
// to 200000, few and many rows, in float32 and bfloat16.
func BenchmarkGPURowLong(b *testing.B) {
	for _, c := range []struct {
		rows, R int
		dt      tensor.DType
	}{
		{256, 50257, tensor.Float32}, {32, 50257, tensor.Float32}, {256, 50257, tensor.BFloat16},
		{64, 200000, tensor.Float32}, {4096, 4097, tensor.Float32}, {1 << 20, 7, tensor.Float32},
		{1 << 16, 100, tensor.Float32}, {8192, 4096, tensor.Float16},
	} {
		b.Run(fmt.Sprintf("%dx%d_%v", c.rows, c.R, c.dt), func(b *testing.B) {
			requireGPU(b)
			f := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor { return x.Softmax(-1) }, tensor.WithBackend("inductor"))
			x := tensor.Randn(1, c.dt, c.rows, c.R).ToDevice(tensor.CUDA(0))
			benchGPU(b, int64(2*c.dt.Size()*c.rows*c.R), func() { f(x) })
		})
	}
}

// BenchmarkGPURowCopy is the device-to-device copy bandwidth the row
// benchmarks compare with: cuMemcpyDtoD of 256 MB (read and write).
func BenchmarkGPURowCopy(b *testing.B) {
	requireGPU(b)
	const n = 1 << 28
	dev := tensor.CUDA(0)
	x, y := array.New(dev, ir.Float32, []int{n / 4}), array.New(dev, ir.Float32, []int{n / 4})
	g := array.MustGPU("bench", dev)
	benchGPU(b, 2*n, func() {
		if err := g.Stream().CopyDtoD(y.DevicePtr(), x.DevicePtr(), n); err != nil {
			b.Fatal(err)
		}
	})
}
