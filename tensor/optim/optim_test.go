package optim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/internal/stats"
	"gocompile/internal/testcache"
	"gocompile/tensor"
)

// The compiled steps write kernels to a temporary cache, not the user's.
func TestMain(m *testing.M) { testcache.Main(m) }

// refStep runs the optimizer's update on plain float64 values: the
// parameter p and gradient g of each step, in order.
type refOpt interface {
	step(p, g []float64)
}

type refSGD struct {
	lr, momentum, dampening, wd float64
	nesterov                    bool
	buf                         []float64
}

func (r *refSGD) step(p, g []float64) {
	for i := range p {
		d := g[i] + r.wd*p[i]
		if r.momentum != 0 {
			if r.buf == nil {
				r.buf = make([]float64, len(p))
				for j := range p { // NaN: no momentum yet
					r.buf[j] = math.NaN()
				}
			}
			if math.IsNaN(r.buf[i]) {
				r.buf[i] = d
			} else {
				r.buf[i] = r.momentum*r.buf[i] + (1-r.dampening)*d
			}
			if r.nesterov {
				d += r.momentum * r.buf[i]
			} else {
				d = r.buf[i]
			}
		}
		p[i] -= r.lr * d
	}
}

type refAdamW struct {
	lr, b1, b2, eps, wd float64
	m, v                []float64
	t                   int
}

func (r *refAdamW) step(p, g []float64) {
	if r.m == nil {
		r.m, r.v = make([]float64, len(p)), make([]float64, len(p))
	}
	r.t++
	for i := range p {
		p[i] *= 1 - r.lr*r.wd
		r.m[i] = r.b1*r.m[i] + (1-r.b1)*g[i]
		r.v[i] = r.b2*r.v[i] + (1-r.b2)*g[i]*g[i]
		mh := r.m[i] / (1 - math.Pow(r.b1, float64(r.t)))
		vh := r.v[i] / (1 - math.Pow(r.b2, float64(r.t)))
		p[i] -= r.lr * mh / (math.Sqrt(vh) + r.eps)
	}
}

// Each optimizer, over several steps of a small least-squares problem,
// gives the parameters a float64 loop gives from the same gradients.
func TestOptimizersMatchReference(t *testing.T) {
	x := tensor.Randn(1, tensor.Float64, 8, 5)
	y := tensor.Randn(2, tensor.Float64, 8, 3)
	loss := func(w *tensor.Tensor) *tensor.Tensor {
		d := x.MatMul(w).Sub(y)
		return d.Mul(d).Mean()
	}
	type stepper interface {
		Step()
		ZeroGrad()
	}
	for _, tc := range []struct {
		name string
		make func(w *tensor.Tensor) stepper
		ref  refOpt
	}{
		{"sgd", func(w *tensor.Tensor) stepper { return NewSGD([]*tensor.Tensor{w}, 0.1) }, &refSGD{lr: 0.1}},
		{"sgd momentum", func(w *tensor.Tensor) stepper {
			o := NewSGD([]*tensor.Tensor{w}, 0.05)
			o.Momentum, o.Dampening, o.WeightDecay = 0.9, 0.1, 0.01
			return o
		}, &refSGD{lr: 0.05, momentum: 0.9, dampening: 0.1, wd: 0.01}},
		{"sgd nesterov", func(w *tensor.Tensor) stepper {
			o := NewSGD([]*tensor.Tensor{w}, 0.05)
			o.Momentum, o.Nesterov = 0.8, true
			return o
		}, &refSGD{lr: 0.05, momentum: 0.8, nesterov: true}},
		{"adamw", func(w *tensor.Tensor) stepper { return NewAdamW([]*tensor.Tensor{w}, 0.01) },
			&refAdamW{lr: 0.01, b1: 0.9, b2: 0.999, eps: 1e-8, wd: 0.01}},
	} {
		w := tensor.Randn(3, tensor.Float64, 5, 3).SetRequiresGrad(true)
		opt := tc.make(w)
		ref := w.Detach().Contiguous().Float64s()
		for step := range 6 {
			opt.ZeroGrad()
			loss(w).Backward()
			g := w.Grad().Float64s()
			opt.Step()
			tc.ref.step(ref, g)
			got := w.Detach().Float64s()
			for i := range ref {
				if math.Abs(got[i]-ref[i]) > 1e-12*math.Max(1, math.Abs(ref[i])) {
					t.Fatalf("%s step %d: parameter %d is %v, reference %v", tc.name, step, i, got[i], ref[i])
				}
			}
		}
		if w.Grad() == nil || !w.RequiresGrad() || !w.IsLeaf() {
			t.Errorf("%s: the parameter stopped being a leaf with a gradient", tc.name)
		}
	}
}

