package tensor

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/inductor/program"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// A Linear followed by pointwise ops pairs the product with its epilogue;
// a product that is also returned, or read by two regions, does not pair.
func TestInductorPairsMatMulEpilogues(t *testing.T) {
	prog := captureBackend("inductor-gemm-capture", program.Config{})
	x, w, b := Randn(1, Float32, 3, 8), Randn(2, Float32, 5, 8), Randn(3, Float32, 5)
	for _, tc := range []struct {
		name  string
		f     func(x, w, b *Tensor) []*Tensor
		pairs int
	}{
		{"linear gelu", func(x, w, b *Tensor) []*Tensor { return []*Tensor{x.Linear(w, b).GELU()} }, 1},
		{"two layers", func(x, w, b *Tensor) []*Tensor {
			h := x.Linear(w, b).SiLU()
			return []*Tensor{h.MatMul(w.Narrow(1, 0, 5)).ReLU()}
		}, 2},
		{"product returned", func(x, w, b *Tensor) []*Tensor {
			y := x.MatMul(w.T())
			return []*Tensor{y, y.Add(b).ReLU()}
		}, 0},
		{"product read twice", func(x, w, b *Tensor) []*Tensor {
			y := x.MatMul(w.T())
			return []*Tensor{y.Add(b).ReLU().Add(y.Sum(-1).Unsqueeze(-1))}
		}, 0},
	} {
		prog.p = nil
		Compile(tc.f, WithBackend("inductor-gemm-capture"))(x, w, b)
		pairs := 0
		for _, s := range prog.steps() {
			if s.Epilogue {
				pairs++
			}
		}
		if pairs != tc.pairs {
			t.Errorf("%s: %d products paired with an epilogue, want %d", tc.name, pairs, tc.pairs)
		}
	}
}

// Products launch as dependents of the kernel ahead only when a kernel of
// the program runs before them and their weight is an input seen through
// views, never one the program computes; they read their first operand
// ahead of the kernel ahead's end (ReadyA) only when it is an input too.
func TestInductorDependentProducts(t *testing.T) {
	prog := captureBackend("inductor-dependent-capture", program.Config{})
	x, w, b := Randn(1, Float32, 3, 8), Randn(2, Float32, 8, 8), Randn(3, Float32, 8)
	for _, tc := range []struct {
		name        string
		f           func(x, w, b *Tensor) *Tensor
		want, ready []bool // per product, in program order
	}{
		{"one layer", func(x, w, b *Tensor) *Tensor { return x.Linear(w, b).GELU() }, []bool{false}, []bool{false}},
		{"two layers", func(x, w, b *Tensor) *Tensor { return x.Linear(w, b).GELU().Linear(w, b).GELU() }, []bool{false, true}, []bool{false, false}},
		{"after a pointwise kernel", func(x, w, b *Tensor) *Tensor { return x.Mul(x).Add(b).MatMul(w.T()) }, []bool{true}, []bool{false}},
		{"computed weight", func(x, w, b *Tensor) *Tensor {
			return x.Linear(w, b).ReLU().MatMul(w.MulScalar(2).T())
		}, []bool{false, false}, []bool{false, false}},
		{"products of an input", func(x, w, b *Tensor) *Tensor {
			return x.MatMul(w.T()).SiLU().Sum(-1).Add(x.MatMul(w.Narrow(0, 1, 7).T()).Sum(-1))
		}, []bool{false, true}, []bool{false, true}},
	} {
		prog.p = nil
		Compile(tc.f, WithBackend("inductor-dependent-capture"))(x, w, b)
		var got, ready []bool
		for _, s := range prog.steps() {
			if s.Kind == program.NodeStep && s.Region.Root.Op == ir.OpMatMul {
				got, ready = append(got, s.Dependent), append(ready, s.ReadyA)
			}
		}
		if !slices.Equal(got, tc.want) || !slices.Equal(ready, tc.ready) {
			t.Errorf("%s: dependent products %v, reading A early %v; want %v and %v", tc.name, got, ready, tc.want, tc.ready)
		}
	}
}

