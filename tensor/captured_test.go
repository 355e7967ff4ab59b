package tensor

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"gocompile/ir"
)

// A compiled function computes from the tensors it captured on every
// call, as eager code does: ops whose operands are captured tensors alone
// are graph ops reading them by reference (a weight updated between calls
// is seen), and their values written into captured tensors are written
// on every call (a position counter, a running sum, a filled buffer),
// compiled plainly and replayed as a CUDA graph.
func TestCompiledComputesFromCapturedTensors(t *testing.T) {
	type state struct{ w, pos, acc, buf, rows *Tensor }
	mk := func() *state {
		return &state{
			w:    Randn(1, Float32, 4, 3),
			pos:  Zeros(Float32),
			acc:  Zeros(Float32, 4, 3),
			buf:  Zeros(Float32, 5),
			rows: Zeros(Float32, 6, 3),
		}
	}
	f := func(s *state) func(x *Tensor) *Tensor {
		return func(x *Tensor) *Tensor {
			s.pos.Copy(s.pos.AddScalar(1))      // a counter
			s.acc.Copy(s.acc.Add(s.w.Mul(s.w))) // from captured tensors only
			s.buf.Fill(2)                       // a fill
			idx := FromSlice([]int64{1, 4}).ToDevice(s.w.Device())
			s.rows.IndexCopyInPlace(0, idx, s.w.Narrow(0, 0, 2)) // index and source captured
			return x.MatMul(s.w.Add(s.w.T().T())).Add(s.pos)     // a weight's value each call
		}
	}
	for _, mode := range []Mode{Default, ReduceOverhead} {
		es, cs := mk(), mk()
		eager, compiled := f(es), Compile(f(cs), WithMode(mode))
		for call := range 4 {
			what := fmt.Sprintf("%v call %d", mode, call)
			x := Randn(uint64(10+call), Float32, 2, 4)
			want := eager(x)
			checkClose(t, what, compiled(x), Float32, want.Shape(), vals(want), 1)
			for i, pair := range [][2]*Tensor{{cs.pos, es.pos}, {cs.acc, es.acc}, {cs.buf, es.buf}, {cs.rows, es.rows}} {
				checkClose(t, fmt.Sprintf("%s state %d", what, i), pair[0], Float32, pair[1].Shape(), vals(pair[1]), 1)
			}
			// The weights change between calls, outside the function.
			es.w.Copy(es.w.MulScalar(0.5).AddScalar(0.25))
			cs.w.Copy(cs.w.MulScalar(0.5).AddScalar(0.25))
			es.buf.Copy(Zeros(Float32, 5))
			cs.buf.Copy(Zeros(Float32, 5))
		}
	}
}

// Set, Fill and Copy inside a compiled function write on every call, into
// a captured tensor or one the function makes; eager's refusals hold (a
// leaf that requires gradients).
func TestCompiledElementWrites(t *testing.T) {
	buf := Zeros(Float32, 3)
	f := Compile(func(x *Tensor) *Tensor {
		buf.Set(buf.At(0)+1, 0) // At reads the value while tracing: the first call's, every call
		m := Zeros(Float32, 3)
		m.Set(2, 1)
		return x.Mul(m)
	})
	for call := range 3 {
		buf.Copy(Zeros(Float32, 3))
		got := f(Ones(Float32, 3))
		checkClose(t, fmt.Sprintf("call %d result", call), got, Float32, []int{3}, []float64{0, 2, 0}, 0)
		checkClose(t, fmt.Sprintf("call %d buffer", call), buf, Float32, []int{3}, []float64{1, 0, 0}, 0)
	}
	w := Ones(Float32, 3).SetRequiresGrad(true)
	g := Compile(func(x *Tensor) *Tensor {
		w.Fill(0)
		return x.Neg()
	})
	expectError(t, "Fill of a leaf that requires gradients", func() { g(Ones(Float32, 3)) })
}

