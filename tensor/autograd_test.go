package tensor

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"gocompile/internal/stats"
	"gocompile/ir"
)

// gradCheck compares Backward's gradients of f at xs (float64) with
// central differences: out = f(xs), loss = Σ w·out for a fixed random w
// (so the upstream gradient is not all ones), every element of every
// input perturbed by ±eps.
func gradCheck(t *testing.T, name string, f func(xs []*Tensor) *Tensor, xs ...*Tensor) {
	t.Helper()
	leaves := make([]*Tensor, len(xs))
	for i, x := range xs {
		leaves[i] = FromSlice(x.Contiguous().Float64s(), x.Shape()...).SetRequiresGrad(true)
	}
	out := f(leaves)
	w := Randn(99, Float64, out.Shape()...)
	out.Backward(w)
	// Through Compile too (its result requires gradients: the compiled
	// backward): the same gradients.
	again := make([]*Tensor, len(xs))
	for i, x := range xs {
		again[i] = FromSlice(x.Contiguous().Float64s(), x.Shape()...).SetRequiresGrad(true)
	}
	Compile(f)(again).Backward(w)
	for i := range xs {
		g, h := leaves[i].Grad(), again[i].Grad()
		if g == nil {
			continue
		}
		if h == nil {
			t.Errorf("%s: input %d: no gradient through the compiled function", name, i)
			continue
		}
		gv, hv := g.Float64s(), h.Float64s()
		for j := range gv {
			if math.Abs(gv[j]-hv[j]) > 1e-9*math.Max(1, math.Abs(gv[j])) {
				t.Errorf("%s: input %d element %d: gradient %v through the compiled function, %v eagerly", name, i, j, hv[j], gv[j])
				break
			}
		}
	}
	loss := func(in []*Tensor) float64 {
		var s float64
		NoGrad(func() { s = f(in).Mul(w).Sum().Item() })
		return s
	}
	const eps = 1e-6
	for i, x := range xs {
		g := leaves[i].Grad()
		if g == nil {
			t.Errorf("%s: input %d got no gradient", name, i)
			continue
		}
		if !shapeEq(g.Shape(), x.Shape()) {
			t.Errorf("%s: input %d: gradient of shape %v, want %v", name, i, g.Shape(), x.Shape())
			continue
		}
		got := g.Float64s()
		base := x.Contiguous().Float64s()
		for j := range base {
			in := make([]*Tensor, len(xs))
			at := func(d float64) float64 {
				for k, y := range xs {
					in[k] = FromSlice(y.Contiguous().Float64s(), y.Shape()...)
				}
				v := append([]float64(nil), base...)
				v[j] += d
				in[i] = FromSlice(v, x.Shape()...)
				return loss(in)
			}
			num := (at(eps) - at(-eps)) / (2 * eps)
			if d := math.Abs(got[j] - num); !(d <= 1e-5*math.Abs(num)+2e-6) {
				t.Errorf("%s: input %d element %d: gradient %v, finite differences %v", name, i, j, got[j], num)
				break
			}
		}
	}
}