// refLinear computes act(x·wᵀ + bias + res) in float64, and per element
// Σ|x·w| (the scale of float32 rounding error).
func refLinear(x []float64, m, k int, w []float64, n int, bias, res []float64, act func(float64) float64) (out, scale []float64) {
	out, scale = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		for j := range n {
			s, sa := 0.0, 0.0
			for q := range k {
				v := x[i*k+q] * w[j*k+q]
				s += v
				sa += math.Abs(v)
			}
			if bias != nil {
				s += bias[j]
			}
			if res != nil {
				s += res[i*n+j]
			}
			out[i*n+j], scale[i*n+j] = act(s), sa
		}
	}
	return out, scale
}

// gemmClose checks float32 results against float64 ones: each element
// within 2e-5 of its scale Σ|x·w| plus 1e-6 (the sums over k run in a
// different order, as any float32 GEMM's do).
func gemmClose(t *testing.T, what string, got *Tensor, want, scale []float64) {
	t.Helper()
	g := got.Float64s()
	if len(g) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(g), len(want))
	}
	for i := range g {
		if d := math.Abs(g[i] - want[i]); !(d <= 2e-5*scale[i]+1e-6) {
			t.Fatalf("%s: element %d is %v, want %v (scale %g)", what, i, g[i], want[i], scale[i])
		}
	}
}

// gemmKernelsLoaded is the names of the generated GEMM kernels device d
// has loaded.
func gemmKernelsLoaded(d Device) map[string]bool {
	names := map[string]bool{}
	for _, s := range array.MustGPU("test", d).Kernels() {
		if strings.HasPrefix(s, "gc_gemm_") {
			names[s] = true
		}
	}
	return names
}

// Compiled Linear layers with epilogues equal float64 loops on odd sizes,
// strided and unaligned inputs, flattened batch dims and residual
// operands, through the generated GEMM kernel up to GemmMaxM rows and
// cuBLAS beyond.
func TestGPUGemmEpilogues(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	type layer struct{ x, w, b, res *Tensor }
	cases := []struct {
		name string
		f    func(l layer) *Tensor
		act  func(float64) float64
		bias bool
		res  bool
	}{
		{"linear gelu", func(l layer) *Tensor { return l.x.Linear(l.w, l.b).GELU() }, refGELU, true, false},
		{"plain product", func(l layer) *Tensor { return l.x.MatMul(l.w.T()) }, func(v float64) float64 { return v }, false, false},
		{"residual relu", func(l layer) *Tensor { return l.x.Linear(l.w, nil).Add(l.res).ReLU() },
			func(v float64) float64 { return max(v, 0) }, false, true},
		{"bias silu", func(l layer) *Tensor { return l.x.Linear(l.w, l.b).SiLU() },
			func(v float64) float64 { return v / (1 + math.Exp(-v)) }, true, false},
	}
	sizes := [][3]int{{1, 1, 1}, {1, 1024, 1024}, {3, 3, 3}, {3, 1023, 5}, {32, 1024, 1024}, {7, 4097, 3}, {64, 256, 1023}, {65, 64, 33}}
	for _, tc := range cases {
		for _, sz := range sizes {
			f := Compile(tc.f) // a function per size: within the recompile limit, all compiled
			m, k, n := sz[0], sz[1], sz[2]
			xs, ws, bs := Randn(1, Float32, m, k), Randn(2, Float32, n, k).MulScalar(1/math.Sqrt(float64(k))), Randn(3, Float32, n)
			rs := Randn(4, Float32, n, m) // read transposed: a strided operand
			var bias, res []float64
			if tc.bias {
				bias = bs.Float64s()
			}
			if tc.res {
				res = rs.T().Contiguous().Float64s()
			}
			want, scale := refLinear(xs.Float64s(), m, k, ws.Float64s(), n, bias, res, tc.act)
			l := layer{xs.To(dev), ws.To(dev), bs.To(dev), rs.To(dev).T()}
			gemmClose(t, fmt.Sprintf("%s %v", tc.name, sz), f(l), want, scale)

			// x with a row stride past its width, one element off alignment.
			wide := Randn(5, Float32, m, k+3)
			xv := wide.Narrow(1, 1, k)
			want, scale = refLinear(xv.Contiguous().Float64s(), m, k, ws.Float64s(), n, bias, res, tc.act)
			l.x = wide.To(dev).Narrow(1, 1, k)
			gemmClose(t, fmt.Sprintf("%s %v strided", tc.name, sz), f(l), want, scale)
		}
	}
	// Batch dims fold into rows.
	x3 := Randn(6, Float32, 2, 5, 64)
	w, b := Randn(7, Float32, 48, 64).MulScalar(0.125), Randn(8, Float32, 48)
	want, scale := refLinear(x3.Float64s(), 10, 64, w.Float64s(), 48, b.Float64s(), nil, refGELU)
	got := Compile(func(x, w, b *Tensor) *Tensor { return x.Linear(w, b).GELU() })(x3.To(dev), w.To(dev), b.To(dev))
	if s := got.Shape(); len(s) != 3 || s[0] != 2 || s[1] != 5 || s[2] != 48 {
		t.Fatalf("batched linear: shape %v, want [2 5 48]", s)
	}
	gemmClose(t, "batched linear gelu", got, want, scale)

	loaded := gemmKernelsLoaded(dev)
	epilogues := 0
	for name := range loaded {
		if !strings.HasPrefix(name, "gc_gemm_plain") {
			epilogues++
		}
	}
	if epilogues < 3 || !loaded[fmt.Sprintf("gc_gemm_plain_to_float32_%v", inductor.ChooseGemmConfig(3, 3, 3, array.MustGPU("test", dev).Dev().SMCount, 0, true))] {
		t.Errorf("the generated GEMM kernels did not run: loaded %v", loaded)
	}
}