// Values read from a storage through a view, then the storage written,
// give eager's results: the write waits for every reader of the view,
// including readers of a value that another write writes (found in
// review: a view is not a buffer of its own).
func TestCompiledWrittenViewReadLater(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(p, buf, x *Tensor) *Tensor
	}{
		{"a view written elsewhere, read after the storage's write", func(p, buf, x *Tensor) *Tensor {
			p.Copy(x)
			v := p.Narrow(0, 0, 4)
			buf.Narrow(0, 0, 4).Copy(v.MulScalar(1)) // simplified: buf is written the view itself
			a := v.MulScalar(3)
			v.Copy(v.AddScalar(1))
			return a.Add(p.Narrow(0, 4, 4))
		}},
		{"a view read after the storage is stored into", func(p, buf, x *Tensor) *Tensor {
			p.Copy(x)
			v := p.Narrow(0, 0, 4)
			s := v.Sum()
			d := x.Sub(s)
			buf.Copy(d.Neg())
			buf.Narrow(0, 0, 4).Copy(v)
			p.Copy(d)
			return s
		}},
	} {
		mk := func() (*Tensor, *Tensor) { return Zeros(Float32, 8), Zeros(Float32, 8) }
		ep, ebuf := mk()
		cp, cbuf := mk()
		compiled := Compile(func(x *Tensor) *Tensor { return c.f(cp, cbuf, x) })
		for call := range 3 {
			x := Randn(uint64(call), Float32, 8)
			what := fmt.Sprintf("%s call %d", c.name, call)
			want := c.f(ep, ebuf, x)
			checkClose(t, what, compiled(x), Float32, want.Shape(), vals(want), 1)
			checkClose(t, what+" p", cp, Float32, ep.Shape(), vals(ep), 1)
			checkClose(t, what+" buf", cbuf, Float32, ebuf.Shape(), vals(ebuf), 1)
		}
	}
}

// A backend whose program applies tensor ops to its results works in a
// function with a graph break: the finished segment runs its ops, not
// records them (found in review).
type contiguousProgram struct{ inner Program }

func (p contiguousProgram) Run(in []*Tensor) []*Tensor {
	outs := p.inner.Run(in)
	for i, o := range outs {
		outs[i] = o.Contiguous().MulScalar(1)
	}
	return outs
}

func TestBackendOpsAtGraphBreak(t *testing.T) {
	RegisterBackend("test-tensor-ops", BackendFunc(func(g *ir.Graph) (Program, error) {
		return contiguousProgram{newEagerProgram(g)}, nil
	}))
	f := func(x *Tensor) *Tensor {
		if x.Exp().Sum().Item() > 0 {
			return x.MulScalar(2)
		}
		return x.MulScalar(3)
	}
	x := Randn(1, Float32, 4)
	want := f(x)
	var got *Tensor
	if err := Try(func() { got = Compile(f, WithBackend("test-tensor-ops"))(x) }); err != nil {
		t.Fatalf("compiled: %v", err)
	}
	checkSame(t, "a backend's ops at a graph break", got, want)
}

// Eager ops that other goroutines run while a function is traced are not
// recorded into its graph: each goroutine's results stay its own.
func TestTracingRecordsOnlyItsGoroutine(t *testing.T) {
	w := Randn(2, Float32, 64)
	want := vals(w.Mul(w).AddScalar(1))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, 1)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := vals(w.Mul(w).AddScalar(1))
				for i := range want {
					if got[i] != want[i] {
						select {
						case errs <- fmt.Sprintf("element %d is %v eagerly, want %v", i, got[i], want[i]):
						default:
						}
						return
					}
				}
			}
		}()
	}
	for i := range 20 {
		f := Compile(func(x *Tensor) *Tensor { return x.Add(w.Mul(w).MulScalar(float64(i))) })
		f(Ones(Float32, 64))
	}
	close(stop)
	wg.Wait()
	select {
	case e := <-errs:
		t.Error(e)
	default:
	}
}