// Every differentiable op's gradient, in float64 against finite
// differences, with broadcasting operands and views among the inputs.
func TestGradients(t *testing.T) {
	captureLogs(t, "") // Compile's warnings that it runs f eagerly
	r := func(seed uint64, shape ...int) *Tensor { return Randn(seed, Float64, shape...) }
	pos := func(seed uint64, shape ...int) *Tensor { return Rand(seed, Float64, shape...).AddScalar(0.5) }
	// Values kept away from the kinks of abs, relu, clamp, max and min.
	away := func(seed uint64, shape ...int) *Tensor {
		x := r(seed, shape...)
		return x.Add(x.Sign().MulScalar(0.1))
	}
	one := func(f func(x *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	two := func(f func(x, y *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0], xs[1]) }
	}
	cases := []struct {
		name string
		f    func([]*Tensor) *Tensor
		xs   []*Tensor
	}{
		{"add broadcast", two((*Tensor).Add), []*Tensor{r(1, 3, 4), r(2, 4)}},
		{"sub broadcast both", two((*Tensor).Sub), []*Tensor{r(1, 2, 1, 3), r(2, 4, 1)}},
		{"mul", two((*Tensor).Mul), []*Tensor{r(1, 3, 4), r(2, 3, 1)}},
		{"div", two((*Tensor).Div), []*Tensor{r(1, 5), pos(2, 5)}},
		{"pow", two((*Tensor).Pow), []*Tensor{pos(1, 4), r(2, 4)}},
		{"pow scalar", one(func(x *Tensor) *Tensor { return x.PowScalar(3) }), []*Tensor{r(1, 6)}},
		{"maximum", two((*Tensor).Maximum), []*Tensor{r(1, 7), r(2, 7)}},
		{"minimum", two((*Tensor).Minimum), []*Tensor{r(1, 2, 3), r(2, 3)}},
		{"scalar ops", one(func(x *Tensor) *Tensor { return x.MulScalar(3).AddScalar(1).DivScalar(2).SubScalar(4) }), []*Tensor{r(1, 5)}},
		{"neg", one((*Tensor).Neg), []*Tensor{r(1, 4)}},
		{"abs", one((*Tensor).Abs), []*Tensor{away(1, 9)}},
		{"exp", one((*Tensor).Exp), []*Tensor{r(1, 4)}},
		{"log", one((*Tensor).Log), []*Tensor{pos(1, 4)}},
		{"sqrt", one((*Tensor).Sqrt), []*Tensor{pos(1, 4)}},
		{"rsqrt", one((*Tensor).Rsqrt), []*Tensor{pos(1, 4)}},
		{"sin cos", one(func(x *Tensor) *Tensor { return x.Sin().Mul(x.Cos()) }), []*Tensor{r(1, 5)}},
		{"tanh", one((*Tensor).Tanh), []*Tensor{r(1, 5)}},
		{"sigmoid", one((*Tensor).Sigmoid), []*Tensor{r(1, 5)}},
		{"erf", one((*Tensor).Erf), []*Tensor{r(1, 5)}},
		{"relu", one((*Tensor).ReLU), []*Tensor{away(1, 8)}},
		{"gelu", one((*Tensor).GELU), []*Tensor{r(1, 6)}},
		{"gelu tanh", one((*Tensor).GELUTanh), []*Tensor{r(1, 6)}},
		{"silu", one((*Tensor).SiLU), []*Tensor{r(1, 6)}},
		{"floor has zero gradient", one(func(x *Tensor) *Tensor { return x.Floor().Add(x) }), []*Tensor{away(1, 5).MulScalar(0.3).AddScalar(0.5)}},
		{"where", two(func(x, y *Tensor) *Tensor { return Where(x.GtScalar(0), x, y) }), []*Tensor{away(1, 3, 4), r(2, 4)}},
		{"masked fill", one(func(x *Tensor) *Tensor { return x.MaskedFill(x.LtScalar(0), 2) }), []*Tensor{away(1, 6)}},
		{"clamp", one(func(x *Tensor) *Tensor { return x.Clamp(-0.5, 0.5) }), []*Tensor{r(3, 12).MulScalar(0.97)}},
		{"sum dims", one(func(x *Tensor) *Tensor { return x.Sum(0, 2) }), []*Tensor{r(1, 2, 3, 4)}},
		{"sum all", one(func(x *Tensor) *Tensor { return x.Sum() }), []*Tensor{r(1, 3, 2)}},
		{"sum keepdim", one(func(x *Tensor) *Tensor { return x.SumKeepDim(-1) }), []*Tensor{r(1, 3, 2)}},
		{"mean", one(func(x *Tensor) *Tensor { return x.Mean(1) }), []*Tensor{r(1, 3, 5)}},
		{"max", one(func(x *Tensor) *Tensor { return x.Max(1) }), []*Tensor{r(1, 4, 5)}},
		{"min keepdim", one(func(x *Tensor) *Tensor { return x.MinKeepDim(0) }), []*Tensor{r(1, 4, 5)}},
		{"var", one(func(x *Tensor) *Tensor { return x.Var([]int{0, 2}, 1, false) }), []*Tensor{r(1, 3, 2, 4)}},
		{"reshape of transpose", one(func(x *Tensor) *Tensor { return x.T().Reshape(2, 6).Mul(x.Reshape(2, 6)) }), []*Tensor{r(1, 3, 4)}},
		{"permute", one(func(x *Tensor) *Tensor { return x.Permute(2, 0, 1).Exp() }), []*Tensor{r(1, 2, 3, 4)}},
		{"expand", one(func(x *Tensor) *Tensor { return x.Expand(3, 4, 5).Sin() }), []*Tensor{r(1, 4, 1)}},
		{"squeeze unsqueeze", one(func(x *Tensor) *Tensor { return x.Squeeze(1).Unsqueeze(0).Tanh() }), []*Tensor{r(1, 3, 1, 2)}},
		{"narrow", one(func(x *Tensor) *Tensor { return x.Narrow(1, 1, 3).Exp() }), []*Tensor{r(1, 2, 5)}},
		{"slice with a step", one(func(x *Tensor) *Tensor { return x.Slice(1, 1, 8, 3).Exp() }), []*Tensor{r(1, 2, 9)}},
		{"slice with a step past the end", one(func(x *Tensor) *Tensor { return x.Slice(0, 0, 7, 2).Exp() }), []*Tensor{r(1, 7, 2)}},
		{"empty slice", one(func(x *Tensor) *Tensor { return x.Slice(0, 2, 2, 1).Sum().Add(x.Sum()) }), []*Tensor{r(1, 4)}},
		{"pow with a zero exponent", two((*Tensor).Pow), []*Tensor{pos(1, 3), FromSlice([]float64{0, 1, 2}, 3)}},
		{"contiguous of a view", one(func(x *Tensor) *Tensor { return x.T().Contiguous().Exp() }), []*Tensor{r(1, 3, 4)}},
		{"matmul", two((*Tensor).MatMul), []*Tensor{r(1, 3, 4), r(2, 4, 5)}},
		{"matmul batch broadcast", two((*Tensor).MatMul), []*Tensor{r(1, 2, 3, 4), r(2, 4, 5)}},
		{"matmul vector left", two((*Tensor).MatMul), []*Tensor{r(1, 4), r(2, 2, 4, 3)}},
		{"matmul vector right", two((*Tensor).MatMul), []*Tensor{r(1, 3, 4), r(2, 4)}},
		{"matmul dot", two((*Tensor).MatMul), []*Tensor{r(1, 4), r(2, 4)}},
		{"cat", two(func(x, y *Tensor) *Tensor { return Cat([]*Tensor{x, y, x}, 1).Exp() }), []*Tensor{r(1, 2, 3), r(2, 2, 1)}},
		{"stack", two(func(x, y *Tensor) *Tensor { return Stack([]*Tensor{x, y}, 1).Exp() }), []*Tensor{r(1, 2, 3), r(2, 2, 3)}},
		{"tril", one(func(x *Tensor) *Tensor { return x.Tril(0).Exp() }), []*Tensor{r(1, 4, 4)}},
		{"softmax", one(func(x *Tensor) *Tensor { return x.Softmax(-1) }), []*Tensor{r(1, 3, 5)}},
		{"log softmax", one(func(x *Tensor) *Tensor { return x.LogSoftmax(0) }), []*Tensor{r(1, 3, 5)}},
		{"layer norm", func(xs []*Tensor) *Tensor { return xs[0].LayerNorm([]int{5}, xs[1], xs[2], 1e-5) },
			[]*Tensor{r(1, 3, 5), r(2, 5), r(3, 5)}},
		{"rms norm", two(func(x, w *Tensor) *Tensor { return x.RMSNorm([]int{6}, w, 1e-6) }), []*Tensor{r(1, 2, 6), r(2, 6)}},
		{"linear", func(xs []*Tensor) *Tensor { return xs[0].Linear(xs[1], xs[2]).GELU() },
			[]*Tensor{r(1, 3, 4), r(2, 5, 4), r(3, 5)}},
		{"attention, few queries", func(xs []*Tensor) *Tensor {
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], nil, true, 0)
		}, []*Tensor{r(1, 1, 4, 2, 3), r(2, 1, 2, 5, 3), r(3, 1, 2, 5, 3)}},
		{"attention, many queries", func(xs []*Tensor) *Tensor {
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], nil, false, 0.5)
		}, []*Tensor{r(1, 2, 2, 17, 3), r(2, 2, 2, 6, 3), r(3, 2, 2, 6, 3)}},
		{"attention, an additive mask broadcast over heads", func(xs []*Tensor) *Tensor {
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], xs[3], false, 0)
		}, []*Tensor{r(1, 2, 4, 5, 3), r(2, 2, 2, 6, 3), r(3, 2, 2, 6, 2), r(4, 1, 5, 6)}},
		{"attention, a query that sees no key", func(xs []*Tensor) *Tensor {
			keep := FromSlice([]bool{true, false, true, true, false, false, false, false, true, true, true, false}, 3, 4)
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], keep, false, 0)
		}, []*Tensor{r(1, 2, 3, 5), r(2, 2, 4, 5), r(3, 2, 4, 2)}},
		{"attention, a bool mask and causal", func(xs []*Tensor) *Tensor {
			keep := FromSlice([]bool{true, false, true, true, true, false, true}, 7)
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], keep, true, 0)
		}, []*Tensor{r(1, 3, 7, 4), r(2, 3, 7, 4), r(3, 3, 7, 4)}},
		{"a value used twice", one(func(x *Tensor) *Tensor { return x.Mul(x).Add(x.Exp()) }), []*Tensor{r(1, 4)}},
		{"index select, repeated", one(func(x *Tensor) *Tensor { return x.IndexSelect(1, FromSlice([]int64{2, 0, 2, -1}, 4)).Exp() }),
			[]*Tensor{r(1, 3, 4)}},
		{"embedding, repeated", one(func(w *Tensor) *Tensor { return Embedding(FromSlice([]int64{1, 3, 1, 1, 0, 3}, 2, 3), w).Tanh() }),
			[]*Tensor{r(1, 5, 3)}},
		{"index add", two(func(x, s *Tensor) *Tensor { return x.IndexAdd(0, FromSlice([]int64{1, 1, 3}, 3), s).Exp() }),
			[]*Tensor{r(1, 4, 2), r(2, 3, 2)}},
		{"index copy", two(func(x, s *Tensor) *Tensor { return x.IndexCopy(1, FromSlice([]int64{2, -1}, 2), s).Exp() }),
			[]*Tensor{r(1, 3, 5), r(2, 3, 2)}},
		{"index put, two indices, accumulate", two(func(x, v *Tensor) *Tensor {
			return x.IndexPut([]*Tensor{FromSlice([]int64{0, 2, 0}, 3), FromSlice([]int64{1, -1, 1}, 3)}, v, true).Exp()
		}), []*Tensor{r(1, 3, 4, 2), r(2, 3, 2)}},
		{"gather, repeated and negative", one(func(x *Tensor) *Tensor {
			return x.Gather(1, FromSlice([]int64{0, 2, 2, -1, 1, 0}, 2, 3)).Exp()
		}), []*Tensor{r(1, 2, 4)}},
		{"gather, a smaller index", one(func(x *Tensor) *Tensor { return x.Gather(0, FromSlice([]int64{2, 0}, 1, 2)).Exp() }),
			[]*Tensor{r(1, 3, 4)}},
		{"cross-entropy by gather", one(func(x *Tensor) *Tensor {
			return x.LogSoftmax(-1).Gather(-1, FromSlice([]int64{3, 0, 4}, 3, 1)).Sum().Neg()
		}), []*Tensor{r(1, 3, 5)}},
		{"cumsum", one(func(x *Tensor) *Tensor { return x.CumSum(1).Exp() }), []*Tensor{r(1, 3, 5)}},
		{"cumsum, negative dim", one(func(x *Tensor) *Tensor { return x.CumSum(-2).Sin() }), []*Tensor{r(1, 4, 2)}},
		{"sort values", one(func(x *Tensor) *Tensor { v, _ := x.Sort(-1, false); return v.Mul(v) }), []*Tensor{r(1, 3, 6)}},
		{"ceil, round and sign have zero gradients", one(func(x *Tensor) *Tensor { return x.Ceil().Add(x.Round()).Add(x.Sign()).Add(x.Exp()) }),
			[]*Tensor{away(4, 7).MulScalar(0.3)}},
		{"clamp below", one(func(x *Tensor) *Tensor { return x.Clamp(-0.5, math.Inf(1)) }), []*Tensor{r(3, 12).MulScalar(0.97)}},
		{"clamp above", one(func(x *Tensor) *Tensor { return x.Clamp(math.Inf(-1), 0.5) }), []*Tensor{r(3, 12).MulScalar(0.97)}},
		{"pad and crop", one(func(x *Tensor) *Tensor { return x.Pad([]int{1, -1, 2, 0}, 0.5).Exp() }), []*Tensor{r(1, 3, 4)}},
		{"repeat", one(func(x *Tensor) *Tensor { return x.Repeat(2, 1, 3).Sin() }), []*Tensor{r(1, 2, 3)}},
		{"triu", one(func(x *Tensor) *Tensor { return x.Triu(1).Exp() }), []*Tensor{r(1, 2, 4, 4)}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		gradCheck(t, c.name, c.f, c.xs...)
		var leaves []*Tensor
		for _, x := range c.xs {
			leaves = append(leaves, x.Detach().SetRequiresGrad(true))
		}
		recordedOps(c.f(leaves), covered)
	}
	// Every differentiable op of the registry is checked here: recorded by
	// a case, or named below with the case that checks it another way
	// (composites record their decomposition's ops) or why the golden
	// cases check it instead.
	elsewhere := map[string]string{
		"cast":      "a cast to a narrower type rounds below a finite difference's step: TestGradients16 and the golden cases check it",
		"linear":    "composite: the linear case checks it through its decomposition",
		"pad":       "composite: the pad and crop case checks it through its decomposition",
		"repeat":    "composite: the repeat case checks it through its decomposition",
		"var":       "composite: the var case checks it through its decomposition",
		"attention": "the extern few-query attention lowers to: the attention cases check it compiled",
	}
	for _, op := range ir.Ops() {
		if op.Differentiable() && !covered[op.Name] && elsewhere[op.Name] == "" {
			t.Errorf("differentiable op %q has no finite-difference case: add one to TestGradients", op.Name)
		}
	}
}

