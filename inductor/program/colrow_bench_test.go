package program_test

import (
	"sync"
	"testing"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/ir"
	"gocompile/tensor"
)

// GPU benchmarks of reductions over dims other than the last, eager and
// compiled. Each queues b.N calls and synchronizes once; the bytes are the
// input's size (what a reduction must read at least). Compare the GB/s
// with BenchmarkGPUReduceCopy's from the same run.

var benchInputs sync.Map // fmt of shape -> *tensor.Tensor

// benchInput is a cached float32 input of shape on the GPU.
func benchInput(b *testing.B, shape ...int) *tensor.Tensor {
	if ok, err := cuda.Available(); !ok {
		b.Skipf("no usable GPU: %v", err)
	}
	key := ir.FormatShape(shape)
	if x, ok := benchInputs.Load(key); ok {
		return x.(*tensor.Tensor)
	}
	x := tensor.NewGenerator(1).Rand(tensor.Float32, shape...).ToDevice(tensor.CUDA(0))
	benchInputs.Store(key, x)
	return x
}

// benchReduce times f on x, eagerly and compiled, on x's device.
func benchReduce(b *testing.B, x *tensor.Tensor, f func(*tensor.Tensor) *tensor.Tensor) {
	for _, mode := range []string{"eager", "compiled"} {
		b.Run(mode, func(b *testing.B) {
			fn := f
			if mode == "compiled" {
				fn = tensor.Compile(f)
			}
			fn(x)
			tensor.Synchronize(x.Device())
			b.SetBytes(int64(4 * x.Numel()))
			b.ResetTimer()
			for range b.N {
				fn(x)
			}
			tensor.Synchronize(x.Device())
		})
	}
}

// BenchmarkGPUReduceCopy is the device-to-device copy bandwidth of 256 MB
// (read and write), the reference for the reductions' GB/s. It runs first,
// warming the device.
func BenchmarkGPUReduceCopy(b *testing.B) {
	if ok, err := cuda.Available(); !ok {
		b.Skipf("no usable GPU: %v", err)
	}
	const n = 1 << 26
	x := array.New(tensor.CUDA(0), ir.Float32, []int{n})
	y := array.New(tensor.CUDA(0), ir.Float32, []int{n})
	g := array.MustGPU("bench", tensor.CUDA(0))
	b.SetBytes(2 * 4 * n)
	b.ResetTimer()
	for range b.N {
		if err := g.Stream().CopyDtoD(y.DevicePtr(), x.DevicePtr(), 4*n); err != nil {
			b.Fatal(err)
		}
	}
	tensor.Synchronize(tensor.CUDA(0))
}

func BenchmarkGPUReduceMean0_8192x8192(b *testing.B) {
	benchReduce(b, benchInput(b, 8192, 8192), func(x *tensor.Tensor) *tensor.Tensor { return x.Mean(0) })
}

func BenchmarkGPUReduceSumMiddle_256x1024x256(b *testing.B) {
	benchReduce(b, benchInput(b, 256, 1024, 256), func(x *tensor.Tensor) *tensor.Tensor { return x.Sum(1) })
}

func BenchmarkGPUReduceVar02_256x1024x256(b *testing.B) {
	benchReduce(b, benchInput(b, 256, 1024, 256), func(x *tensor.Tensor) *tensor.Tensor { return x.Var([]int{0, 2}, 1, false) })
}

func BenchmarkGPUReduceArgMax0_8192x8192(b *testing.B) {
	benchReduce(b, benchInput(b, 8192, 8192), func(x *tensor.Tensor) *tensor.Tensor { return x.ArgMax(0, false) })
}

func BenchmarkGPUReduceSum0FewOutputs_16Mx4(b *testing.B) {
	benchReduce(b, benchInput(b, 1<<24, 4), func(x *tensor.Tensor) *tensor.Tensor { return x.Sum(0) })
}

func BenchmarkGPUReduceSoftmax0_8192x8192(b *testing.B) {
	benchReduce(b, benchInput(b, 8192, 8192), func(x *tensor.Tensor) *tensor.Tensor { return x.Softmax(0) })
}

func BenchmarkGPUReduceSumPermuted_8192x8192(b *testing.B) {
	// A sum over dim 1 of a transposed matrix: the kept dim is the
	// contiguous one.
	benchReduce(b, benchInput(b, 8192, 8192).T(), func(x *tensor.Tensor) *tensor.Tensor { return x.Sum(1) })
}

// CPU benchmarks of the same reductions at a size this machine's caches
// hold a part of, eager and compiled.
func benchReduceCPU(b *testing.B, shape []int, f func(*tensor.Tensor) *tensor.Tensor) {
	benchReduce(b, tensor.NewGenerator(1).Rand(tensor.Float32, shape...).ToDevice(tensor.CPU), f)
}

func BenchmarkCPUReduceMean0_2048x2048(b *testing.B) {
	benchReduceCPU(b, []int{2048, 2048}, func(x *tensor.Tensor) *tensor.Tensor { return x.Mean(0) })
}

func BenchmarkCPUReduceVar02_64x256x64(b *testing.B) {
	benchReduceCPU(b, []int{64, 256, 64}, func(x *tensor.Tensor) *tensor.Tensor { return x.Var([]int{0, 2}, 1, false) })
}

func BenchmarkCPUReduceSoftmax0_2048x2048(b *testing.B) {
	benchReduceCPU(b, []int{2048, 2048}, func(x *tensor.Tensor) *tensor.Tensor { return x.Softmax(0) })
}