// Every launch shape an autotuner may pick computes the same product.
// Infinities and NaNs in the operands reach the product as float32
// arithmetic has them, in every launch shape: an infinite operand does
// not turn its sums into NaN through the tensor-core kernel's split.
func TestGPUGemmNonFinite(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	const m, k, n = 8, 80, 24
	xs, ws := make([]float32, m*k), make([]float32, n*k)
	for i := range xs {
		xs[i] = float32(i%13) - 6
	}
	for i := range ws {
		ws[i] = float32(i%7+1) / 8 // positive: one infinite term keeps its sign
	}
	xs[0*k+5], xs[1*k+9], xs[2*k+79], xs[3*k+1] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), float32(math.Inf(1))
	xs[3*k+2] = float32(math.Inf(-1)) // +inf and -inf in one row: NaN
	x, w := FromSlice(xs, m, k), FromSlice(ws, n, k)
	want, _ := refLinear(x.Float64s(), m, k, w.Float64s(), n, nil, nil, func(v float64) float64 { return v })
	x, w = x.To(dev), w.To(dev)
	for _, c := range inductor.GemmCandidates(m, gpuArch(dev)) {
		name := fmt.Sprint("inductor-gemm-", c)
		captureBackend(name, program.Config{GemmConfig: func(int, int, int, int, int, bool) inductor.GemmConfig { return c }})
		got := Compile(func(x, w *Tensor) *Tensor { return x.MatMul(w.T()) }, WithBackend(name))(x, w).Float64s()
		for i, g := range got {
			wv := want[i]
			ok := math.Abs(g-wv) <= 1e-5*math.Abs(wv)+1e-4
			if math.IsInf(wv, 0) || math.IsNaN(wv) {
				ok = g == wv || math.IsNaN(g) && math.IsNaN(wv)
			}
			if !ok {
				t.Fatalf("%v: element [%d, %d] is %v, want %v", c, i/n, i%n, g, wv)
			}
		}
	}
}