// ClipGradNorm returns the joint norm and scales gradients above the
// limit to it, leaving smaller ones alone.
func TestClipGradNorm(t *testing.T) {
	a := tensor.FromSlice([]float64{1, 2}, 2).SetRequiresGrad(true)
	b := tensor.FromSlice([]float64{2}, 1).SetRequiresGrad(true)
	a.SetGrad(tensor.FromSlice([]float64{3, 0}, 2))
	b.SetGrad(tensor.FromSlice([]float64{4}, 1))
	if n := ClipGradNorm([]*tensor.Tensor{a, b}, 1); math.Abs(n-5) > 1e-12 {
		t.Errorf("norm %v, want 5", n)
	}
	want := 1 / (5 + 1e-6)
	if g := a.Grad().Float64s(); math.Abs(g[0]-3*want) > 1e-12 || g[1] != 0 {
		t.Errorf("clipped gradient %v, want [%v 0]", g, 3*want)
	}
	if n := ClipGradNorm([]*tensor.Tensor{a, b}, 10); math.Abs(n-5*want) > 1e-9 {
		t.Errorf("second norm %v, want %v", n, 5*want)
	}
	if g := b.Grad().Float64s(); math.Abs(g[0]-4*want) > 1e-12 {
		t.Errorf("a gradient below the limit changed: %v", g)
	}
}

// A compiled step gives the eager step's parameters, step after step,
// compiled once, for each optimizer; a step with a missing gradient runs
// eagerly.
func TestCompiledOptimizers(t *testing.T) {
	type optimizer interface {
		Step()
		ZeroGrad()
		setLR(float64)
		compiles() (n, eager int64)
	}
	for _, tc := range []struct {
		name string
		make func(ps []*tensor.Tensor, compiled bool) optimizer
	}{
		{"adamw", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewAdamW(ps, 0.05)
			o.Compiled = compiled
			return adamw{o}
		}},
		{"sgd momentum", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewSGD(ps, 0.05)
			o.Momentum, o.Dampening, o.WeightDecay, o.Compiled = 0.9, 0.1, 0.01, compiled
			return sgd{o}
		}},
		{"sgd nesterov", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewSGD(ps, 0.05)
			o.Momentum, o.Nesterov, o.Compiled = 0.8, true, compiled
			return sgd{o}
		}},
		{"sgd", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewSGD(ps, 0.05)
			o.Compiled = compiled
			return sgd{o}
		}},
	} {
		mk := func() []*tensor.Tensor {
			return []*tensor.Tensor{
				tensor.Randn(1, tensor.Float64, 4, 3).SetRequiresGrad(true),
				tensor.Randn(2, tensor.Float64, 3).SetRequiresGrad(true),
			}
		}
		pe, pc := mk(), mk()
		eager, compiled := tc.make(pe, false), tc.make(pc, true)
		x := tensor.Randn(3, tensor.Float64, 5, 4)
		loss := func(p []*tensor.Tensor) *tensor.Tensor { return x.MatMul(p[0]).Add(p[1]).Tanh().Sum() }
		for step := range 5 {
			eager.ZeroGrad()
			compiled.ZeroGrad()
			loss(pe).Backward()
			loss(pc).Backward()
			if step == 3 {
				eager.setLR(0.02) // a new learning rate: no recompile
				compiled.setLR(0.02)
			}
			eager.Step()
			compiled.Step()
			for i := range pe {
				want, got := pe[i].Detach().Float64s(), pc[i].Detach().Float64s()
				for j := range want {
					if math.Abs(got[j]-want[j]) > 1e-12*math.Max(1, math.Abs(want[j])) {
						t.Fatalf("%s step %d: parameter %d element %d is %v compiled, %v eager", tc.name, step, i, j, got[j], want[j])
					}
				}
			}
		}
		if n, e := compiled.compiles(); n != 1 || e != 0 {
			t.Errorf("%s: %d compilations and %d eager calls over 5 steps, want 1 and 0", tc.name, n, e)
		}
		// A parameter without a gradient: the step runs eagerly.
		pc[1].ZeroGrad()
		pe[1].ZeroGrad()
		eager.Step()
		compiled.Step()
		if !slicesEqual(pe[0].Detach().Float64s(), pc[0].Detach().Float64s(), 1e-12) {
			t.Errorf("%s: the eager fallback step differs", tc.name)
		}
	}
}