// Gradients add up across Backward calls until ZeroGrad; a scalar result
// needs no upstream gradient; results of tensors that need no gradient,
// and anything inside NoGrad, record nothing.
func TestBackwardAccumulatesAndNoGrad(t *testing.T) {
	x := FromSlice([]float64{1, 2, 3}, 3).SetRequiresGrad(true)
	x.Mul(x).Sum().Backward()
	x.Mul(x).Sum().Backward()
	checkClose(t, "accumulated", x.Grad(), Float64, []int{3}, []float64{4, 8, 12}, 1)
	x.ZeroGrad()
	if x.Grad() != nil {
		t.Error("ZeroGrad left a gradient")
	}
	x.Exp().Sum().Backward()
	checkClose(t, "after ZeroGrad", x.Grad(), Float64, []int{3}, []float64{math.E, math.Exp(2), math.Exp(3)}, 1)

	y := Ones(Float64, 3)
	if y.Mul(y).RequiresGrad() {
		t.Error("an op on tensors without gradients records one")
	}
	var z *Tensor
	NoGrad(func() { z = x.Mul(x) })
	if z.RequiresGrad() || !z.IsLeaf() {
		t.Error("an op inside NoGrad recorded a gradient")
	}
	if x.Mul(x).IsLeaf() {
		t.Error("an op on a tensor that requires gradients gave a leaf")
	}
	if x.Detach().RequiresGrad() {
		t.Error("Detach kept the gradient")
	}
	if x.GtScalar(1).RequiresGrad() || x.ArgMax(0, false).RequiresGrad() {
		t.Error("a bool or integer result requires a gradient")
	}
}