func TestGPUGemmConfigs(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, sz := range [][3]int{{1, 1023, 37}, {5, 512, 130}, {32, 96, 1000}} {
		m, k, n := sz[0], sz[1], sz[2]
		x, w, b := Randn(1, Float32, m, k), Randn(2, Float32, n, k).MulScalar(0.05), Randn(3, Float32, n)
		want, scale := refLinear(x.Float64s(), m, k, w.Float64s(), n, b.Float64s(), nil, refGELU)
		xd, wd, bd := x.To(dev), w.To(dev), b.To(dev)
		for _, c := range inductor.GemmCandidates(m, gpuArch(dev)) {
			name := fmt.Sprint("inductor-gemm-", c)
			captureBackend(name, program.Config{GemmConfig: func(int, int, int, int, int, bool) inductor.GemmConfig { return c }})
			got := Compile(func(x, w, b *Tensor) *Tensor { return x.Linear(w, b).GELU() }, WithBackend(name))(xd, wd, bd)
			gemmClose(t, fmt.Sprintf("%v %v", sz, c), got, want, scale)
		}
	}
}

// MaxAutotune picks a GEMM launch shape by timing and computes the same
// product.
func TestGPUGemmMaxAutotune(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	x, w, b := Randn(1, Float32, 6, 200), Randn(2, Float32, 300, 200).MulScalar(0.07), Randn(3, Float32, 300)
	want, scale := refLinear(x.Float64s(), 6, 200, w.Float64s(), 300, b.Float64s(), nil, refGELU)
	before := stats.AutotuneSearches.Load()
	f := Compile(func(x, w, b *Tensor) *Tensor { return x.Linear(w, b).GELU() }, WithMode(MaxAutotune))
	for i := range 3 {
		gemmClose(t, fmt.Sprint("autotuned call ", i), f(x.To(dev), w.To(dev), b.To(dev)), want, scale)
	}
	if n := stats.AutotuneSearches.Load() - before; n != 1 {
		t.Errorf("%d autotune searches for one kernel and shape over three calls, want 1", n)
	}
}

// MaxAutotune also times the launch shapes of fused pointwise and row
// kernels, and their results stay those of eager code.
func TestGPUMaxAutotuneFusedKernels(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	f := func(x, w *Tensor) (*Tensor, *Tensor) {
		return x.MulScalar(1.5).AddScalar(0.25).GELU().Mul(x.Sigmoid()), x.Mul(w).Softmax(-1)
	}
	x, w := Randn(1, Float32, 300, 1000).To(dev), Randn(2, Float32, 1000).To(dev)
	before := stats.AutotuneSearches.Load()
	g := Compile(f, WithMode(MaxAutotune))
	for i := range 2 {
		a, b := g(x, w)
		ea, eb := f(x, w)
		nearValues(t, fmt.Sprint("pointwise, call ", i), a, ea)
		nearValues(t, fmt.Sprint("softmax, call ", i), b, eb)
	}
	if n := stats.AutotuneSearches.Load() - before; n != 2 {
		t.Errorf("%d autotune searches, want 2 (one pointwise kernel, one row kernel)", n)
	}
}

// An epilogue computed at its product's step does not write into a
// planned buffer that holds a value still to be read: here the buffer plan
// gives the second epilogue's slot to a row value made between the
// product and the epilogue's own step.
func TestGPUGemmEpilogueBufferLife(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	f := func(x, y, w, w2 *Tensor) *Tensor {
		c := y.MulScalar(3).AddScalar(1)
		a := x.MulScalar(2).AddScalar(1)
		m := a.Linear(w, nil)
		d := c.Sum(-1).Exp()
		e := m.ReLU().MulScalar(2)
		return e.Linear(w2, nil).Add(d.Unsqueeze(-1))
	}
	x, y := Randn(1, Float32, 8, 32), Randn(2, Float32, 8, 16).MulScalar(0.1)
	w, w2 := Randn(3, Float32, 24, 32).MulScalar(0.2), Randn(4, Float32, 12, 24).MulScalar(0.2)
	want := f(x, y, w, w2)
	got := Compile(f)(x.To(dev), y.To(dev), w.To(dev), w2.To(dev))
	nearValues(t, "two layers with a row value between", got, want)
}

