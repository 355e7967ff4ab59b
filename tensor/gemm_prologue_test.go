package tensor

import (
	"fmt"
	"math"
	"testing"

	"gocompile/inductor/program"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// normLinear is a norm ahead of a Linear layer, the shape a decoder's
// attention and feed-forward blocks start with, in the forms a product's
// kernel may compute its operand in (a prologue) and forms it may not.
type normLinear struct {
	name string
	f    func(x, w, nw, nb, res *Tensor) *Tensor
	// fold says whether the product step takes the norm as its prologue.
	fold bool
}

var normLinears = []normLinear{
	{"rms norm, linear", func(x, w, nw, nb, res *Tensor) *Tensor {
		return x.RMSNorm([]int{x.Shape()[x.Dim()-1]}, nw, 1e-6).Linear(w, nil)
	}, true},
	{"layer norm, linear with bias, residual", func(x, w, nw, nb, res *Tensor) *Tensor {
		k, n := x.Shape()[x.Dim()-1], w.Shape()[0]
		return x.LayerNorm([]int{k}, nw, nb.Narrow(0, 0, k), 1e-5).Linear(w, nb.Narrow(0, 0, n)).Add(res)
	}, true},
	{"softmax, product", func(x, w, nw, nb, res *Tensor) *Tensor {
		return x.Softmax(-1).MatMul(w.T())
	}, true},
	{"rms norm read twice", func(x, w, nw, nb, res *Tensor) *Tensor {
		h := x.RMSNorm([]int{x.Shape()[x.Dim()-1]}, nw, 1e-6)
		return h.Linear(w, nil).Add(h.SumKeepDim(-1))
	}, false},
}

// normLinearInputs are the operands of a normLinear at m rows of k
// features and n outputs, in dt on dev.
func normLinearInputs(m, k, n int, dt DType, dev Device) (x, w, nw, nb, res *Tensor) {
	x = Randn(1, Float32, m, k).MulScalar(2).AddScalar(0.5)
	w = Randn(2, Float32, n, k).MulScalar(1 / math.Sqrt(float64(k)))
	nw = Randn(3, Float32, k).MulScalar(0.2).AddScalar(1)
	nb = Randn(4, Float32, max(k, n)).MulScalar(0.1)
	res = Randn(5, Float32, m, n)
	to := func(t *Tensor) *Tensor { return t.To(dt).To(dev) }
	return to(x), to(w), to(nw), to(nb), to(res)
}

// checkNormLinear compares got with f computed in float64 on the CPU from
// the same (rounded) operands, within rtol of the result's largest
// magnitude (a product's elements may cancel to near zero).
func checkNormLinear(t *testing.T, what string, got *Tensor, f func(x, w, nw, nb, res *Tensor) *Tensor, ins ...*Tensor) {
	t.Helper()
	ref := make([]*Tensor, len(ins))
	for i, in := range ins {
		ref[i] = in.To(CPU).To(Float64)
	}
	want := f(ref[0], ref[1], ref[2], ref[3], ref[4]).Float64s()
	rtol := map[DType]float64{Float32: 1e-4, Float16: 4e-3, BFloat16: 2.5e-2}[got.DType()]
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	g := got.Float64s()
	if len(g) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(g), len(want))
	}
	for i := range g {
		if d := math.Abs(g[i] - want[i]); !(d <= rtol*(scale+1)) {
			t.Fatalf("%s: element %d is %v, want %v (largest %g)", what, i, g[i], want[i], scale)
		}
	}
}

// The plan: a product takes the row step before it as its prologue where
// that step's value is the product's first operand and nothing else's.
func TestCompileProductProloguePlan(t *testing.T) {
	prog := captureBackend("inductor-prologue-plan", program.Config{})
	for _, c := range normLinears {
		x, w, nw, nb, res := normLinearInputs(3, 64, 5, Float32, DefaultDevice())
		got := Compile(c.f, WithBackend("inductor-prologue-plan"))(x, w, nw, nb, res)
		checkNormLinear(t, c.name, got, c.f, x, w, nw, nb, res)
		folds := 0
		for i, s := range prog.steps() {
			if s.Prologue {
				folds++
				if i == 0 || prog.steps()[i-1].Kind != program.RowStep || s.Region.Root.Op != ir.OpMatMul {
					t.Errorf("%s: step %d has a prologue, but is no product after a row step", c.name, i)
				}
			}
		}
		if want := map[bool]int{true: 1, false: 0}[c.fold]; folds != want {
			t.Errorf("%s: %d products with a prologue, want %d", c.name, folds, want)
		}
	}
}

