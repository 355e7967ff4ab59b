package program_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gocompile/array"
	"gocompile/tensor"
)

// tolerance per dtype, as the GPU parity tests of package tensor use.
var tolerance = map[tensor.DType]float64{tensor.Float64: 1e-10, tensor.Float32: 2e-4, tensor.Float16: 2e-2, tensor.BFloat16: 1e-1}

// refRows applies f to each line of x (logical shape shape) along dim d,
// in float64, and returns the results in x's logical order.
func refRows(x []float64, shape []int, d int, f func(in, out []float64)) []float64 {
	inner := 1
	for _, s := range shape[d+1:] {
		inner *= s
	}
	n := shape[d]
	outer := len(x) / max(n*inner, 1)
	out := make([]float64, len(x))
	in, res := make([]float64, n), make([]float64, n)
	for o := range outer {
		for i := range inner {
			for j := range n {
				in[j] = x[(o*n+j)*inner+i]
			}
			f(in, res)
			for j := range n {
				out[(o*n+j)*inner+i] = res[j]
			}
		}
	}
	return out
}

func refSoftmax(log bool) func(in, out []float64) {
	return func(in, out []float64) {
		m := math.Inf(-1)
		for _, v := range in {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range in {
			s += math.Exp(v - m)
		}
		for j, v := range in {
			if log {
				out[j] = v - m - math.Log(s)
			} else {
				out[j] = math.Exp(v-m) / s
			}
		}
	}
}

func refNorm(w, b []float64, rms bool, eps float64) func(in, out []float64) {
	return func(in, out []float64) {
		n := float64(len(in))
		mean, ss := 0.0, 0.0
		if !rms {
			for _, v := range in {
				mean += v
			}
			mean /= n
		}
		for _, v := range in {
			ss += (v - mean) * (v - mean)
		}
		r := 1 / math.Sqrt(ss/n+eps)
		for j, v := range in {
			out[j] = (v - mean) * r
			if w != nil {
				out[j] *= w[j]
			}
			if b != nil {
				out[j] += b[j]
			}
		}
	}
}

// closeTo reports the first element of got farther than tol·max(1, |want|)
// from want.
func closeTo(got, want []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] == want[i] || math.IsNaN(got[i]) && math.IsNaN(want[i]) {
			continue
		}
		if !(math.Abs(got[i]-want[i]) <= tol*math.Max(1, math.Abs(want[i]))) {
			return fmt.Errorf("element %d is %v, want %v (tolerance %g)", i, got[i], want[i], tol)
		}
	}
	return nil
}