// gpuArch is device d's compute capability as major*10+minor.
func gpuArch(d Device) int {
	dev := array.MustGPU("test", d).Dev()
	return dev.Major*10 + dev.Minor
}

// Compiled products of bfloat16 and float16 operands of up to
// inductor.Gemm16MaxM rows run as the generated kernels (tensor-core and
// warp), plain and with epilogues, on odd and vector-sized k, unaligned
// strided rows and every launch shape that takes them, and equal float64 loops over the same 16-bit values
// within the rounding of the stored result (and, eagerly, of the product
// before the epilogue). Beyond 16 rows cuBLAS computes the same.
func TestGPUGemm16(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	type layer struct{ x, w, b, res *Tensor }
	cases := []struct {
		name      string
		f         func(l layer) *Tensor
		act       func(float64) float64
		bias, res bool
	}{
		{"plain product", func(l layer) *Tensor { return l.x.MatMul(l.w.T()) }, func(v float64) float64 { return v }, false, false},
		{"bias silu", func(l layer) *Tensor { return l.x.Linear(l.w, l.b).SiLU() }, silu, true, false},
		{"residual", func(l layer) *Tensor { return l.x.Linear(l.w, nil).Add(l.res) }, func(v float64) float64 { return v }, false, true},
	}
	sizes := [][3]int{{1, 1, 1}, {1, 2048, 37}, {3, 1023, 5}, {8, 64, 129}, {16, 256, 1000}, {5, 4097, 3}, {17, 64, 33}}
	for _, dt := range []DType{BFloat16, Float16} {
		eps := 1.0 / 128 // bfloat16's spacing at 1, twice its rounding
		if dt == Float16 {
			eps = 1.0 / 1024
		}
		check := func(what string, got *Tensor, want, scale []float64) {
			t.Helper()
			if got.DType() != dt {
				t.Fatalf("%s: dtype %v, want %v", what, got.DType(), dt)
			}
			g := got.Float64s()
			for i := range g {
				if d := math.Abs(g[i] - want[i]); !(d <= eps*(math.Abs(want[i])+scale[i])+1e-3) {
					t.Fatalf("%s: element %d is %v, want %v (scale %g)", what, i, g[i], want[i], scale[i])
				}
			}
		}
		for _, tc := range cases {
			for _, sz := range sizes {
				f := Compile(tc.f)
				m, k, n := sz[0], sz[1], sz[2]
				xs := Randn(1, Float32, m, k).To(dt)
				ws := Randn(2, Float32, n, k).MulScalar(1 / math.Sqrt(float64(k))).To(dt)
				bs, rs := Randn(3, Float32, n).To(dt), Randn(4, Float32, n, m).To(dt)
				var bias, res []float64
				if tc.bias {
					bias = bs.Float64s()
				}
				if tc.res {
					res = rs.T().Contiguous().Float64s()
				}
				want, scale := refLinear(xs.Float64s(), m, k, ws.Float64s(), n, bias, res, tc.act)
				for i := range scale {
					if bias != nil {
						scale[i] += math.Abs(bias[i%n])
					}
					if res != nil {
						scale[i] += math.Abs(res[i])
					}
				}
				what := fmt.Sprintf("%v %s %v", dt, tc.name, sz)
				l := layer{xs.To(dev), ws.To(dev), bs.To(dev), rs.To(dev).T()}
				check(what, f(l), want, scale)

				wide := Randn(5, Float32, m, k+3).To(dt)
				xv := wide.Narrow(1, 1, k) // unaligned rows: the scalar loop
				want, _ = refLinear(xv.Contiguous().Float64s(), m, k, ws.Float64s(), n, bias, res, tc.act)
				l.x = wide.To(dev).Narrow(1, 1, k)
				check(what+" strided", f(l), want, scale)
			}
		}
		// Every warp launch shape computes the same product.
		const m, k, n = 6, 528, 70
		x, w := Randn(6, Float32, m, k).To(dt), Randn(7, Float32, n, k).MulScalar(0.05).To(dt)
		want, scale := refLinear(x.Float64s(), m, k, w.Float64s(), n, nil, nil, func(v float64) float64 { return v })
		xd, wd := x.To(dev), w.To(dev)
		for _, c := range inductor.GemmCandidates(m, gpuArch(dev)) {
			if !c.Takes(dt) || !c.Fits(k, true) {
				continue
			}
			name := fmt.Sprint("inductor-gemm16-", c)
			captureBackend(name, program.Config{GemmConfig: func(int, int, int, int, int, bool) inductor.GemmConfig { return c }})
			got := Compile(func(x, w *Tensor) *Tensor { return x.MatMul(w.T()) }, WithBackend(name))(xd, wd)
			check(fmt.Sprintf("%v %v", dt, c), got, want, scale)
		}
	}
	ran := 0
	for name := range gemmKernelsLoaded(dev) {
		if strings.Contains(name, "_bfloat16_to_") || strings.Contains(name, "_float16_to_") {
			ran++
		}
	}
	if ran < 4 {
		t.Errorf("%d 16-bit GEMM kernels loaded, want the plain and epilogue kernels of both types", ran)
	}
}