type adamw struct{ *AdamW }

func (o adamw) setLR(lr float64) { o.LR = lr }
func (o adamw) compiles() (int64, int64) {
	return o.stats.Compiles.Load(), o.stats.EagerCalls.Load()
}

type sgd struct{ *SGD }

func (o sgd) setLR(lr float64) { o.LR = lr }
func (o sgd) compiles() (int64, int64) {
	return o.stats.Compiles.Load(), o.stats.EagerCalls.Load()
}

// A parameter whose first gradient comes a step after the others' starts
// its momentum buffer then, as torch.optim.SGD does (buf = d), compiled
// or not.
func TestSGDLateParameter(t *testing.T) {
	for _, compiled := range []bool{false, true} {
		a := tensor.FromSlice([]float64{1, 2}, 2).SetRequiresGrad(true)
		b := tensor.FromSlice([]float64{3}, 1).SetRequiresGrad(true)
		o := NewSGD([]*tensor.Tensor{a, b}, 0.1)
		o.Momentum, o.Dampening, o.Compiled = 0.9, 0.5, compiled
		a.SetGrad(tensor.FromSlice([]float64{1, 1}, 2))
		o.Step() // b has no gradient yet
		a.SetGrad(tensor.FromSlice([]float64{1, 1}, 2))
		b.SetGrad(tensor.FromSlice([]float64{2}, 1))
		o.Step()
		// b: buf = d = 2 on its first step, p = 3 − 0.1·2.
		if got := b.Detach().Float64s()[0]; math.Abs(got-2.8) > 1e-12 {
			t.Errorf("compiled %v: b is %v, want 2.8", compiled, got)
		}
		// a: buf = 1, then 0.9·1 + 0.5·1 = 1.4; p = 1 − 0.1 − 0.14.
		if got := a.Detach().Float64s()[0]; math.Abs(got-0.76) > 1e-12 {
			t.Errorf("compiled %v: a is %v, want 0.76", compiled, got)
		}
	}
}

func slicesEqual(a, b []float64, tol float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*math.Max(1, math.Abs(a[i])) {
			return false
		}
	}
	return len(a) == len(b)
}