// A compiled function called by another while it is traced joins that
// trace: with the outer function's tensors, and with captured ones (a
// counter it advances, a weight it reads), on every call.
func TestCompiledCallsCompiled(t *testing.T) {
	// build makes the functions over a weight and a counter, each wrapped
	// by wrap (Compile, or nothing for the eager reference).
	build := func(wrap func(f any) any) (w, pos *Tensor, outer func(x *Tensor) *Tensor) {
		w, pos = Randn(3, Float32, 4), Zeros(Float32)
		inner := wrap(func(x *Tensor) *Tensor { return x.Mul(w).Add(pos) }).(func(x *Tensor) *Tensor)
		step := wrap(func() *Tensor { pos.Copy(pos.AddScalar(1)); return w.Sum() }).(func() *Tensor)
		outer = wrap(func(x *Tensor) *Tensor { return inner(x.Exp()).Add(step()) }).(func(x *Tensor) *Tensor)
		return w, pos, outer
	}
	ew, epos, eager := build(func(f any) any { return f })
	var st CompileStats
	cw, cpos, compiled := build(func(f any) any {
		switch f := f.(type) {
		case func(x *Tensor) *Tensor:
			return Compile(f, WithStats(&st))
		case func() *Tensor:
			return Compile(f)
		}
		panic("unexpected function")
	})
	for call := range 3 {
		x := Randn(uint64(call), Float32, 4)
		want := eager(x)
		what := fmt.Sprintf("call %d", call)
		checkClose(t, what, compiled(x), Float32, want.Shape(), vals(want), 1)
		checkClose(t, what+" counter", cpos, Float32, nil, vals(epos), 0)
		ew.Copy(ew.AddScalar(0.5)) // the weight changes between calls
		cw.Copy(cw.AddScalar(0.5))
	}
	// The outer function compiles once; the inner one, inlined, never.
	if n := st.Compiles.Load(); n != 1 {
		t.Errorf("%d compiles, want 1", n)
	}
}

// Cond on a captured predicate and captured operands picks its branch on
// every call, without a graph break.
func TestCondOnCapturedPredicate(t *testing.T) {
	flag, w := FromSlice([]bool{true}), FromSlice([]float32{1, 2})
	var st CompileStats
	f := Compile(func(x *Tensor) *Tensor {
		return Cond(flag,
			func(a ...*Tensor) *Tensor { return a[0].MulScalar(2) },
			func(a ...*Tensor) *Tensor { return a[0].Neg() }, w).Add(x)
	}, WithStats(&st))
	for call, on := range []bool{true, false, true} {
		flag.Copy(FromSlice([]bool{on}))
		want := []float64{-1, -2}
		if on {
			want = []float64{2, 4}
		}
		checkClose(t, fmt.Sprintf("call %d", call), f(Zeros(Float32, 2)), Float32, []int{2}, want, 0)
	}
	if n := st.Breaks.Load(); n != 0 {
		t.Errorf("%d graph breaks, want none", n)
	}
}