// A stack of layers replayed from a CUDA graph launches each product (the
// warp kernel at few rows, the tensor-core one at more) as a dependent of
// the kernel ahead, which writes its input: the products load their
// weights early, wait for it, and equal eager layers, call after call with
// new inputs.
func TestGPUGemmDependent(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, dt := range []DType{BFloat16, Float16, Float32} {
		for _, m := range []int{1, 3, 5, 8, 16} {
			const width, layers = 512, 6
			ws := make([]*Tensor, layers)
			for i := range ws {
				ws[i] = Randn(uint64(40+i), Float32, width, width).MulScalar(1 / math.Sqrt(width)).To(dt).To(dev)
			}
			stack := func(x *Tensor) *Tensor {
				for _, w := range ws {
					x = x.Linear(w, nil).SiLU().Add(x)
				}
				return x
			}
			graphed := Compile(stack, WithMode(ReduceOverhead))
			before := cuda.DependentLaunches()
			for call := range 4 {
				x := Randn(uint64(call), Float32, m, width).To(dt).To(dev)
				want, got := stack(x).Float64s(), graphed(x).Float64s()
				// Eager layers round each op's result to 16 bits, the fused
				// epilogue once: they drift apart by a few roundings a
				// layer. A product that read its input before the kernel
				// ahead wrote it would be off by the values themselves.
				scale, worst := 0.0, 0.0
				for i := range want {
					scale, worst = max(scale, math.Abs(want[i])), max(worst, math.Abs(got[i]-want[i]))
				}
				if tol := map[DType]float64{BFloat16: 0.03, Float16: 0.005, Float32: 1e-5}[dt]; !(worst <= tol*scale) {
					t.Errorf("%v, %d rows, call %d: replayed layers differ from eager by %g (largest value %g)", dt, m, call, worst, scale)
				}
			}
			// The products after the first launch as dependents (sm_90 on).
			if gpuArch(dev) >= 90 && cuda.DependentLaunches()-before < layers-1 {
				t.Errorf("%v, %d rows: %d products launched as dependents, want %d", dt, m, cuda.DependentLaunches()-before, layers-1)
			}
		}
	}
}