// A compiled step updates every parameter (up to 2^20 elements each) in
// one kernel: each parameter's buffers and the parameter, which reads
// them, in one unit of one combo, and on a GPU one launch a step. Its
// parameters match the eager step's.
func TestCompiledStepIsOneKernel(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stores is how many storages each parameter's update writes
		// (with the parameter), each stored by the kernel directly.
		stores int
		make   func(ps []*tensor.Tensor) (o interface{ Step() }, r rule)
	}{
		{"adamw", 3, func(ps []*tensor.Tensor) (interface{ Step() }, rule) {
			o := NewAdamW(ps, 0.01)
			o.Compiled = true
			return o, o.rule()
		}},
		{"sgd nesterov", 2, func(ps []*tensor.Tensor) (interface{ Step() }, rule) {
			o := NewSGD(ps, 0.01)
			o.Momentum, o.Nesterov, o.WeightDecay, o.Compiled = 0.9, true, 0.01, true
			return o, o.rule()
		}},
	} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
			mk := func() (ps, grads []*tensor.Tensor) {
				for i := range 60 { // parameters of sizes from 1 to 4097, more than 4 KB of kernel parameters
					shape := [][]int{{1}, {3}, {1023}, {4097}, {33, 31}, {8, 8}, {5, 7, 3}}[i%7]
					ps = append(ps, tensor.Randn(uint64(i), tensor.Float32, shape...).To(dt).SetRequiresGrad(true))
					grads = append(grads, tensor.Randn(uint64(100+i), tensor.Float32, shape...).To(dt))
				}
				return ps, grads
			}
			ps, grads := mk()
			o, r := tc.make(ps)
			what := fmt.Sprintf("%s %v", tc.name, dt)
			if dt == tensor.Float32 || ps[0].Device() != tensor.CPU { // 16-bit values stay in memory on the CPU
				for i := range ps {
					r.prepare(i)
				}
				one := tensor.FromSlice([]float64{0.5}).Reshape().To(dt).ToDevice(ps[0].Device())
				ex, err := tensor.Explain(stepFunc(ps, r), grads, one, one, one)
				if err != nil {
					t.Fatal(err)
				}
				var kernels []string
				for _, reg := range ex.Regions {
					if !strings.Contains(reg, "(as_strided_scatter)") {
						kernels = append(kernels, reg)
					}
				}
				if len(kernels) != 1 || !strings.HasPrefix(kernels[0], "combo [") || strings.Count(kernels[0], "||")+1 != len(ps) {
					t.Errorf("%s: regions other than writes:\n%s\nwant one combo of %d units", what, strings.Join(kernels, "\n"), len(ps))
				}
			}
			ref, refGrads := mk()
			eager, _ := tc.make(ref)
			switch e := eager.(type) {
			case *AdamW:
				e.Compiled = false
			case *SGD:
				e.Compiled = false
			}
			for step := range 3 {
				for i := range ps {
					ps[i].SetGrad(grads[i])
					ref[i].SetGrad(refGrads[i])
				}
				launches, combos, direct := cuda.Launches(), stats.ComboLaunches.Load(), stats.DirectStores.Load()
				o.Step()
				if dev := ps[0].Device(); dev != tensor.CPU && step > 0 {
					// One launch where the device takes 32 KB of kernel
					// parameters; with 4 KB, two combos of about 40 units
					// or fewer (one unit is 8 pointers and scalars).
					want := int64(1)
					if array.MaxKernelParamBytes(dev) < 8*16*len(ps) {
						want = 2
					}
					if n, c := cuda.Launches()-launches, stats.ComboLaunches.Load()-combos; n != want || c != want {
						t.Errorf("%s step %d: %d launches, %d of them combos; want %d combos", what, step, n, c, want)
					}
					if d := stats.DirectStores.Load() - direct; d != int64(tc.stores*len(ps)) {
						t.Errorf("%s step %d: %d direct stores, want %d", what, step, d, tc.stores*len(ps))
					}
				}
				eager.Step()
				for i := range ps {
					checkNear(t, fmt.Sprintf("%s step %d parameter %d", what, step, i), ps[i], ref[i], dt)
				}
			}
		}
	}
}

// checkNear checks that got's elements equal want's within dt's rounding
// (a fused kernel contracts a·b+c into one rounding where eager rounds
// twice).
func checkNear(t *testing.T, what string, got, want *tensor.Tensor, dt tensor.DType) {
	t.Helper()
	tol := 1e-5
	if dt == tensor.BFloat16 {
		tol = 1e-2
	}
	g, w := got.Detach().Float64s(), want.Detach().Float64s()
	for j := range w {
		if math.Abs(g[j]-w[j]) > tol*math.Max(1, math.Abs(w[j])) {
			t.Errorf("%s: element %d is %v, want %v", what, j, g[j], w[j])
			return
		}
	}
}