// NoGrad is per goroutine: another goroutine keeps recording meanwhile.
func TestNoGradIsPerGoroutine(t *testing.T) {
	x := FromSlice([]float64{1, 2}, 2).SetRequiresGrad(true)
	inside, outside := make(chan struct{}), make(chan bool)
	go func() {
		<-inside
		outside <- x.Mul(x).RequiresGrad()
	}()
	NoGrad(func() {
		close(inside)
		if !<-outside {
			t.Error("another goroutine stopped recording during NoGrad")
		}
		if x.Mul(x).RequiresGrad() {
			t.Error("NoGrad's own goroutine recorded")
		}
	})
}

// Independent models trained from separate goroutines get the gradients
// they get one after another.
func TestGradientsConcurrent(t *testing.T) {
	step := func(seed uint64) []float64 {
		w := Randn(seed, Float64, 4, 3).SetRequiresGrad(true)
		x := Randn(seed+1, Float64, 5, 4)
		for range 3 {
			x.MatMul(w).Tanh().Sum().Backward()
		}
		return w.Grad().Float64s()
	}
	want := make([][]float64, 8)
	for i := range want {
		want[i] = step(uint64(10 * i))
	}
	var wg sync.WaitGroup
	got := make([][]float64, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			NoGrad(func() {}) // scopes opening and closing elsewhere do not disturb them
			got[i] = step(uint64(10 * i))
		}()
	}
	wg.Wait()
	for i := range got {
		for j := range got[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("model %d: gradient %d is %v concurrently, %v alone", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// Misuse is an error naming the op and the fix: Backward of a non-scalar
// without a gradient, of a tensor without gradients, a saved value
// written in place before Backward, in-place writes into tensors that
// take part, an op without a derivative, integer leaves.
func TestAutogradErrors(t *testing.T) {
	x := FromSlice([]float64{1, 2, 3}, 3).SetRequiresGrad(true)
	checkOpError(t, "non-scalar", func() { x.Mul(x).Backward() }, "Backward", "scalar")
	checkOpError(t, "no gradients", func() { Ones(Float64, 2).Sum().Backward() }, "Backward", "SetRequiresGrad")
	checkOpError(t, "wrong gradient shape", func() { x.Mul(x).Backward(Ones(Float64, 2)) }, "Backward", "shape")

	y := FromSlice([]float64{1, 2, 3}, 3)
	z := x.Mul(y) // saves y
	y.Fill(7)
	checkOpError(t, "saved value overwritten", func() { z.Sum().Backward() }, "Mul", "written in place")

	checkOpError(t, "write into a leaf", func() { x.Fill(0) }, "Fill", "NoGrad")
	checkOpError(t, "write into a result", func() { x.Exp().Copy(Ones(Float64, 3)) }, "Copy", "Exp")
	NoGrad(func() { x.Fill(0) }) // as an optimizer's update does
	checkClose(t, "written under NoGrad", x.Detach(), Float64, []int{3}, []float64{0, 0, 0}, 1)

	checkOpError(t, "no derivative", func() {
		x.AsStridedScatter(FromSlice([]float64{5}, 1), []int{1}, []int{1}, 0).Sum().Backward()
	}, "AsStridedScatter", "no derivative")
	checkOpError(t, "integer leaf", func() { FromSlice([]int64{1}, 1).SetRequiresGrad(true) }, "SetRequiresGrad", "floating")
	err := Try(func() { x.Mul(x).SetRequiresGrad(true) })
	if err == nil || !strings.Contains(err.Error(), "Detach") {
		t.Errorf("SetRequiresGrad on a result: %v, want an error pointing at Detach", err)
	}
}

// Gradients flow on the device the tensors live on.
func TestGPUGradients(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, dt := range []DType{Float32, Float64} {
		xs, ws := Randn(1, Float64, 4, 6), Randn(2, Float64, 3, 6)
		f := func(x, w *Tensor) *Tensor {
			idx := FromSlice([]int64{2, 0, 2, 1}, 2, 2).To(x.Device())
			rows := Embedding(idx, w).Tanh().Sum() // repeated rows: their gradients add up
			return x.Linear(w, nil).Softmax(-1).Mul(x.Sum(-1).Unsqueeze(-1)).Sum().Add(rows)
		}
		xc, wc := xs.To(dt).SetRequiresGrad(true), ws.To(dt).SetRequiresGrad(true)
		xg, wg := xs.To(dt).To(dev).SetRequiresGrad(true), ws.To(dt).To(dev).SetRequiresGrad(true)
		f(xc, wc).Backward()
		f(xg, wg).Backward()
		for _, p := range [][2]*Tensor{{xg, xc}, {wg, wc}} {
			if p[0].Grad().Device() != dev {
				t.Fatalf("%v: a gradient on %v, want %v", dt, p[0].Grad().Device(), dev)
			}
			checkClose(t, fmt.Sprintf("%v gradient on the GPU", dt), p[0].Grad(), dt, p[1].Shape(), p[1].Grad().Float64s(), 64)
		}
	}
}

// A compiled training step: a function that computes a loss from
// captured parameters and arguments that require gradients and calls
// Backward is traced into one graph with its backward, compiled once and
// replayed; each call adds the same gradients an eager call does, to the
// captured parameters and to the arguments, and reads the parameters'
// values as updated between calls.
func TestCompileTrainingStep(t *testing.T) {
	params := func() []*Tensor {
		return []*Tensor{
			Randn(1, Float64, 6, 4).MulScalar(0.5).SetRequiresGrad(true),
			Randn(2, Float64, 6).SetRequiresGrad(true),
			Randn(3, Float64, 6).SetRequiresGrad(true),
			Randn(4, Float64, 3, 6).MulScalar(0.5).SetRequiresGrad(true),
		}
	}
	step := func(p []*Tensor) func(x, scale *Tensor, target *Tensor) *Tensor {
		return func(x, scale, target *Tensor) *Tensor {
			h := x.Mul(scale).Linear(p[0], p[1]).LayerNorm([]int{6}, p[2], nil, 1e-5).GELU()
			logp := h.Linear(p[3], nil).LogSoftmax(-1)
			loss := logp.Gather(-1, target).Mean().Neg()
			loss.Backward()
			return loss
		}
	}
	pe, pc := params(), params()
	var st CompileStats
	eager, compiled := step(pe), Compile(step(pc), WithStats(&st))
	x, target := Randn(5, Float64, 5, 4), FromSlice([]int64{0, 2, 1, 1, 0}, 5, 1)
	se, sc := Ones(Float64, 4).SetRequiresGrad(true), Ones(Float64, 4).SetRequiresGrad(true)
	for call := range 4 {
		le, lc := eager(x, se, target), compiled(x, sc, target)
		what := fmt.Sprintf("call %d", call)
		checkClose(t, what+": loss", lc.Detach(), Float64, []int{}, []float64{le.Item()}, 1)
		for i := range pe {
			checkClose(t, fmt.Sprintf("%s: parameter %d's gradient", what, i), pc[i].Grad(), Float64, pe[i].Shape(), pe[i].Grad().Float64s(), 1)
		}
		checkClose(t, what+": the argument's gradient", sc.Grad(), Float64, []int{4}, se.Grad().Float64s(), 1)
		if call%2 == 1 { // an optimizer step between calls, eagerly
			sgdStep(0.1, pe, pc)
		}
	}
	if n := st.Compiles.Load(); n != 1 {
		t.Errorf("%d compilations over 4 calls, want 1", n)
	}
	if n := st.EagerCalls.Load(); n != 0 {
		t.Errorf("%d calls ran eagerly", n)
	}
	if n := st.Calls.Load(); n != 4 {
		t.Errorf("%d calls counted, want 4", n)
	}
}

// Backward after the call of a compiled function (its result requires
// gradients) gives eager gradients through the compiled backward; a graph
// break in a function that records gradients runs it eagerly, with one
// warning, and gives eager gradients too.
func TestCompileGradientsFallBack(t *testing.T) {
	logged := captureLogs(t, "")
	w := Randn(1, Float64, 4, 2).SetRequiresGrad(true)
	x := Randn(2, Float64, 3, 4)
	f := Compile(func(x *Tensor) *Tensor { return x.MatMul(w).Tanh().Sum() })
	f(x).Backward()
	f(x).Backward()
	want := Randn(1, Float64, 4, 2).SetRequiresGrad(true)
	x.MatMul(want).Tanh().Sum().Backward()
	x.MatMul(want).Tanh().Sum().Backward()
	checkClose(t, "Backward after the call", w.Grad(), Float64, []int{4, 2}, want.Grad().Float64s(), 1)

	w.ZeroGrad()
	want.ZeroGrad()
	var seen float64
	g := Compile(func(x *Tensor) *Tensor {
		loss := x.MatMul(w).Sin().Sum()
		seen = loss.Item() // a graph break
		loss.Backward()
		return loss
	})
	g(x)
	x.MatMul(want).Sin().Sum().Backward()
	checkClose(t, "with a graph break", w.Grad(), Float64, []int{4, 2}, want.Grad().Float64s(), 1)
	if seen == 0 {
		t.Error("the function did not run")
	}
	if n := strings.Count(logged.String(), "running this compiled function eagerly"); n != 1 {
		t.Errorf("%d eager-fallback warnings, want one (the graph break):\n%s", n, logged)
	}
}

// Gradients of 16-bit tensors are 16-bit, computed in float32 inside the
// fused derivatives, and near float64's on the same values.
func TestGradients16(t *testing.T) {
	for _, dt := range []DType{BFloat16, Float16} {
		f := func(x, w, b *Tensor) *Tensor {
			return x.LayerNorm([]int{8}, w, b, 1e-5).Softmax(-1).Mul(x.RMSNorm([]int{8}, w, 1e-6)).Sum()
		}
		x, w, b := Randn(1, Float64, 3, 8), Randn(2, Float64, 8), Randn(3, Float64, 8)
		var ref []*Tensor
		for _, v := range []*Tensor{x, w, b} {
			ref = append(ref, v.To(dt).To(Float64).SetRequiresGrad(true))
		}
		f(ref[0], ref[1], ref[2]).Backward()
		var low []*Tensor
		for _, v := range []*Tensor{x, w, b} {
			low = append(low, v.To(dt).SetRequiresGrad(true))
		}
		f(low[0], low[1], low[2]).Backward()
		for i := range low {
			g := low[i].Grad()
			if g.DType() != dt {
				t.Fatalf("%v: gradient %d is %v", dt, i, g.DType())
			}
			want, got := ref[i].Grad().Float64s(), g.Float64s()
			scale := 0.0
			for _, v := range want {
				scale = math.Max(scale, math.Abs(v))
			}
			for j := range got {
				if math.Abs(got[j]-want[j]) > 0.05*scale {
					t.Errorf("%v gradient %d element %d: %v, float64 gives %v", dt, i, j, got[j], want[j])
					break
				}
			}
		}
	}
}

// One compiled training step called from many goroutines at once, each
// with its own parameters as arguments, gives each the gradients an eager
// call gives (race detector clean).
func TestCompileTrainingStepConcurrent(t *testing.T) {
	f := Compile(func(x, w *Tensor) *Tensor {
		loss := x.MatMul(w).Tanh().Sum()
		loss.Backward()
		return loss
	})
	x := Randn(1, Float64, 5, 4)
	want := make([][]float64, 6)
	for i := range want {
		w := Randn(uint64(10+i), Float64, 4, 3).SetRequiresGrad(true)
		x.MatMul(w).Tanh().Sum().Backward()
		want[i] = w.Grad().Float64s()
	}
	got := make([][]float64, len(want))
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := Randn(uint64(10+i), Float64, 4, 3).SetRequiresGrad(true)
			f(x, w)
			got[i] = w.Grad().Float64s()
		}()
	}
	wg.Wait()
	for i := range got {
		for j := range got[i] {
			if math.Abs(got[i][j]-want[i][j]) > 1e-12*math.Max(1, math.Abs(want[i][j])) {
				t.Errorf("goroutine %d: gradient %v, eager %v", i, got[i], want[i])
				break
			}
		}
	}
}

// Explain shows a training step as Compile traces it: one graph with the
// backward's ops, and the leaves whose gradients it outputs.
func TestExplainTrainingStep(t *testing.T) {
	w := Randn(1, Float64, 4, 3).SetRequiresGrad(true)
	ex, err := Explain(func(x, b *Tensor) *Tensor {
		loss := x.MatMul(w).Add(b).Tanh().Sum()
		loss.Backward()
		return loss
	}, Randn(2, Float64, 5, 4), Zeros(Float64, 3).SetRequiresGrad(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Gradients) != 2 || ex.Graphs != 1 {
		t.Fatalf("%d graphs, gradients %v; want one graph and two gradients", ex.Graphs, ex.Gradients)
	}
	// The backward's products: the forward has one MatMul, the backward
	// one more for w's gradient (x's is not needed).
	if ex.OpCounts["matmul"] != 2 {
		t.Errorf("%d matmuls in the joint graph, want 2:\n%s", ex.OpCounts["matmul"], ex)
	}
	if s := ex.String(); !strings.Contains(s, "gradients (forward and backward in one graph)") || !strings.Contains(s, "argument tensor 1") {
		t.Errorf("explanation:\n%s", s)
	}
	if w.Grad() != nil {
		t.Error("Explain added a gradient")
	}
	// Only a captured parameter requires gradients: a model's training
	// step, explained as Compile traces it through its gradient twin.
	ex, err = Explain(func(x *Tensor) *Tensor {
		loss := x.MatMul(w).Tanh().Sum()
		loss.Backward()
		return loss
	}, Randn(2, Float64, 5, 4))
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Gradients) != 1 || !strings.Contains(ex.Gradients[0], "a captured tensor") {
		t.Errorf("gradients %v, want the captured parameter's", ex.Gradients)
	}
	// Backward after the call: the joint graph split in two, the tanh's
	// input saved (a product's value) and the tanh recomputed, with the
	// rest of its derivative.
	ex, err = Explain(func(x *Tensor) *Tensor { return x.MatMul(w).Tanh() }, Randn(2, Float64, 5, 4))
	if err != nil {
		t.Fatal(err)
	}
	recomputed := strings.Join(ex.Recomputed, " ")
	if ex.Forward == "" || ex.Backward == "" || len(ex.Saved) != 1 || !strings.Contains(ex.Saved[0], "(matmul)") ||
		!strings.Contains(recomputed, "(tanh)") || strings.Contains(recomputed, "(matmul)") {
		t.Errorf("split: saved %v, recomputed %v (%s):\n%s", ex.Saved, ex.Recomputed, ex.Split, ex)
	}
	if s := ex.String(); !strings.Contains(s, "saved for the backward") || !strings.Contains(s, "backward graph:") {
		t.Errorf("explanation:\n%s", s)
	}
	if w.Grad() != nil {
		t.Error("Explain added a gradient")
	}
}

// One compiled model function called from several goroutines, each with
// its own input and its loss's Backward taken after the call, splits its
// joint graph once and gives each goroutine the gradients its call would
// give alone (race detector clean).
func TestCompiledModelBackwardOutsideConcurrent(t *testing.T) {
	w := Randn(1, Float64, 4, 3).SetRequiresGrad(true)
	model := Compile(func(x *Tensor) *Tensor { return x.MatMul(w).Tanh() })
	const workers = 4
	xs := make([]*Tensor, workers)
	want := make([][]float64, workers)
	for i := range xs {
		xs[i] = Randn(uint64(10+i), Float64, 5, 4).SetRequiresGrad(true)
		x := xs[i].Detach().SetRequiresGrad(true)
		x.MatMul(w.Detach()).Tanh().Sum().Backward()
		want[i] = x.Grad().Float64s()
	}
	model(xs[0]).Sum().Backward() // the first backward splits the graph
	xs[0].ZeroGrad()
	partitioned := stats.PartitionedBackwards.Load()
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Try(func() {
				for range 3 {
					xs[i].ZeroGrad()
					model(xs[i]).Sum().Backward()
				}
			})
		}()
	}
	wg.Wait()
	for i := range workers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkClose(t, fmt.Sprintf("goroutine %d", i), xs[i].Grad(), Float64, []int{5, 4}, want[i], 1)
	}
	if n := stats.PartitionedBackwards.Load() - partitioned; n != workers*3 {
		t.Errorf("%d backwards ran from saved values, want %d", n, workers*3)
	}
}