// Products of the function's input replayed from a CUDA graph read the
// input before the kernel ahead ends (ReadyA) and wait only before their
// stores and their epilogue's operands: each product's epilogue reads the
// value the kernel ahead (the previous product's epilogue) writes, call
// after call with new inputs. A reshape of a strided argument is a copy
// at run time, written by a kernel of the program: a product of it must
// not read it early, though the plan saw a view of an input.
func TestGPUGemmReadyA(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, dt := range []DType{BFloat16, Float16, Float32} {
		for _, m := range []int{1, 3, 8, 16} {
			const width, products = 1024, 8
			ws := make([]*Tensor, products)
			for i := range ws {
				ws[i] = Randn(uint64(60+i), Float32, width, width).MulScalar(1 / math.Sqrt(width)).To(dt).To(dev)
			}
			chain := func(x *Tensor) *Tensor {
				y := x.MatMul(ws[0].T())
				for _, w := range ws[1:] {
					y = x.MatMul(w.T()).Mul(y.SiLU()).Add(y)
				}
				return y
			}
			// x is [m, 2, width/2]; called with a transposed view, its
			// reshape copies.
			reshaped := func(x *Tensor) *Tensor {
				g := x.Mul(x).AddScalar(1).Reshape(m, width)
				return x.Reshape(m, width).MatMul(ws[0].T()).Add(g)
			}
			for _, tc := range []struct {
				name string
				f    func(*Tensor) *Tensor
				arg  func(call int) *Tensor
			}{
				{"products of an input", chain, func(call int) *Tensor {
					return Randn(uint64(call+10), Float32, m, width).To(dt).To(dev)
				}},
				{"product of a reshaped strided input", reshaped, func(call int) *Tensor {
					return Randn(uint64(call+20), Float32, m, width/2, 2).To(dt).To(dev).Transpose(1, 2)
				}},
			} {
				graphed := Compile(tc.f, WithMode(ReduceOverhead))
				before := cuda.DependentLaunches()
				for call := range 4 {
					x := tc.arg(call)
					want, got := tc.f(x).Float64s(), graphed(x).Float64s()
					scale, worst := 0.0, 0.0
					for i := range want {
						scale, worst = max(scale, math.Abs(want[i])), max(worst, math.Abs(got[i]-want[i]))
					}
					if tol := map[DType]float64{BFloat16: 0.05, Float16: 0.01, Float32: 1e-5}[dt]; !(worst <= tol*scale) {
						t.Errorf("%s, %v, %d rows, call %d: replayed products differ from eager by %g (largest value %g)", tc.name, dt, m, call, worst, scale)
					}
				}
				if tc.name == "products of an input" && gpuArch(dev) >= 90 && cuda.DependentLaunches()-before < products-1 {
					t.Errorf("%s, %v, %d rows: %d dependent launches, want at least %d", tc.name, dt, m, cuda.DependentLaunches()-before, products-1)
				}
			}
		}
	}
	ready := 0
	for name := range gemmKernelsLoaded(dev) {
		if strings.Contains(name, "_readya_") {
			ready++
		}
	}
	if ready == 0 {
		t.Errorf("no GEMM kernel reading A early was loaded")
	}
}

// BenchmarkGPUAttentionDecode times the attention of a decode step: one
// query per head (32 query heads over 4 key heads of 64 features,
// bfloat16) against a 2048-position cache with its first 1025 positions
// visible, once for each of 22 layers' caches, replayed from a CUDA graph.
// It reports µs an attention and the cache's bytes over that time.
func BenchmarkGPUAttentionDecode(b *testing.B) {
	requireGPU(b)
	dev := CUDA(0)
	const layers, hq, hkv, s, e = 22, 32, 4, 2048, 64
	var ks, vs []*Tensor
	for i := range layers {
		ks = append(ks, Randn(uint64(2*i), Float32, 1, hkv, s, e).To(BFloat16).To(dev))
		vs = append(vs, Randn(uint64(2*i+1), Float32, 1, hkv, s, e).To(BFloat16).To(dev))
	}
	mask := Arange(0, s, 1, Int64).Le(FromSlice([]int64{1024}).Unsqueeze(1)).To(dev) // [1, s]
	step := Compile(func(q *Tensor) *Tensor {
		y := q
		for i := range layers {
			y = ScaledDotProductAttention(y, ks[i], vs[i], mask, false, 0)
		}
		return y
	}, WithMode(ReduceOverhead))
	q := Randn(9, Float32, 1, hq, 1, e).To(BFloat16).To(dev)
	for range 3 {
		step(q).Float64s()
	}
	b.ResetTimer()
	for range b.N {
		step(q)
	}
	step(q).Float64s()
	per := b.Elapsed().Seconds() * 1e6 / float64(b.N*layers)
	b.ReportMetric(per, "µs/attention")
	b.ReportMetric(float64(2*hkv*s*e*2)/(per*1e3), "GB/s")
}
