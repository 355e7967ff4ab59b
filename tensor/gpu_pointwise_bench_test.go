package tensor

import (
	"strconv"
	"testing"

	"gocompile/array"
)

// Pointwise benchmarks over layouts other than contiguous (issue 16): a
// transposed operand, a permuted 4-D one, broadcasts along two dims of a
// 3-D tensor, an odd length, each eager and compiled with the inductor
// backend, beside the device-to-device copy of the same run. GB/s counts
// every tensor read once and the output written once.

// benchLayout times f (eager and compiled) on args; bytes is the
// traffic of one call.
func benchLayout(b *testing.B, bytes int64, f func(xs ...*Tensor) *Tensor, args ...*Tensor) {
	requireGPU(b)
	for _, c := range []struct {
		name string
		f    func(xs ...*Tensor) *Tensor
	}{
		{"eager", f},
		{"compiled", Compile(f, WithBackend("inductor"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.f(args...)
			Synchronize(CUDA(0))
			b.SetBytes(bytes)
			b.ResetTimer()
			for range b.N {
				c.f(args...)
			}
			Synchronize(CUDA(0))
		})
	}
}

func gpuRandn(seed uint64, dt DType, shape ...int) *Tensor {
	return Randn(seed, Float32, shape...).To(dt).ToDevice(CUDA(0))
}

// BenchmarkGPUPointwiseCopy is the bandwidth the others are measured
// against: cuMemcpyDtoD of 8192×8192 float32 (read and write).
func BenchmarkGPUPointwiseCopy(b *testing.B) {
	requireGPU(b)
	const n = 8192 * 8192 * 4
	x, y := gpuRandn(1, Float32, 8192, 8192), gpuRandn(2, Float32, 8192, 8192)
	g := array.MustGPU("bench", CUDA(0))
	b.SetBytes(2 * n)
	b.ResetTimer()
	for range b.N {
		if err := g.Stream().CopyDtoD(y.v.DevicePtr(), x.v.DevicePtr(), n); err != nil {
			b.Fatal(err)
		}
	}
	Synchronize(CUDA(0))
}

// x.T() + y, square.
func BenchmarkGPUPointwiseTransposeAdd(b *testing.B) {
	for _, c := range []struct {
		name string
		dt   DType
	}{{"float32", Float32}, {"bfloat16", BFloat16}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 8192
			benchLayout(b, 3*n*n*int64(c.dt.Size()), func(xs ...*Tensor) *Tensor { return xs[0].T().Add(xs[1]) },
				gpuRandn(1, c.dt, n, n), gpuRandn(2, c.dt, n, n))
		})
	}
}

// A 4-D float32 operand permuted (0, 2, 3, 1) added to a contiguous one.
func BenchmarkGPUPointwisePermuted4D(b *testing.B) {
	x := gpuRandn(1, Float32, 16, 64, 128, 128)
	y := gpuRandn(2, Float32, 16, 128, 128, 64)
	benchLayout(b, 3*4*int64(x.Numel()), func(xs ...*Tensor) *Tensor { return xs[0].Permute(0, 2, 3, 1).Add(xs[1]) }, x, y)
}

// relu(x * s + t) over [256, 512, 128] float32 with s [256, 1, 128] and
// t [1, 512, 1]: broadcasts along two different dims.
func BenchmarkGPUPointwiseBroadcast3D(b *testing.B) {
	x := gpuRandn(1, Float32, 256, 512, 128)
	s := gpuRandn(2, Float32, 256, 1, 128)
	t := gpuRandn(3, Float32, 1, 512, 1)
	bytes := 4 * int64(2*x.Numel()+s.Numel()+t.Numel())
	benchLayout(b, bytes, func(xs ...*Tensor) *Tensor { return xs[0].Mul(xs[1]).Add(xs[2]).ReLU() }, x, s, t)
}

// x + y on an odd length near a million float32, and neighbours.
func BenchmarkGPUPointwiseOdd(b *testing.B) {
	for _, n := range []int{999_983, 1_000_000, 1 << 20} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			benchLayout(b, 3*4*int64(n), func(xs ...*Tensor) *Tensor { return xs[0].Add(xs[1]) },
				gpuRandn(1, Float32, n), gpuRandn(2, Float32, n))
		})
	}
}