// Eager Softmax, LogSoftmax, LayerNorm and RMSNorm on a GPU (one row
// kernel each where it applies, the decomposition elsewhere) match both the
// decomposition on the CPU and float64 references, over seeded random row
// counts for row lengths from 1 to 200000, in every floating dtype, on
// contiguous, offset, transposed and permuted inputs, over the last dim
// and (Softmax) others.
func TestGPUEagerCompositeParity(t *testing.T) {
	requireGPU(t)
	dev := tensor.CUDA(0)
	rng := rand.New(rand.NewPCG(16, 3))
	gen := tensor.NewGenerator(16)
	for _, R := range []int{1, 3, 7, 1023, 4097, 50257, 200000} {
		for _, many := range []bool{false, true} {
			rows := 1 + rng.IntN(4)
			if many {
				rows = min(1+rng.IntN(3000), max(1, (1<<22)/R))
			}
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
				tol := tolerance[dt]
				// Inputs: x [rows, R] contiguous; xs the same values at an
				// odd offset (a slice); xt a transposed view whose last
				// dim is strided; weight and bias [R].
				base := gen.Randn(tensor.Float64, rows, R+1).MulScalar(3).To(dt)
				x := base.Slice(1, 0, R, 1).Contiguous()
				xs := base.Slice(1, 1, R+1, 1)
				xt := x.T().Contiguous().T()
				w := gen.Randn(tensor.Float64, R).To(dt)
				b := gen.Randn(tensor.Float64, R).To(dt)
				xv, wv, bv := x.Float64s(), w.Float64s(), b.Float64s()
				xsv := xs.Float64s()
				shape := []int{rows, R}
				type op struct {
					name string
					in   []float64 // the input's values, logical order
					f    func(x *tensor.Tensor, w, b *tensor.Tensor) *tensor.Tensor
					x    *tensor.Tensor
					ref  func(in, out []float64)
					dim  int
				}
				ops := []op{
					{"softmax", xv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.Softmax(-1) }, x, refSoftmax(false), 1},
					{"softmax offset", xsv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.Softmax(1) }, xs, refSoftmax(false), 1},
					{"softmax transposed", xv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.Softmax(-1) }, xt, refSoftmax(false), 1},
					{"softmax dim 0 of a transpose", xv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.T().Softmax(0).T() }, x, refSoftmax(false), 1},
					{"softmax dim 0", xv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.Softmax(0) }, x, refSoftmax(false), 0},
					{"log softmax", xv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.LogSoftmax(-1) }, x, refSoftmax(true), 1},
					{"log softmax offset", xsv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.LogSoftmax(-1) }, xs, refSoftmax(true), 1},
					{"layer norm", xv, func(x, w, b *tensor.Tensor) *tensor.Tensor { return x.LayerNorm([]int{R}, w, b, 1e-5) }, x, refNorm(wv, bv, false, 1e-5), 1},
					{"layer norm transposed", xv, func(x, w, b *tensor.Tensor) *tensor.Tensor { return x.LayerNorm([]int{R}, w, b, 1e-5) }, xt, refNorm(wv, bv, false, 1e-5), 1},
					{"layer norm plain", xsv, func(x, _, _ *tensor.Tensor) *tensor.Tensor { return x.LayerNorm([]int{R}, nil, nil, 1e-5) }, xs, refNorm(nil, nil, false, 1e-5), 1},
					{"layer norm over 2 dims", xv, func(x, w, b *tensor.Tensor) *tensor.Tensor {
						return x.Reshape(rows, 1, R).LayerNorm([]int{1, R}, w.Reshape(1, R), b.Reshape(1, R), 1e-5).Reshape(rows, R)
					}, x, refNorm(wv, bv, false, 1e-5), 1},
					{"rms norm", xv, func(x, w, _ *tensor.Tensor) *tensor.Tensor { return x.RMSNorm([]int{R}, w, 1e-6) }, x, refNorm(wv, nil, true, 1e-6), 1},
					{"rms norm offset", xsv, func(x, w, _ *tensor.Tensor) *tensor.Tensor { return x.RMSNorm([]int{R}, w, 1e-6) }, xs, refNorm(wv, nil, true, 1e-6), 1},
				}
				// Var over the last dim: one value per row.
				for _, c := range []struct {
					name       string
					x          *tensor.Tensor
					in         []float64
					correction float64
					keep       bool
				}{{"var", x, xv, 1, false}, {"var offset keepdim", xs, xsv, 0, true}} {
					name := fmt.Sprintf("%s %v %dx%d", c.name, dt, rows, R)
					want := make([]float64, rows)
					for r := range rows {
						row := c.in[r*R : (r+1)*R]
						mean, ss := 0.0, 0.0
						for _, v := range row {
							mean += v
						}
						mean /= float64(R)
						for _, v := range row {
							ss += (v - mean) * (v - mean)
						}
						want[r] = ss / math.Max(float64(R)-c.correction, 0)
					}
					cpu := c.x.Var([]int{-1}, c.correction, c.keep)
					got := c.x.ToDevice(dev).Var([]int{-1}, c.correction, c.keep)
					if fmt.Sprint(got.Shape()) != fmt.Sprint(cpu.Shape()) || got.DType() != cpu.DType() {
						t.Fatalf("%s: %v %v, CPU %v %v", name, got.DType(), got.Shape(), cpu.DType(), cpu.Shape())
					}
					if err := closeTo(got.Float64s(), want, tol); err != nil {
						t.Errorf("%s: GPU vs float64: %v", name, err)
					}
					if err := closeTo(got.Float64s(), cpu.Float64s(), tol); err != nil {
						t.Errorf("%s: GPU vs CPU decomposition: %v", name, err)
					}
				}
				for _, o := range ops {
					name := fmt.Sprintf("%s %v %dx%d", o.name, dt, rows, R)
					want := refRows(o.in, shape, o.dim, o.ref)
					cpu := o.f(o.x, w, b)
					got := o.f(o.x.ToDevice(dev), w.ToDevice(dev), b.ToDevice(dev))
					if got.Device() != dev || got.DType() != cpu.DType() || fmt.Sprint(got.Shape()) != fmt.Sprint(cpu.Shape()) {
						t.Fatalf("%s: %v %v on %v, CPU %v %v", name, got.DType(), got.Shape(), got.Device(), cpu.DType(), cpu.Shape())
					}
					gv := got.Float64s()
					if err := closeTo(gv, want, tol); err != nil {
						t.Errorf("%s: GPU vs float64: %v", name, err)
					}
					if err := closeTo(gv, cpu.Float64s(), tol); err != nil {
						t.Errorf("%s: GPU vs CPU decomposition: %v", name, err)
					}
				}
			}
		}
	}
}

