package tensor

import (
	"testing"
)

// GPU benchmarks. Each queues b.N ops and synchronizes once, so ns/op is
// the device time per op when the GPU is the bottleneck (large tensors) and
// the host time per op when the host is (small ones). Compare Add's GB/s
// with the device-to-device copy's GB/s from the same run.

const gpuBenchN = 1 << 26 // 64M elements

func BenchmarkGPUAddFloat32_64M(b *testing.B) {
	requireGPU(b)
	x := Randn(1, Float32, gpuBenchN).ToDevice(CUDA(0))
	y := Randn(2, Float32, gpuBenchN).ToDevice(CUDA(0))
	x.Add(y) // compile the kernel, warm the allocator
	Synchronize(CUDA(0))
	b.SetBytes(3 * 4 * gpuBenchN)
	b.ResetTimer()
	for range b.N {
		x.Add(y)
	}
	Synchronize(CUDA(0))
}

// BenchmarkGPUCopyFloat32_64M is the device-to-device copy bandwidth the
// Add figure is measured against: cuMemcpyDtoD of 256 MB (read and write).
func BenchmarkGPUCopyFloat32_64M(b *testing.B) {
	requireGPU(b)
	x := Randn(1, Float32, gpuBenchN).ToDevice(CUDA(0))
	y := Zeros(Float32, gpuBenchN).ToDevice(CUDA(0))
	g := mustGPU("bench", CUDA(0))
	n := gpuBenchN * 4
	if err := g.stream.CopyDtoD(y.devicePtr(), x.devicePtr(), n); err != nil {
		b.Fatal(err)
	}
	Synchronize(CUDA(0))
	b.SetBytes(2 * int64(n))
	b.ResetTimer()
	for range b.N {
		if err := g.stream.CopyDtoD(y.devicePtr(), x.devicePtr(), n); err != nil {
			b.Fatal(err)
		}
	}
	Synchronize(CUDA(0))
}

// BenchmarkGPUSmallOpHost is the host cost of one small eager op (type
// rules, kernel lookup, allocation, launch): a 3-element Add.
func BenchmarkGPUSmallOpHost(b *testing.B) {
	requireGPU(b)
	x := FromSlice([]float32{1, 2, 3}).ToDevice(CUDA(0))
	x.Add(x)
	Synchronize(CUDA(0))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		x.Add(x)
	}
	b.StopTimer()
	Synchronize(CUDA(0))
}

func BenchmarkGPUSumFloat32_64M(b *testing.B) {
	requireGPU(b)
	x := Randn(3, Float32, gpuBenchN).ToDevice(CUDA(0))
	x.Sum()
	Synchronize(CUDA(0))
	b.SetBytes(4 * gpuBenchN)
	b.ResetTimer()
	for range b.N {
		x.Sum()
	}
	Synchronize(CUDA(0))
}

func BenchmarkGPUSoftmax8192x4096(b *testing.B) {
	requireGPU(b)
	x := Randn(4, Float32, 8192, 4096).ToDevice(CUDA(0))
	x.Softmax(-1)
	Synchronize(CUDA(0))
	b.SetBytes(2 * 4 * 8192 * 4096)
	b.ResetTimer()
	for range b.N {
		x.Softmax(-1)
	}
	Synchronize(CUDA(0))
}

// BenchmarkGPUPointwiseChain16M is gelu(x*1.5+0.5)*sigmoid(x) on 16M
// floats, eager (five kernels) and with the inductor backend (one fused
// kernel); GB/s counts one read and one write.
func BenchmarkGPUPointwiseChain16M(b *testing.B) {
	requireGPU(b)
	x := Randn(1, Float32, 1<<24).ToDevice(CUDA(0))
	chain := func(x *Tensor) *Tensor { return x.MulScalar(1.5).AddScalar(0.5).GELU().Mul(x.Sigmoid()) }
	for _, c := range []struct {
		name string
		f    func(*Tensor) *Tensor
	}{
		{"eager", chain},
		{"inductor", Compile(chain, WithBackend("inductor"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.f(x)
			Synchronize(CUDA(0))
			b.SetBytes(2 * 4 << 24)
			b.ResetTimer()
			for range b.N {
				c.f(x)
			}
			Synchronize(CUDA(0))
		})
	}
}
