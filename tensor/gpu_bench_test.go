package tensor

import (
	"fmt"
	"math"
	"testing"

	"gocompile/array"
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
	g := array.MustGPU("bench", CUDA(0))
	n := gpuBenchN * 4
	if err := g.Stream().CopyDtoD(y.v.DevicePtr(), x.v.DevicePtr(), n); err != nil {
		b.Fatal(err)
	}
	Synchronize(CUDA(0))
	b.SetBytes(2 * int64(n))
	b.ResetTimer()
	for range b.N {
		if err := g.Stream().CopyDtoD(y.v.DevicePtr(), x.v.DevicePtr(), n); err != nil {
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

// GPU kernels agree with the CPU on the layouts their fast paths take:
// row- and column-broadcast operands (aligned or not, inner a multiple of
// the vector width or not), partial tiles, and reductions over contiguous
// rows (unaligned starts, rows reduced a warp each, rows split across
// blocks), with max, min and the arg reductions' tie and NaN rules.
func TestGPUKernelLayouts(t *testing.T) {
	requireGPU(t)
	gpuDev := CUDA(0)
	check := func(name string, f func(xs ...*Tensor) *Tensor, tol float64, xs ...*Tensor) {
		t.Helper()
		var cs, gs []*Tensor
		for _, x := range xs {
			cs = append(cs, x.ToDevice(CPU))
			gs = append(gs, x.ToDevice(gpuDev))
		}
		want, got := f(cs...), f(gs...)
		if got.Device() != gpuDev || got.DType() != want.DType() || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
			t.Fatalf("%s: GPU %v %v %v, CPU %v %v", name, got.Device(), got.DType(), got.Shape(), want.DType(), want.Shape())
		}
		w, h := want.Float64s(), got.Float64s()
		for i := range w {
			scale := math.Max(1, math.Abs(w[i]))
			if !(w[i] == h[i] || math.Abs(w[i]-h[i]) <= tol*scale || (math.IsNaN(w[i]) && math.IsNaN(h[i]))) {
				t.Errorf("%s: element %d is %v on the GPU, %v on the CPU", name, i, h[i], w[i])
				return
			}
		}
	}
	add := func(xs ...*Tensor) *Tensor { return xs[0].Add(xs[1]) }
	mulGELU := func(xs ...*Tensor) *Tensor { return xs[0].Mul(xs[1]).GELU() }
	for _, md := range [][2]int{{37, 4096}, {5, 1023}, {9, 3}, {33, 1}, {3, 6}, {301, 4100}, {1000, 8}, {2, 2}} {
		m, d := md[0], md[1]
		a := Randn(1, Float32, m, d)
		row := Randn(2, Float32, d)
		col := Randn(3, Float32, m, 1)
		unaligned := Randn(4, Float32, d+1).Narrow(0, 1, d)
		name := fmt.Sprintf("%dx%d", m, d)
		fused := Compile(func(a, b *Tensor) *Tensor { return a.Add(b).GELU() }, WithBackend("inductor"))
		fusedGELU := func(xs ...*Tensor) *Tensor { return fused(xs[0], xs[1]) }
		check(name+" + row", add, 1e-6, a, row)
		check(name+" + unaligned row", add, 1e-6, a, unaligned)
		check(name+" + row first", add, 1e-6, row, a)
		check(name+" * col gelu", mulGELU, 2e-4, a, col)
		check(name+" fused + row gelu", fusedGELU, 2e-4, a, row)
		check(name+" fused + col gelu", fusedGELU, 2e-4, a, col)
		check(name+" exp expanded row", func(xs ...*Tensor) *Tensor { return xs[0].Expand(m, d).Exp() }, 2e-4, row)
		check(name+" float16 + row", add, 2e-2, a.To(Float16), row.To(Float16))
		check(name+" int32 * col", func(xs ...*Tensor) *Tensor { return xs[0].Mul(xs[1]) }, 0,
			a.MulScalar(100).To(Int32), col.MulScalar(100).To(Int32))
	}
	x := Randn(5, Float32, 3, 40, 64)
	check("3-d + 2-d row", add, 1e-6, x, Randn(6, Float32, 40, 64))
	check("3-d + per-batch col", add, 1e-6, x, Randn(7, Float32, 3, 1, 1))
	check("3-d + middle broadcast", add, 1e-6, x, Randn(8, Float32, 1, 40, 1))
	check("3-d + batch and row", add, 1e-6, x, Randn(9, Float32, 3, 1, 64))
	check("3-d float64 + col", add, 1e-12, x.To(Float64), Randn(10, Float64, 3, 40, 1))

	// Reductions.
	type red struct {
		name string
		f    func(x *Tensor) *Tensor
		tol  float64
	}
	reds := []red{
		{"sum", func(x *Tensor) *Tensor { return x.Sum(-1) }, 1e-4},
		{"mean", func(x *Tensor) *Tensor { return x.Mean(-1) }, 1e-5},
		{"max", func(x *Tensor) *Tensor { return x.Max(-1) }, 0},
		{"min", func(x *Tensor) *Tensor { return x.Min(-1) }, 0},
		{"argmax", func(x *Tensor) *Tensor { return x.ArgMax(-1, false) }, 0},
		{"argmin", func(x *Tensor) *Tensor { return x.ArgMin(-1, false) }, 0},
	}
	shapes := [][2]int{{7, 4097}, {2000, 100}, {3, 1}, {2, 1<<20 + 3}, {1, 50001}, {600, 2048}, {5000, 33}, {4300, 1500}}
	for _, s := range shapes {
		x := Randn(11, Float32, s[0], s[1])
		for _, r := range reds {
			name := fmt.Sprintf("%s %dx%d", r.name, s[0], s[1])
			check(name, func(xs ...*Tensor) *Tensor { return r.f(xs[0]) }, r.tol, x)
			if s[1] > 2 {
				check(name+" unaligned", func(xs ...*Tensor) *Tensor { return r.f(xs[0].Narrow(1, 1, s[1]-1)) }, r.tol, x)
			}
			check(name+" float16", func(xs ...*Tensor) *Tensor { return r.f(xs[0]) }, 2e-2, x.To(Float16))
			if r.name != "mean" {
				check(name+" int32", func(xs ...*Tensor) *Tensor { return r.f(xs[0]) }, 0, x.MulScalar(1000).To(Int32))
			}
		}
	}
	check("sum over dim 0", func(xs ...*Tensor) *Tensor { return xs[0].Sum(0) }, 1e-4, Randn(12, Float32, 300, 7))
	check("sum of all 5M", func(xs ...*Tensor) *Tensor { return xs[0].Sum() }, 1e-4, Randn(13, Float32, 5<<20+1))
	check("float64 sum of all", func(xs ...*Tensor) *Tensor { return xs[0].Sum() }, 1e-12, Randn(14, Float64, 3<<20+2))
	// Ties and NaNs across the chunks of a split row: the first index of the
	// best value wins, and the first NaN beats everything.
	n := 3<<20 + 5
	ties := make([]float32, n)
	for i := range ties {
		ties[i] = float32(i % 7)
	}
	ties[n-1], ties[n-2] = 9, 9
	check("argmax ties", func(xs ...*Tensor) *Tensor { return xs[0].ArgMax(-1, false) }, 0, FromSlice(ties, 1, n))
	check("argmin ties", func(xs ...*Tensor) *Tensor { return xs[0].ArgMin(-1, false) }, 0, FromSlice(ties, 1, n))
	nans := append([]float32(nil), ties...)
	nans[2<<20+1], nans[1<<20+3], nans[3<<20] = float32(math.NaN()), float32(math.NaN()), float32(math.NaN())
	for _, r := range reds[2:] {
		check(r.name+" NaN", func(xs ...*Tensor) *Tensor { return r.f(xs[0]) }, 0, FromSlice(nans, 1, n))
		check(r.name+" NaN rows", func(xs ...*Tensor) *Tensor { return r.f(xs[0]) }, 0, FromSlice(nans[:3<<20], 3<<10, 1<<10))
	}
}
