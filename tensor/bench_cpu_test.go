package tensor

import (
	"runtime"
	"testing"
)

// CPU benchmarks of row regions and reductions, eager against compiled.
// Bytes counted: each input read once and each output written once (small
// weight vectors left out), as go run ./bench counts them. Run them with
//
//	go test ./tensor -run '^$' -bench CPU -benchtime 20x

func benchEagerCompiled(b *testing.B, bytes int64, f func(x *Tensor) *Tensor, x *Tensor) {
	for _, c := range []struct {
		name string
		f    func(*Tensor) *Tensor
	}{
		{"eager", f},
		{"compiled", Compile(f, WithBackend("inductor"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			out := c.f(x) // warm up: trace, compile, fault in the pages
			b.SetBytes(bytes)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				out = c.f(x)
			}
			b.StopTimer()
			runtime.KeepAlive(out)
		})
	}
}

func BenchmarkCPUSoftmax2048x4096(b *testing.B) {
	x := Randn(1, Float32, 2048, 4096)
	benchEagerCompiled(b, 2*4*2048*4096, func(x *Tensor) *Tensor { return x.Softmax(-1) }, x)
}

func BenchmarkCPULogSoftmax2048x4096(b *testing.B) {
	x := Randn(1, Float32, 2048, 4096)
	benchEagerCompiled(b, 2*4*2048*4096, func(x *Tensor) *Tensor { return x.LogSoftmax(-1) }, x)
}

func BenchmarkCPULayerNorm2048x4096(b *testing.B) {
	x := Randn(1, Float32, 2048, 4096)
	w, bias := Randn(2, Float32, 4096), Randn(3, Float32, 4096)
	benchEagerCompiled(b, 2*4*2048*4096, func(x *Tensor) *Tensor { return x.LayerNorm([]int{4096}, w, bias, 1e-5) }, x)
}

func BenchmarkCPURMSNorm2048x4096(b *testing.B) {
	x := Randn(1, Float32, 2048, 4096)
	w := Randn(2, Float32, 4096)
	benchEagerCompiled(b, 2*4*2048*4096, func(x *Tensor) *Tensor { return x.RMSNorm([]int{4096}, w, 1e-6) }, x)
}

func BenchmarkCPUSoftmaxBF16_2048x4096(b *testing.B) {
	x := Randn(1, Float32, 2048, 4096).To(BFloat16)
	benchEagerCompiled(b, 2*2*2048*4096, func(x *Tensor) *Tensor { return x.To(Float32).Softmax(-1).To(BFloat16) }, x)
}

func BenchmarkCPUSumRows4096x4096(b *testing.B) {
	x := Randn(1, Float32, 4096, 4096)
	benchEagerCompiled(b, 4*4096*4096, func(x *Tensor) *Tensor { return x.Sum(-1) }, x)
}

func BenchmarkCPUMeanRows2x8M(b *testing.B) {
	x := Randn(1, Float32, 2, 1<<23)
	benchEagerCompiled(b, 4*2<<23, func(x *Tensor) *Tensor { return x.Mean(-1) }, x)
}

func BenchmarkCPUSumAll16M(b *testing.B) {
	x := Randn(1, Float32, 1<<24)
	benchEagerCompiled(b, 4<<24, func(x *Tensor) *Tensor { return x.Sum() }, x)
}

func BenchmarkCPUSoftmax32x1024(b *testing.B) {
	x := Randn(1, Float32, 32, 1024)
	benchEagerCompiled(b, 2*4*32*1024, func(x *Tensor) *Tensor { return x.Softmax(-1) }, x)
}

func BenchmarkCPUBiasGELU2048x4096(b *testing.B) {
	x, bias := Randn(1, Float32, 2048, 4096), Randn(2, Float32, 4096)
	benchEagerCompiled(b, 2*4*2048*4096, func(x *Tensor) *Tensor { return x.Add(bias).GELU() }, x)
}

func BenchmarkCPUSumCols4096x4096(b *testing.B) {
	x := Randn(1, Float32, 4096, 4096)
	benchEagerCompiled(b, 4*4096*4096, func(x *Tensor) *Tensor { return x.Sum(0) }, x)
}

func BenchmarkCPUSoftmax1x1M(b *testing.B) {
	x := Randn(1, Float32, 1, 1<<20)
	benchEagerCompiled(b, 2*4<<20, func(x *Tensor) *Tensor { return x.Softmax(-1) }, x)
}