// The whole training step may be one compiled function, as with
// torch.compile: ZeroGrad, the loss, Backward and the optimizer's Step.
// The step count (AdamW) and the momentum flags (SGD) live in tensors the
// graph updates, and the learning rate is read on every call: changing it
// compiles nothing. Each case runs compiled steps, an eager step in the middle (the
// count and flags carry over), and compares parameters, losses and
// gradients with the same steps run eagerly, for each optimizer, with
// and without its own Compiled step inside, in float32 and float64.
func TestStepInsideCompiled(t *testing.T) {
	type optimizer interface {
		Step()
		ZeroGrad()
	}
	for _, tc := range []struct {
		name string
		make func(ps []*tensor.Tensor, compiled bool) optimizer
		lr   func(o optimizer, lr float64)
	}{
		{"adamw", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewAdamW(ps, 0.05)
			o.Compiled = compiled
			return o
		}, func(o optimizer, lr float64) { o.(*AdamW).LR = lr }},
		{"sgd momentum", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewSGD(ps, 0.05)
			o.Momentum, o.Dampening, o.WeightDecay, o.Compiled = 0.9, 0.1, 0.01, compiled
			return o
		}, func(o optimizer, lr float64) { o.(*SGD).LR = lr }},
		{"sgd nesterov", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewSGD(ps, 0.05)
			o.Momentum, o.Nesterov, o.Compiled = 0.8, true, compiled
			return o
		}, func(o optimizer, lr float64) { o.(*SGD).LR = lr }},
		{"sgd", func(ps []*tensor.Tensor, compiled bool) optimizer {
			o := NewSGD(ps, 0.05)
			o.Compiled = compiled
			return o
		}, func(o optimizer, lr float64) { o.(*SGD).LR = lr }},
	} {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			for _, inner := range []bool{false, true} {
				name := fmt.Sprintf("%s %v, Compiled %v", tc.name, dt, inner)
				mk := func() []*tensor.Tensor {
					return []*tensor.Tensor{
						tensor.Randn(1, dt, 4, 3).SetRequiresGrad(true),
						tensor.Randn(2, dt, 3).SetRequiresGrad(true),
						tensor.Randn(3, dt, 1).SetRequiresGrad(true),
					}
				}
				pe, pc := mk(), mk()
				oe, oc := tc.make(pe, inner), tc.make(pc, inner)
				step := func(o optimizer, p []*tensor.Tensor) func(x *tensor.Tensor) *tensor.Tensor {
					return func(x *tensor.Tensor) *tensor.Tensor {
						o.ZeroGrad()
						loss := x.MatMul(p[0]).Add(p[1]).Tanh().Mul(p[2]).Sum()
						loss.Backward()
						o.Step()
						return loss
					}
				}
				eager := step(oe, pe)
				var st tensor.CompileStats
				compiled := tensor.Compile(step(oc, pc), tensor.WithStats(&st))
				for k := range 7 {
					what := fmt.Sprintf("%s, step %d", name, k)
					if k == 3 { // a new learning rate
						tc.lr(oe, 0.02)
						tc.lr(oc, 0.02)
					}
					x := tensor.Randn(uint64(10+k), dt, 5, 4)
					if k == 5 { // an eager step between compiled ones
						for _, c := range []struct {
							o optimizer
							p []*tensor.Tensor
						}{{oe, pe}, {oc, pc}} {
							c.o.Step()
						}
						what += " (eager)"
					} else {
						want := eager(x)
						var got *tensor.Tensor
						if err := tensor.Try(func() { got = compiled(x) }); err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						checkNear(t, what+": loss", got, want, dt)
					}
					for i := range pe {
						checkNear(t, fmt.Sprintf("%s: parameter %d", what, i), pc[i], pe[i], dt)
						if pc[i].Grad() == nil || pe[i].Grad() == nil {
							t.Fatalf("%s: parameter %d has no gradient after the step", what, i)
						}
						checkNear(t, fmt.Sprintf("%s: gradient %d", what, i), pc[i].Grad(), pe[i].Grad(), dt)
					}
				}
				if n, e := st.Compiles.Load(), st.EagerCalls.Load(); n != 1 || e != 0 || st.Breaks.Load() != 0 {
					t.Errorf("%s: %d compilations, %d eager calls, %d breaks; want 1, 0, 0",
						name, n, e, st.Breaks.Load())
				}
			}
		}
	}
}

// A compiled function that is only the optimizer's step reads the
// gradients set before each call (inputs of its graph). A parameter whose
// first gradient comes a step after the others' starts its momentum
// buffer then (its started flag is a tensor), as eagerly.
func TestCompiledStepReadsGradients(t *testing.T) {
	a := tensor.FromSlice([]float64{1, 2}, 2).SetRequiresGrad(true)
	b := tensor.FromSlice([]float64{3}, 1).SetRequiresGrad(true)
	o := NewSGD([]*tensor.Tensor{a, b}, 0.1)
	o.Momentum, o.Dampening = 0.9, 0.5
	step := tensor.Compile(func() { o.Step() })
	a.SetGrad(tensor.FromSlice([]float64{1, 1}, 2))
	step() // b has no gradient yet
	a.SetGrad(tensor.FromSlice([]float64{1, 1}, 2))
	b.SetGrad(tensor.FromSlice([]float64{2}, 1))
	step()
	// b: buf = d = 2 on its first step, p = 3 − 0.1·2.
	if got := b.Detach().Float64s()[0]; math.Abs(got-2.8) > 1e-12 {
		t.Errorf("b is %v, want 2.8", got)
	}
	// a: buf = 1, then 0.9·1 + 0.5·1 = 1.4; p = 1 − 0.1 − 0.14.
	if got := a.Detach().Float64s()[0]; math.Abs(got-0.76) > 1e-12 {
		t.Errorf("a is %v, want 0.76", got)
	}
	a.SetGrad(tensor.FromSlice([]float64{0, 0}, 2))
	step() // a: buf = 0.9·1.4 = 1.26; p = 0.76 − 0.126
	if got := a.Detach().Float64s()[0]; math.Abs(got-0.634) > 1e-12 {
		t.Errorf("a is %v after a third step, want 0.634", got)
	}
}