// Misuse of an eager composite on a GPU reports what the decomposition
// reports on the CPU.
func TestGPUEagerCompositeErrors(t *testing.T) {
	requireGPU(t)
	x := tensor.Randn(1, tensor.Float32, 4, 8)
	for _, c := range []struct {
		name string
		f    func(x *tensor.Tensor) *tensor.Tensor
	}{
		{"softmax dim", func(x *tensor.Tensor) *tensor.Tensor { return x.Softmax(2) }},
		{"layer norm shape", func(x *tensor.Tensor) *tensor.Tensor { return x.LayerNorm([]int{7}, nil, nil, 1e-5) }},
		{"rms norm weight", func(x *tensor.Tensor) *tensor.Tensor {
			return x.RMSNorm([]int{8}, tensor.Randn(2, tensor.Float32, 3).ToDevice(x.Device()), 1e-5)
		}},
		{"integer softmax", func(x *tensor.Tensor) *tensor.Tensor { return x.To(tensor.Int64).Softmax(-1) }},
	} {
		cpuErr := tensor.Try(func() { c.f(x) })
		gpuErr := tensor.Try(func() { c.f(x.ToDevice(tensor.CUDA(0))) })
		if cpuErr == nil || gpuErr == nil || cpuErr.Error() != gpuErr.Error() {
			t.Errorf("%s: GPU error %v, CPU error %v", c.name, gpuErr, cpuErr)
		}
	}
}

// One eager GPU Softmax (and LayerNorm, RMSNorm) is one kernel launch:
// captured into a CUDA graph, the call leaves exactly one kernel node.
func TestGPUEagerCompositeIsOneKernel(t *testing.T) {
	requireGPU(t)
	dev := tensor.CUDA(0)
	g := array.MustGPU("test", dev)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		for _, R := range []int{7, 1024, 4097, 50257} {
			x := tensor.Randn(3, dt, 32, R).ToDevice(dev)
			w := tensor.Randn(4, dt, R).ToDevice(dev)
			for name, f := range map[string]func() *tensor.Tensor{
				"softmax":     func() *tensor.Tensor { return x.Softmax(-1) },
				"log softmax": func() *tensor.Tensor { return x.LogSoftmax(-1) },
				"layer norm":  func() *tensor.Tensor { return x.LayerNorm([]int{R}, w, w, 1e-5) },
				"rms norm":    func() *tensor.Tensor { return x.RMSNorm([]int{R}, w, 1e-5) },
				"var":         func() *tensor.Tensor { return x.Var([]int{-1}, 1, false) },
			} {
				f() // compiles the kernel
				tensor.Synchronize(dev)
				if err := g.Stream().BeginCapture(); err != nil {
					t.Fatal(err)
				}
				y := f()
				graph, err := g.Stream().EndCapture()
				if err != nil {
					t.Fatalf("%s %v R=%d: capture: %v", name, dt, R, err)
				}
				nodes, others, err := graph.KernelNodes()
				graph.Destroy()
				if err != nil {
					t.Fatal(err)
				}
				if len(nodes) != 1 || others != 0 {
					t.Errorf("%s %v 32x%d: %d kernels and %d other nodes, want one kernel", name, dt, R, len(nodes), others)
				}
				_ = y
			}
		}
	}
}

// Compiled row regions (softmax, layer norm) on long and odd rows, few and
// many, match float64 references in every floating dtype: the stashed,
// grouped and looped kernels.
func TestGPURowLongParity(t *testing.T) {
	requireGPU(t)
	dev := tensor.CUDA(0)
	gen := tensor.NewGenerator(7)
	opts := []tensor.Option{tensor.WithBackend("inductor"), tensor.Dynamic(false), tensor.RecompileLimit(1000)}
	softmax := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(2).Softmax(-1) }, opts...)
	norm := tensor.Compile(func(x, w *tensor.Tensor) *tensor.Tensor {
		return x.LayerNorm([]int{x.Shape()[1]}, w, nil, 1e-5).Add(x)
	}, opts...)
	for _, c := range []struct{ rows, R int }{{256, 50257}, {3, 50257}, {40, 200000}, {4096, 7}, {1000, 3}, {77, 1}, {300, 4097}, {2, 30000}} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
			x := gen.Randn(tensor.Float64, c.rows, c.R).To(dt)
			w := gen.Randn(tensor.Float64, c.R).To(dt)
			xv, wv := x.Float64s(), w.Float64s()
			shape := []int{c.rows, c.R}
			x2 := make([]float64, len(xv))
			for i, v := range xv {
				x2[i] = 2 * v
			}
			name := fmt.Sprintf("%v %dx%d", dt, c.rows, c.R)
			if err := closeTo(softmax(x.ToDevice(dev)).Float64s(), refRows(x2, shape, 1, refSoftmax(false)), tolerance[dt]); err != nil {
				t.Errorf("softmax %s: %v", name, err)
			}
			want := refRows(xv, shape, 1, refNorm(wv, nil, false, 1e-5))
			for i := range want {
				want[i] += xv[i]
			}
			if err := closeTo(norm(x.ToDevice(dev), w.ToDevice(dev)).Float64s(), want, 2*tolerance[dt]); err != nil {
				t.Errorf("layer norm %s: %v", name, err)
			}
		}
	}
}