// A compiled function may read, set and clear the gradients of the leaves
// it captures or takes as arguments, as eager code does: the gradient a
// leaf held when the call began is a graph input, Backward adds to it,
// SetGrad and ZeroGrad replace it, and the leaf gets the result when the
// call returns. Each case runs four calls compiled and eagerly, on leaves
// of odd sizes, and compares results, parameters and gradients (nil or
// not) after every call; the gradient held before a call changes between
// calls, and is nil on some.
func TestGradientsInsideCompiled(t *testing.T) {
	sgd := func(p *Tensor) {
		NoGrad(func() { p.Detach().Copy(p.Detach().Sub(p.Grad().MulScalar(0.1))) })
	}
	type leaves struct{ p, q *Tensor } // p captured, q an argument
	cases := []struct {
		name string
		// before sets the gradients before call k (eager code between calls).
		before func(k int, l leaves)
		f      func(l leaves, x *Tensor) *Tensor
	}{
		{"zero, backward, step", nil, func(l leaves, x *Tensor) *Tensor {
			l.p.ZeroGrad()
			loss := x.Mul(l.p).Exp().Sum()
			loss.Backward()
			sgd(l.p)
			return loss
		}},
		{"accumulate across calls, then step", nil, func(l leaves, x *Tensor) *Tensor {
			loss := x.Mul(l.p).Sin().Sum()
			loss.Backward()
			sgd(l.p)
			return loss
		}},
		{"step, then zero", nil, func(l leaves, x *Tensor) *Tensor {
			loss := x.Mul(l.p).Sum().PowScalar(2)
			loss.Backward()
			sgd(l.p)
			l.p.ZeroGrad()
			return loss
		}},
		{"scale by SetGrad, step", func(k int, l leaves) {
			if k == 2 {
				l.p.SetGrad(Full(0.25, Float64, l.p.Shape()...))
			}
		}, func(l leaves, x *Tensor) *Tensor {
			loss := x.Mul(l.p).Tanh().Sum()
			loss.Backward()
			l.p.SetGrad(l.p.Grad().MulScalar(0.5))
			sgd(l.p)
			return loss
		}},
		{"read the held gradient only", func(k int, l leaves) {
			if k%2 == 0 {
				l.p.SetGrad(Full(float64(k+1), Float64, l.p.Shape()...))
			} else {
				l.p.ZeroGrad()
			}
		}, func(l leaves, x *Tensor) *Tensor {
			if g := l.p.Grad(); g != nil {
				return x.Mul(g)
			}
			return x.Neg()
		}},
		{"argument leaf", func(k int, l leaves) {
			l.q.SetGrad(Full(float64(k), Float64, l.q.Shape()...))
		}, func(l leaves, x *Tensor) *Tensor {
			loss := x.Mul(l.q).Mul(l.p).Sum()
			loss.Backward()
			g := l.q.Grad() // held plus this call's
			l.q.SetGrad(g.MulScalar(2))
			return g
		}},
	}
	for _, size := range []int{1, 3, 1023} {
		for _, tc := range cases {
			make1 := func() leaves {
				return leaves{Randn(7, Float64, size).SetRequiresGrad(true), Randn(8, Float64, size).SetRequiresGrad(true)}
			}
			eager, comp := make1(), make1()
			var st CompileStats
			compiled := Compile(func(q, x *Tensor) *Tensor { return tc.f(leaves{comp.p, q}, x) }, WithStats(&st))
			for k := range 4 {
				what := fmt.Sprintf("%s, size %d, call %d", tc.name, size, k)
				if tc.before != nil {
					tc.before(k, eager)
					tc.before(k, comp)
				}
				x := Randn(uint64(10+k), Float64, size)
				want := tc.f(eager, x)
				var got *Tensor
				if err := Try(func() { got = compiled(comp.q, x) }); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				checkClose(t, what+": result", got.Detach(), Float64, want.Shape(), vals(want.Detach()), 1)
				for _, l := range []struct {
					name string
					e, c *Tensor
				}{{"p", eager.p, comp.p}, {"q", eager.q, comp.q}} {
					checkClose(t, what+": "+l.name, l.c.Detach(), Float64, []int{size}, vals(l.e.Detach()), 1)
					eg, cg := l.e.Grad(), l.c.Grad()
					if (eg == nil) != (cg == nil) {
						t.Fatalf("%s: %s's gradient is %v, eagerly %v", what, l.name, cg, eg)
					}
					if eg != nil {
						checkClose(t, what+": "+l.name+"'s gradient", cg, Float64, []int{size}, vals(eg), 1)
					}
				}
			}
			if n := st.Compiles.Load(); n > 2 { // one per held gradient nil or not
				t.Errorf("%s: %d compilations, want at most 2", tc.name, n)
			}
			if st.EagerCalls.Load() != 0 || st.Breaks.Load() != 0 {
				t.Errorf("%s: %d eager calls, %d breaks; want the compiled graph", tc.name, st.EagerCalls.Load(), st.Breaks.Load())
			}
		}
	}
}

