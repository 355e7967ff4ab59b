package tensor

import (
	"fmt"
	"sync"
	"testing"
)

// Regressions of traced gradients found in review. Each compares the
// compiled function with the same function run eagerly on its own tensors.

// sameGrads reports whether two leaves' gradients are both nil or equal.
func sameGrads(a, b *Tensor) bool {
	if a.Grad() == nil || b.Grad() == nil {
		return a.Grad() == nil && b.Grad() == nil
	}
	return fmt.Sprint(vals(a.Grad())) == fmt.Sprint(vals(b.Grad()))
}

// A held gradient first read after a graph break: the segments before the
// break have run (a write included), so the call is not traced again; the
// function runs live and reads the gradient as it is.
func TestGradientsHeldReadAfterBreak(t *testing.T) {
	mk := func() (w, p *Tensor) {
		p = FromSlice([]float64{1, 2, 3}).SetRequiresGrad(true)
		p.SetGrad(FromSlice([]float64{1, 1, 1}))
		return FromSlice([]float64{0, 0, 0}), p
	}
	f := func(w, p, x *Tensor) *Tensor {
		w.Copy(w.AddScalar(1))
		_ = w.Sum().Item() // graph break
		return x.Add(p.Grad())
	}
	we, pe := mk()
	wc, pc := mk()
	compiled := Compile(func(x *Tensor) *Tensor { return f(wc, pc, x) })
	for call := range 3 {
		x := FromSlice([]float64{1, 2, 3})
		want := f(we, pe, x)
		got := compiled(x)
		what := fmt.Sprintf("call %d", call)
		checkClose(t, what+": w", wc, Float64, []int{3}, vals(we), 0)
		checkClose(t, what+": result", got, Float64, []int{3}, vals(want), 0)
	}
}

// Guard conditions hold for a compiled model whose Backward runs after the
// call, once its joint graph is split in two halves: a new value runs the
// forward again and splits anew.
func TestGuardOnSplitModel(t *testing.T) {
	scale := 2.0
	w := FromSlice([]float64{1, 2, 3}).SetRequiresGrad(true)
	f := func(x *Tensor) *Tensor {
		s := scale
		Guard("scale", func() bool { return scale == s })
		return x.Mul(w).MulScalar(s).Sum()
	}
	compiled := Compile(f)
	x := FromSlice([]float64{1, 1, 1})
	for call, sc := range []float64{2, 2, 2, 5, 5, 7} {
		scale = sc
		w.ZeroGrad()
		got := compiled(x)
		got.Backward()
		gotGrad := vals(w.Grad())
		w.ZeroGrad()
		want := f(x)
		want.Backward()
		what := fmt.Sprintf("call %d, scale %v", call, sc)
		checkClose(t, what, got.Detach(), Float64, nil, vals(want.Detach()), 0)
		if fmt.Sprint(gotGrad) != fmt.Sprint(vals(w.Grad())) {
			t.Errorf("%s: gradient %v compiled, %v eagerly", what, gotGrad, vals(w.Grad()))
		}
	}
}