// On a GPU, products whose kernel computes the norm give what the norm
// and the product give apart, on every dtype, on odd sizes (where the
// kernel cannot, the row step runs), plainly and replayed from a CUDA
// graph.
func TestGPUProductPrologue(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, dt := range []DType{Float32, BFloat16, Float16} {
		for _, c := range normLinears {
			for _, sz := range [][3]int{{1, 2048, 1023}, {1, 1, 1}, {2, 8, 3}, {3, 1000, 7}, {4, 64, 4097}, {8, 256, 33}, {16, 512, 64}, {1, 4097, 5}} {
				m, k, n := sz[0], sz[1], sz[2]
				what := fmt.Sprintf("%s, %v, %d×%d·%d", c.name, dt, m, k, n)
				x, w, nw, nb, res := normLinearInputs(m, k, n, dt, dev)
				before := stats.ProductPrologues.Load()
				got := Compile(c.f)(x, w, nw, nb, res)
				checkNormLinear(t, what, got, c.f, x, w, nw, nb, res)
				folded := stats.ProductPrologues.Load() > before
				// One row of whole 16-byte vectors: the warp kernel, whose
				// block holds its row of A.
				if want := c.fold && m == 1 && k*dt.Size()%16 == 0; want && !folded {
					t.Errorf("%s: the product's kernel did not compute the norm", what)
				}
				if folded && !c.fold {
					t.Errorf("%s: a norm read twice was computed by the product", what)
				}
			}
		}
	}

	// A decoder's residual stream, replayed from a CUDA graph with the
	// products launched as dependents: every call is as close to the
	// block computed in float64 as eager is (16-bit eager rounds every
	// op's result, compiled only the stored ones: after three layers the
	// two differ by a few of bfloat16's steps either way).
	for _, dt := range []DType{BFloat16, Float32} {
		const d, ffn = 256, 512
		w1, w2 := Randn(6, Float32, ffn, d).MulScalar(0.06).To(dt).To(dev), Randn(7, Float32, d, ffn).MulScalar(0.04).To(dt).To(dev)
		w3 := Randn(12, Float32, d, d).MulScalar(0.06).To(dt).To(dev)
		n1, n2 := Randn(8, Float32, d).MulScalar(0.1).AddScalar(1).To(dt).To(dev), Randn(9, Float32, d).MulScalar(0.1).AddScalar(1).To(dt).To(dev)
		block := func(x *Tensor) *Tensor {
			for range 3 {
				h := x.RMSNorm([]int{d}, n1, 1e-6).Linear(w1, nil).SiLU()
				x = x.Add(h.Linear(w2, nil))
				x = x.Add(x.RMSNorm([]int{d}, n2, 1e-6).Linear(w3, nil))
			}
			return x
		}
		replayed := Compile(block, WithMode(ReduceOverhead))
		f64 := func(t *Tensor) *Tensor { return t.To(CPU).To(Float64) }
		block64 := func(x *Tensor) *Tensor {
			w1, w2, w3, n1, n2 := f64(w1), f64(w2), f64(w3), f64(n1), f64(n2)
			for range 3 {
				h := x.RMSNorm([]int{d}, n1, 1e-6).Linear(w1, nil).SiLU()
				x = x.Add(h.Linear(w2, nil))
				x = x.Add(x.RMSNorm([]int{d}, n2, 1e-6).Linear(w3, nil))
			}
			return x
		}
		for call := range 4 {
			x := Randn(uint64(10+call), Float32, 1, d).To(dt).To(dev)
			before := stats.ProductPrologues.Load()
			got, eager, ref := replayed(x).Float64s(), block(x).Float64s(), block64(f64(x)).Float64s()
			worst := func(v []float64) (e float64) {
				for i := range ref {
					e = max(e, math.Abs(v[i]-ref[i])/(math.Abs(ref[i])+1))
				}
				return e
			}
			floor := map[DType]float64{Float32: 1e-5, BFloat16: 8e-3}[dt]
			if ge, ee := worst(got), worst(eager); ge > max(2*ee, floor) {
				t.Errorf("%v decoder block, call %d: compiled is %.3g from float64, eager %.3g", dt, call, ge, ee)
			}
			if call == 0 && stats.ProductPrologues.Load() == before {
				t.Errorf("%v decoder block: no product computed its norm", dt)
			}
		}
	}
}