// A compiled function with a graph break runs live, segment by segment,
// so it may read and change the gradients of the tensors it captures: a
// step before the break updates the parameter on every call (found in
// review), and a gradient norm reads each call's gradient.
func TestGradientsInFunctionWithGraphBreak(t *testing.T) {
	p := FromSlice([]float32{1, 2, 3}).SetRequiresGrad(true)
	x := FromSlice([]float32{1, 1, 1})
	var logged float64
	f := Compile(func(x *Tensor) *Tensor {
		p.ZeroGrad()
		loss := x.Mul(p).Sum()
		loss.Backward()
		if g := p.Grad(); g != nil {
			NoGrad(func() { p.Detach().Copy(p.Detach().Sub(g.MulScalar(0.5))) })
		}
		logged = loss.Item() // graph break
		return loss
	})
	for range 2 {
		if err := Try(func() { f(x) }); err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	if got := vals(p); math.Abs(got[0]) > 1e-6 || math.Abs(logged-4.5) > 1e-5 {
		t.Errorf("p = %v, logged %v; want [0 1 2], 4.5", got, logged)
	}
}

func TestGradientNormWithGraphBreak(t *testing.T) {
	p := FromSlice([]float64{1, 2, 3}).SetRequiresGrad(true)
	norm := Compile(func(s *Tensor) *Tensor {
		g := p.Grad()
		n := g.Mul(g).Sum()
		if n.Item() > 1e6 {
			return n.Mul(s)
		}
		return n.Mul(s).Sqrt()
	})
	for i, c := range []float64{1, 2, 3} {
		p.ZeroGrad()
		FromSlice([]float64{c, 0, 0}).Mul(p).Sum().Backward()
		var got *Tensor
		if err := Try(func() { got = norm(FromSlice([]float64{1})) }); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		checkClose(t, "norm", got, Float64, []int{1}, []float64{c}, 1)
	}
}

// A nil tensor argument before others (an optional mask) is no graph
// input: the tensors after it bind to their own inputs, in the call and in
// its compiled backward (found in review: they shifted by one).
func TestCompiledNilArgumentBeforeOthers(t *testing.T) {
	f := func(a, mask, b *Tensor) *Tensor {
		if mask == nil {
			return a.Exp().Sub(b)
		}
		return a.Exp().Add(mask).Sub(b)
	}
	compiled := Compile(f)
	for call := range 2 {
		a, b := Randn(1, Float32, 3).SetRequiresGrad(true), Randn(2, Float32, 3)
		ea := a.Detach().SetRequiresGrad(true)
		want := f(ea, nil, b)
		got := compiled(a, nil, b)
		what := fmt.Sprintf("call %d", call)
		checkClose(t, what, got.Detach(), Float32, want.Shape(), vals(want.Detach()), 1)
		got.Sum().Backward()
		want.Sum().Backward()
		checkClose(t, what+" gradient", a.Grad(), Float32, []int{3}, vals(ea.Grad()), 1)
	}
}

// A query that attends no key (its row of the mask all false, or all
// −inf) gives zeros, as PyTorch's attention does, eagerly and compiled,
// for many queries and for the few-query kernel's shapes.
func TestAttentionQueryWithoutKeys(t *testing.T) {
	for _, l := range []int{1, 5} { // the few-query extern and the decomposition
		q, k, v := Randn(1, Float32, 2, l, 4), Randn(2, Float32, 2, 6, 4), Randn(3, Float32, 2, 6, 3)
		keep := make([]bool, l*6)
		add := make([]float32, l*6)
		for i := range keep {
			keep[i] = i >= 6 && i%3 != 0 // row 0 sees nothing
			if !keep[i] {
				add[i] = float32(math.Inf(-1))
			}
		}
		for name, mask := range map[string]*Tensor{"bool": FromSlice(keep, l, 6), "additive": FromSlice(add, l, 6)} {
			f := func(q, k, v *Tensor) *Tensor { return ScaledDotProductAttention(q, k, v, mask, false, 0) }
			for _, c := range []struct {
				how string
				f   func(q, k, v *Tensor) *Tensor
			}{{"eager", f}, {"compiled", Compile(f)}} {
				got := vals(c.f(q, k, v))
				for h := range 2 {
					for i := range 3 { // row 0 of head h: zeros
						if g := got[h*l*3+i]; g != 0 {
							t.Errorf("%s mask, %d queries, %s: head %d row 0 element %d is %v, want 0", name, l, c.how, h, i, g)
						}
					}
					for i := 3; i < l*3; i++ { // the other rows: finite
						if g := got[h*l*3+i]; math.IsNaN(g) || math.IsInf(g, 0) {
							t.Errorf("%s mask, %d queries, %s: head %d element %d is %v", name, l, c.how, h, i, g)
						}
					}
				}
			}
		}
	}
}

// Guard ties a compiled graph to a Go value the traced code read: a call
// where the value changed traces and compiles again (and its results use
// the new value), up to the recompile limit, past which the function runs
// eagerly, still right. Outside tracing, Guard does nothing.
func TestGuardRecompilesOnChange(t *testing.T) {
	Guard("nothing", func() bool { panic("Guard's condition ran outside tracing") })
	scale := 2.0
	var st CompileStats
	f := Compile(func(x *Tensor) *Tensor {
		s := scale
		Guard("scale", func() bool { return scale == s })
		return x.MulScalar(s)
	}, WithStats(&st), RecompileLimit(3))
	x := FromSlice([]float64{1, -2, 3})
	wantCompiles := []int64{1, 1, 2, 2, 3, 3, 3, 3} // at most the limit
	for i, sc := range []float64{2, 2, 3, 3, 2, 4, 5, 6} {
		scale = sc
		checkClose(t, fmt.Sprintf("call %d", i), f(x), Float64, []int{3}, []float64{sc, -2 * sc, 3 * sc}, 0)
		if got := st.Compiles.Load(); got != wantCompiles[i] {
			t.Errorf("call %d: %d compilations, want %d", i, got, wantCompiles[i])
		}
	}
	if st.EagerCalls.Load() != 3 {
		t.Errorf("%d eager calls past the limit, want 3", st.EagerCalls.Load())
	}
}

// ScalarFunc's value is read on every call of a compiled function (an
// input of its graph), so it changes without recompiling: two of them, in
// the order called, and one past a graph break, which is read live.
// Outside tracing it is the value.
func TestScalarFunc(t *testing.T) {
	if got := ScalarFunc("x", func() float64 { return 2.5 }, Float32, CPU); got.Item() != 2.5 || got.DType() != Float32 || got.Dim() != 0 {
		t.Fatalf("outside tracing: %v %v, want a 0-d float32 2.5", got.DType(), got.Item())
	}
	scale, shift := 1.0, 0.0
	var st CompileStats
	f := func(x *Tensor) *Tensor {
		s := ScalarFunc("scale", func() float64 { return scale }, Float64, x.Device())
		b := ScalarFunc("shift", func() float64 { return shift }, Float64, x.Device())
		return x.Mul(s).Add(b)
	}
	compiled := Compile(f, WithStats(&st))
	broken := Compile(func(x *Tensor) *Tensor {
		n := x.Sum().Item() // graph break
		return x.Mul(ScalarFunc("scale", func() float64 { return scale }, Float64, x.Device())).AddScalar(n)
	})
	x := FromSlice([]float64{1, -2, 3})
	for call := range 5 {
		scale, shift = float64(call+1)*0.5, float64(call)
		what := fmt.Sprintf("call %d", call)
		checkClose(t, what, compiled(x), Float64, []int{3}, vals(f(x)), 0)
		checkClose(t, what+", with a break", broken(x), Float64, []int{3}, []float64{scale + 2, -2*scale + 2, 3*scale + 2}, 0)
	}
	if st.Compiles.Load() != 1 {
		t.Errorf("%d compilations, want 1", st.Compiles.Load())
	}
}

// ScalarFunc inputs are found by name, type and device, not by the order
// of the calls: a trace that calls them in another order, or leaves one
// out, reads each its own value, and a function generic in its argument's
// type gets one input per type (found in review).
func TestScalarFuncByName(t *testing.T) {
	a, b := 10.0, 1.0
	f := func(x *Tensor) *Tensor {
		y := x
		if x.Dim() == 2 {
			y = y.Mul(ScalarFunc("a", func() float64 { return a }, x.DType(), x.Device()))
		}
		return y.Add(ScalarFunc("b", func() float64 { return b }, x.DType(), x.Device()))
	}
	compiled := Compile(f)
	for call, x := range []*Tensor{
		FromSlice([]float64{1, 2}), FromSlice([]float64{1, 2}, 1, 2),
		FromSlice([]float32{3, 4}, 1, 2), FromSlice([]float64{5, 6}),
	} {
		a, b = a+1, b+1
		want := f(x)
		var got *Tensor
		if err := Try(func() { got = compiled(x) }); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		checkClose(t, fmt.Sprintf("call %d (%v %v)", call, x.DType(), x.Shape()), got, x.DType(), x.Shape(), vals(want), 0)
	}
}

// A scalar source's tensor is made again only when its value changes (no
// copy to the device on calls where the learning rate stays).
func TestScalarSourceReusesItsTensor(t *testing.T) {
	v := 0.5
	src := scalarSource{"v", func() float64 { return v }, Float32, CPU, &atomic.Pointer[scalarValue]{}}
	a, b := src.value(), src.value()
	v = 0.25
	c := src.value()
	if a != b || c == b || c.Item() != 0.25 || a.Item() != 0.5 {
		t.Errorf("tensors %p %p %p with values %v, %v: want the first two shared, the third new with 0.25", a, b, c, a.Item(), c.Item())
	}
}