// Goroutines that make the first calls at once share one compilation
// while the held gradients are not yet inputs; those whose gradient
// differs in being nil from the one compiled for get their own entry.
// Guard conditions that change meanwhile are honoured by every call.
func TestGradientsConcurrentFirstCalls(t *testing.T) {
	f := func(q, x *Tensor) *Tensor {
		if g := q.Grad(); g != nil {
			return x.Add(g)
		}
		return x.MulScalar(-1)
	}
	for trial := range 30 {
		compiled := Compile(f)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := FromSlice([]float64{1, 2}).SetRequiresGrad(true)
				if w%2 == 0 {
					q.SetGrad(FromSlice([]float64{10, 20}))
				}
				x := FromSlice([]float64{1, 1})
				<-start
				var got *Tensor
				if err := Try(func() { got = compiled(q, x) }); err != nil {
					t.Errorf("trial %d, goroutine %d: %v", trial, w, err)
					return
				}
				if want := f(q, x); fmt.Sprint(vals(got)) != fmt.Sprint(vals(want)) {
					t.Errorf("trial %d, goroutine %d: %v, want %v", trial, w, vals(got), vals(want))
				}
			}()
		}
		close(start)
		wg.Wait()
	}

	var mu sync.Mutex
	scale := 1.0
	get := func() float64 { mu.Lock(); defer mu.Unlock(); return scale }
	compiled := Compile(func(x *Tensor) *Tensor {
		s := get()
		Guard("scale", func() bool { return get() == s })
		return x.MulScalar(s)
	}, RecompileLimit(4))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 50 {
				if w == 0 && k%10 == 0 {
					mu.Lock()
					scale++
					mu.Unlock()
				}
				before := get()
				got := vals(compiled(FromSlice([]float64{1})))[0]
				if after := get(); got < before || got > after { // the scale only grows
					t.Errorf("goroutine %d, call %d: %v, the scale was %v then %v", w, k, got, before, after)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Which leaves a call's arguments are (a captured tensor, another
// argument) is part of what the compiled graph holds: a call where they
// are other leaves compiles again.
func TestGradientsLeafIdentity(t *testing.T) {
	withGrad := func(v, g float64) *Tensor {
		p := FromSlice([]float64{v, v}).SetRequiresGrad(true)
		p.SetGrad(FromSlice([]float64{g, g}))
		return p
	}
	// The captured leaf passed as the argument on the first call only.
	p := withGrad(1, 100)
	f := func(q, x *Tensor) *Tensor { return x.Add(p.Grad()).Add(q.Detach()) }
	compiled := Compile(f)
	x := FromSlice([]float64{0, 0})
	for call, q := range []*Tensor{p, withGrad(5, 7), p} {
		checkClose(t, fmt.Sprintf("captured, call %d", call), compiled(q, x), Float64, []int{2}, vals(f(q, x)), 0)
	}
	// Two argument positions: distinct leaves, then one leaf twice.
	g := func(a, b, x *Tensor) *Tensor {
		b.SetGrad(b.Grad().MulScalar(2))
		a.SetGrad(a.Grad().MulScalar(3))
		return x.AddScalar(0)
	}
	compiledG := Compile(g)
	compiledG(withGrad(1, 1), withGrad(1, 1), x)
	e, c := withGrad(1, 1), withGrad(1, 1)
	g(e, e, x)
	compiledG(c, c, x)
	if !sameGrads(e, c) {
		t.Errorf("one leaf in two arguments: gradient %v compiled, %v eagerly", vals(c.Grad()), vals(e.Grad()))
	}
}

// Parameters passed as arguments keep their gradients in a compiled
// function called inside NoGrad (a gradient norm, clipping): Grad reads
// them and SetGrad sets them, as eagerly.
func TestGradientsOfArgumentsUnderNoGrad(t *testing.T) {
	norm := func(ps []*Tensor) *Tensor {
		s := Scalar(0, Float64)
		for _, p := range ps {
			if g := p.Grad(); g != nil {
				s = s.Add(g.Mul(g).Sum())
			}
		}
		return s
	}
	ps := []*Tensor{FromSlice([]float64{1, 2}).SetRequiresGrad(true), FromSlice([]float64{3}).SetRequiresGrad(true)}
	ps[0].SetGrad(FromSlice([]float64{3, 4}))
	compiled := Compile(norm)
	NoGrad(func() {
		checkClose(t, "norm", compiled(ps), Float64, nil, vals(norm(ps)), 0)
	})
	clip := Compile(func(p *Tensor) *Tensor { p.SetGrad(p.Grad().MulScalar(0.5)); return p.Detach() })
	var err error
	NoGrad(func() { err = Try(func() { clip(ps[0]) }) })
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "clipped", ps[0].Grad(), Float64, []int{2}, []float64{1.5, 2}, 0)
}

// A compiled function that calls Backward keeps working when its
// arguments' shapes change: its joint graph is compiled per shape.
func TestCompiledBackwardNewShapes(t *testing.T) {
	f := func(q, x *Tensor) *Tensor {
		loss := x.Mul(q).Exp().Sum()
		loss.Backward()
		return q.Grad().MulScalar(2)
	}
	compiled := Compile(f)
	for call, n := range []int{3, 5, 7, 9, 4} {
		mk := func() *Tensor { return Randn(uint64(call), Float32, n).SetRequiresGrad(true) }
		qe, qc := mk(), mk()
		x := Randn(uint64(call+9), Float32, n)
		want := f(qe, x)
		var got *Tensor
		if err := Try(func() { got = compiled(qc, x) }); err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		what := fmt.Sprintf("call %d, size %d", call, n)
		checkClose(t, what, got, Float32, []int{n}, vals(want), 1)
		checkClose(t, what+": gradient", qc.Grad(), Float32, []int{n}, vals(qe.Grad()), 1)
	}
}

// Explain shows how a whole training step leaves each gradient: cleared
// by ZeroGrad and computed again, so replaced.
func TestExplainWholeStepGradients(t *testing.T) {
	p := Randn(1, Float32, 3).SetRequiresGrad(true)
	ex, err := Explain(func(x *Tensor) *Tensor {
		p.ZeroGrad()
		loss := x.Mul(p).Sum()
		loss.Backward()
		NoGrad(func() { p.Detach().Copy(p.Detach().Sub(p.Grad().MulScalar(0.1))) })
		return loss
	}, Randn(2, Float32, 3))
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Gradients) != 1 || ex.Gradients[0] != "a captured tensor float32 [3] (replaced)" {
		t.Errorf("Gradients = %q, want one replaced captured tensor", ex.Gradients)
	}
}
