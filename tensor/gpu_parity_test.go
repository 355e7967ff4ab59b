package tensor

import (
	"math"
	"testing"
)

// GPU results equal CPU results op by op, on odd sizes, views and
// broadcasts, in every floating dtype (the reference tables check both
// against float64 separately when the suite runs with GOCOMPILE_DEVICE=cuda).
func TestGPUMatchesCPU(t *testing.T) {
	requireGPU(t)
	gpuDev := CUDA(0)
	type inputs struct{ a, b, idx *Tensor }
	ops := []struct {
		name string
		f    func(in inputs) *Tensor
	}{
		{"add broadcast", func(in inputs) *Tensor { return in.a.Add(in.b.Select(0, 0)) }},
		{"sub transposed", func(in inputs) *Tensor { return in.a.T().Sub(in.b.T()) }},
		{"mul stepped", func(in inputs) *Tensor { return in.a.Slice(1, 0, 1023, 3).Mul(in.b.Slice(1, 1, 1023, 3)) }},
		{"div scalar", func(in inputs) *Tensor { return in.a.DivScalar(3) }},
		{"pow", func(in inputs) *Tensor { return in.a.Abs().Pow(in.b) }},
		{"maximum", func(in inputs) *Tensor { return in.a.Maximum(in.b) }},
		{"unary chain", func(in inputs) *Tensor {
			return in.a.Exp().Log().Sqrt().Rsqrt().Sin().Cos().Tanh().Erf().Sigmoid().Neg().Abs()
		}},
		{"activations", func(in inputs) *Tensor { return in.a.ReLU().Add(in.a.GELU()).Add(in.a.GELUTanh()).Add(in.a.SiLU()) }},
		{"compare where", func(in inputs) *Tensor { return Where(in.a.Gt(in.b), in.a, in.b.MulScalar(2)) }},
		{"clamp masked", func(in inputs) *Tensor { return in.a.Clamp(-0.5, 0.5).MaskedFill(in.b.LtScalar(0), 7) }},
		{"cast", func(in inputs) *Tensor { return in.a.MulScalar(100).To(Int32).To(Float64) }},
		{"sum dims", func(in inputs) *Tensor { return in.a.Sum(0) }},
		{"mean all", func(in inputs) *Tensor { return in.a.Mean() }},
		{"max keepdim", func(in inputs) *Tensor { return in.a.MaxKeepDim(1) }},
		{"argmin", func(in inputs) *Tensor { return in.a.ArgMin(1, false).To(Float64) }},
		{"var", func(in inputs) *Tensor { return in.a.Var([]int{1}, 1, false) }},
		{"softmax", func(in inputs) *Tensor { return in.a.Softmax(-1) }},
		{"log softmax", func(in inputs) *Tensor { return in.a.T().LogSoftmax(-1) }},
		{"layer norm", func(in inputs) *Tensor {
			return in.a.LayerNorm([]int{1023}, in.b.Select(0, 1), in.b.Select(0, 2), 1e-5)
		}},
		{"rms norm", func(in inputs) *Tensor { return in.a.RMSNorm([]int{1023}, in.b.Select(0, 1), 1e-6) }},
		{"matmul", func(in inputs) *Tensor { return in.a.MatMul(in.b.T()) }},
		{"linear", func(in inputs) *Tensor { return in.a.Linear(in.b, in.b.Select(1, 0)) }},
		{"cat stack", func(in inputs) *Tensor {
			return Stack([]*Tensor{Cat([]*Tensor{in.a, in.b}, 1), Cat([]*Tensor{in.b, in.a}, 1)}, 0)
		}},
		{"gather", func(in inputs) *Tensor { return in.a.Gather(1, in.idx) }},
		{"index select", func(in inputs) *Tensor { return in.a.IndexSelect(1, in.idx.Select(0, 0)) }},
		{"embedding", func(in inputs) *Tensor { return Embedding(in.idx, in.a.T()) }},
		{"contiguous", func(in inputs) *Tensor { return in.a.T().Contiguous() }},
	}
	tol := map[DType]float64{Float64: 1e-10, Float32: 2e-4, Float16: 2e-2, BFloat16: 1e-1}
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16} {
		g := NewGenerator(9)
		cpuIn := inputs{
			a:   g.Randn(Float64, 3, 1023).cpu().To(dt),
			b:   g.Randn(Float64, 3, 1023).cpu().To(dt),
			idx: g.RandInt(-1023, 1023, 3, 5).cpu(),
		}
		gpuIn := inputs{cpuIn.a.To(gpuDev), cpuIn.b.To(gpuDev), cpuIn.idx.To(gpuDev)}
		for _, op := range ops {
			want := op.f(cpuIn)
			got := op.f(gpuIn)
			if got.Device() != gpuDev {
				t.Fatalf("%s on %v: result on %v", op.name, dt, got.Device())
			}
			if got.DType() != want.DType() || len(got.Shape()) != len(want.Shape()) {
				t.Fatalf("%s on %v: %v %v, CPU %v %v", op.name, dt, got.DType(), got.Shape(), want.DType(), want.Shape())
			}
			w, h := want.Float64s(), got.Float64s()
			for i := range w {
				scale := math.Max(1, math.Abs(w[i]))
				if !(w[i] == h[i] || math.Abs(w[i]-h[i]) <= tol[dt]*scale || (math.IsNaN(w[i]) && math.IsNaN(h[i]))) {
					t.Errorf("%s on %v: element %d is %v on the GPU, %v on the CPU", op.name, dt, i, h[i], w[i])
					break
				}
			}
		}
	}
}