// recordedOps adds the names of the ops whose gradient nodes lead to t.
func recordedOps(t *Tensor, ops map[string]bool) {
	seen := map[*gradNode]bool{}
	var walk func(t *Tensor)
	walk = func(t *Tensor) {
		if t == nil || t.ag == nil || t.ag.node == nil || seen[t.ag.node] {
			return
		}
		n := t.ag.node
		seen[n] = true
		ops[n.op.Name] = true
		for _, a := range n.args {
			if at, ok := a.(*Tensor); ok {
				walk(at)
			}
		}
	}
	walk(t)
}

// A compiled model whose loss is taken after the call: the forward is the
// plain compiled program, and Backward on the loss runs the compiled
// backward (forward recomputed and backward as one graph), giving the
// captured parameters and the arguments eager gradients, step after step
// with updates between; an argument that is not a leaf runs eagerly.
func TestCompiledModelBackwardOutside(t *testing.T) {
	mk := func() []*Tensor {
		return []*Tensor{Randn(1, Float64, 6, 4).MulScalar(0.5).SetRequiresGrad(true), Randn(2, Float64, 6).SetRequiresGrad(true),
			Randn(3, Float64, 2, 6).MulScalar(0.5).SetRequiresGrad(true)}
	}
	model := func(p []*Tensor) func(x, s *Tensor) *Tensor {
		return func(x, s *Tensor) *Tensor { return x.Mul(s).Linear(p[0], p[1]).GELU().Linear(p[2], nil) }
	}
	pe, pc := mk(), mk()
	var st CompileStats
	eager, compiled := model(pe), Compile(model(pc), WithStats(&st))
	x, y := Randn(4, Float64, 5, 4), Randn(5, Float64, 5, 2)
	se, sc := Ones(Float64, 4).SetRequiresGrad(true), Ones(Float64, 4).SetRequiresGrad(true)
	partitioned := stats.PartitionedBackwards.Load()
	for step := range 4 {
		for _, m := range []struct {
			f func(x, s *Tensor) *Tensor
			s *Tensor
		}{{eager, se}, {compiled, sc}} {
			d := m.f(x, m.s).Sub(y)
			d.Mul(d).Mean().Backward()
		}
		for i := range pe {
			checkClose(t, fmt.Sprintf("step %d, parameter %d", step, i), pc[i].Grad(), Float64, pe[i].Shape(), pe[i].Grad().Float64s(), 1)
		}
		checkClose(t, fmt.Sprintf("step %d, the argument", step), sc.Grad(), Float64, []int{4}, se.Grad().Float64s(), 1)
		sgdStep(0.1, pe, pc)
	}
	if n := st.EagerCalls.Load(); n != 0 {
		t.Errorf("%d calls ran eagerly", n)
	}
	if n := st.Compiles.Load(); n != 2 {
		t.Errorf("%d compilations, want 2 (the forward, and the backward with its forward)", n)
	}
	// The first backward recomputes the forward; it then splits the
	// joint graph, and the three later ones run from saved values.
	if n := stats.PartitionedBackwards.Load() - partitioned; n != 3 {
		t.Errorf("%d backwards ran from saved values, want 3", n)
	}
	// An argument that is not a leaf: eagerly, gradients flowing through it.
	logged := captureLogs(t, "")
	w0 := Randn(6, Float64, 4, 4).SetRequiresGrad(true)
	h := x.MatMul(w0)
	compiled(h, sc).Sum().Backward()
	if w0.Grad() == nil {
		t.Error("no gradient through a non-leaf argument")
	}
	if !strings.Contains(logged.String(), "not a leaf") {
		t.Errorf("no warning for a non-leaf argument:\n%s", logged)
	}
}

// sgdStep updates each parameter of each set by plain SGD, in place, and
// clears its gradient: the optimizer step between compiled calls.
func sgdStep(lr float64, sets ...[]*Tensor) {
	NoGrad(func() {
		for _, ps := range sets {
			for _, p := range ps {
				p.Copy(p.Sub(p.Grad().MulScalar(lr)))
				p.ZeroGrad()
			}
		}
	})
}