// The Compiled step reads the hyperparameters other than the learning rate
// as Go values: changing one compiles the step again rather than leaving
// the old value in its kernels.
func TestCompiledStepFollowsHyperparameters(t *testing.T) {
	mk := func(compiled bool) (*AdamW, *tensor.Tensor) {
		p := tensor.Randn(1, tensor.Float64, 3, 2).SetRequiresGrad(true)
		o := NewAdamW([]*tensor.Tensor{p}, 0.05)
		o.Compiled = compiled
		return o, p
	}
	oe, pe := mk(false)
	oc, pc := mk(true)
	for step := range 4 {
		if step == 2 {
			oe.WeightDecay, oc.WeightDecay = 0.5, 0.5
			oe.Beta1, oc.Beta1 = 0.5, 0.5
		}
		for _, p := range []*tensor.Tensor{pe, pc} {
			p.SetGrad(tensor.Randn(uint64(5+step), tensor.Float64, 3, 2))
		}
		oe.Step()
		oc.Step()
		checkNear(t, fmt.Sprintf("step %d", step), pc, pe, tensor.Float64)
	}
	if n := oc.stats.Compiles.Load(); n != 2 {
		t.Errorf("%d compilations, want 2 (one per set of hyperparameters)", n)
	}
}

// ClipGradNormTensor gives ClipGradNorm's norm and gradients without
// reading anything back, above and below the limit, and a compiled
// training step that clips with it stays one graph and matches the same
// step run eagerly.
func TestClipGradNormTensor(t *testing.T) {
	for _, maxNorm := range []float64{1, 10} {
		mk := func() []*tensor.Tensor {
			a := tensor.FromSlice([]float64{1, 2}, 2).SetRequiresGrad(true)
			b := tensor.FromSlice([]float32{2, 5, 1}, 3).SetRequiresGrad(true)
			c := tensor.FromSlice([]float64{7}, 1).SetRequiresGrad(true) // no gradient
			a.SetGrad(tensor.FromSlice([]float64{3, 0}, 2))
			b.SetGrad(tensor.FromSlice([]float32{4, 0.5, -1}, 3))
			return []*tensor.Tensor{a, b, c}
		}
		pa, pb := mk(), mk()
		want := ClipGradNorm(pa, maxNorm)
		got := ClipGradNormTensor(pb, maxNorm)
		if math.Abs(got.Item()-want) > 1e-12*want {
			t.Errorf("max %v: norm %v, ClipGradNorm's %v", maxNorm, got.Item(), want)
		}
		for i := range 2 {
			checkNear(t, fmt.Sprintf("max %v, gradient %d", maxNorm, i), pb[i].Grad(), pa[i].Grad(), pa[i].DType())
		}
		if pb[2].Grad() != nil {
			t.Errorf("max %v: a parameter without a gradient got one", maxNorm)
		}
	}

	pe, oe := smallModel(0.05)
	pc, oc := smallModel(0.05)
	var st tensor.CompileStats
	eager, compiled := smallStep(pe, oe, 0.5), tensor.Compile(smallStep(pc, oc, 0.5), tensor.WithStats(&st))
	for k := range 4 {
		x := tensor.Randn(uint64(10+k), tensor.Float32, 5, 4)
		what := fmt.Sprintf("step %d", k)
		checkNear(t, what+": norm", compiled(x), eager(x), tensor.Float32)
		for i := range pe {
			checkNear(t, fmt.Sprintf("%s: parameter %d", what, i), pc[i], pe[i], tensor.Float32)
		}
	}
	if st.Compiles.Load() != 1 || st.Breaks.Load() != 0 || st.EagerCalls.Load() != 0 {
		t.Errorf("%d compilations, %d breaks, %d eager calls; want one graph", st.Compiles.Load(), st.Breaks.Load(), st.EagerCalls.Load())
	}
}

// A learning-rate schedule (warmup, then cosine decay) changes the
// learning rate every step: a whole compiled training step reads it on
// every call and compiles once; a new beta still compiles again.
func TestStepInsideCompiledFollowsSchedule(t *testing.T) {
	pe, oe := smallModel(0)
	pc, oc := smallModel(0)
	var st tensor.CompileStats
	eager, compiled := smallStep(pe, oe, 0), tensor.Compile(smallStep(pc, oc, 0), tensor.WithStats(&st))
	const steps = 12
	for k := range steps {
		lr := 0.1 * float64(k+1) / 4
		if k >= 4 {
			lr = 0.05 * (1 + math.Cos(math.Pi*float64(k-4)/float64(steps-4)))
		}
		oe.LR, oc.LR = lr, lr
		if k == 9 {
			oe.Beta1, oc.Beta1 = 0.8, 0.8
		}
		x := tensor.Randn(uint64(10+k), tensor.Float32, 5, 4)
		what := fmt.Sprintf("step %d", k)
		checkNear(t, what+": loss", compiled(x), eager(x), tensor.Float32)
		for i := range pe {
			checkNear(t, fmt.Sprintf("%s: parameter %d", what, i), pc[i], pe[i], tensor.Float32)
		}
	}
	if st.Compiles.Load() != 2 || st.EagerCalls.Load() != 0 {
		t.Errorf("%d compilations, %d eager calls; want 2 (one per beta), 0", st.Compiles.Load(), st.EagerCalls.Load())
	}
}

// smallModel is two float32 parameters and an AdamW over them.
func smallModel(lr float64) ([]*tensor.Tensor, *AdamW) {
	ps := []*tensor.Tensor{tensor.Randn(1, tensor.Float32, 4, 3).SetRequiresGrad(true), tensor.Randn(2, tensor.Float32, 3).SetRequiresGrad(true)}
	return ps, NewAdamW(ps, lr)
}

// smallStep is a training step of smallModel's parameters: ZeroGrad, the
// loss of a batch x and its Backward, clipping to clip (none when 0) and
// the update. It returns the loss, or with clipping the gradients' norm.
func smallStep(ps []*tensor.Tensor, o *AdamW, clip float64) func(x *tensor.Tensor) *tensor.Tensor {
	return func(x *tensor.Tensor) *tensor.Tensor {
		o.ZeroGrad()
		loss := x.MatMul(ps[0]).Add(ps[1]).Tanh().Sum()
		loss.Backward()
		if clip > 0 {
			loss = ClipGradNormTensor(ps, clip)
		}
		o.Step()
		return loss
	}
}

// Two optimizers in one compiled step each read their own learning rate,
// also when one of them has no gradient on some calls (its parameters sit
// out a batch), which changes the order of the reads (found in review).
func TestStepInsideCompiledTwoOptimizers(t *testing.T) {
	mk := func() (a, b *tensor.Tensor, oa, ob *SGD) {
		a = tensor.FromSlice([]float64{1, 2}).SetRequiresGrad(true)
		b = tensor.FromSlice([]float64{3, 4}).SetRequiresGrad(true)
		return a, b, NewSGD([]*tensor.Tensor{a}, 0.5), NewSGD([]*tensor.Tensor{b}, 0.01)
	}
	step := func(a, b *tensor.Tensor, oa, ob *SGD) func(x *tensor.Tensor) *tensor.Tensor {
		return func(x *tensor.Tensor) *tensor.Tensor {
			oa.ZeroGrad()
			ob.ZeroGrad()
			loss := x.Mul(b).Sum()
			if x.Shape()[0] == 4 { // a takes part in 4-row batches only
				loss = loss.Add(x.Mul(a).Sum())
			}
			loss.Backward()
			oa.Step()
			ob.Step()
			return loss
		}
	}
	ae, be, oae, obe := mk()
	ac, bc, oac, obc := mk()
	eager, compiled := step(ae, be, oae, obe), tensor.Compile(step(ac, bc, oac, obc))
	for call, rows := range []int{3, 4, 3, 4} {
		x := tensor.Randn(uint64(call), tensor.Float64, rows, 2)
		what := fmt.Sprintf("call %d", call)
		checkNear(t, what+": loss", compiled(x), eager(x), tensor.Float64)
		checkNear(t, what+": a", ac, ae, tensor.Float64)
		checkNear(t, what+": b", bc, be, tensor.Float64)
	}
}
