package tensor

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"gocompile/ir"
)

// sameValues reports whether two tensors hold the same values bit for bit
// (NaNs equal), with the same shape and dtype.
func sameValues(t *testing.T, what string, got, want *Tensor) {
	t.Helper()
	if got.DType() != want.DType() || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Fatalf("%s: %v%v, want %v%v", what, got.DType(), got.Shape(), want.DType(), want.Shape())
	}
	g, w := got.Float64s(), want.Float64s()
	for i := range w {
		if g[i] != w[i] && !(math.IsNaN(g[i]) && math.IsNaN(w[i])) {
			t.Fatalf("%s: element %d is %v compiled, %v eager", what, i, g[i], w[i])
		}
	}
}

// fusedValues is sameValues for results an eager run computes with other
// kernels than the graph's: composite ops (Softmax, LayerNorm, …) run as
// one fused kernel eagerly on a GPU (package inductor/program) but arrive
// at a backend decomposed, so the two sum in different orders. They agree
// to float32 rounding.
func fusedValues(t *testing.T, what string, got, want *Tensor) {
	t.Helper()
	if got.Device() == CPU {
		sameValues(t, what, got, want)
		return
	}
	closeValues(t, what, got, want, 1e-5)
}

// Every op, compiled with the eager backend, gives exactly the eager
// result: the graph replays the same kernels (composite ops on a GPU:
// see fusedValues).
func TestCompileMatchesEagerEveryOp(t *testing.T) {
	g := NewGenerator(1)
	x := g.Randn(Float32, 3, 1023)
	y := g.Randn(Float32, 3, 1023)
	idx := g.RandInt(0, 1023, 3, 4)
	ops := []struct {
		name string
		f    func(x, y *Tensor) *Tensor
	}{
		{"add", (*Tensor).Add}, {"sub", (*Tensor).Sub}, {"mul", (*Tensor).Mul}, {"div", (*Tensor).Div},
		{"pow", func(x, y *Tensor) *Tensor { return x.Abs().Pow(y) }},
		{"maximum", (*Tensor).Maximum}, {"minimum", (*Tensor).Minimum},
		{"scalars", func(x, _ *Tensor) *Tensor {
			return x.AddScalar(1).SubScalar(2).MulScalar(3).DivScalar(4).PowScalar(2).MaximumScalar(0.5).MinimumScalar(3)
		}},
		{"unary", func(x, _ *Tensor) *Tensor {
			return x.Neg().Abs().Exp().Log().Sqrt().Rsqrt().Sin().Cos().Tanh().Erf().Sigmoid()
		}},
		{"activations", func(x, _ *Tensor) *Tensor { return x.ReLU().Add(x.GELU()).Add(x.GELUTanh()).Add(x.SiLU()) }},
		{"compare", func(x, y *Tensor) *Tensor {
			return x.Eq(y).LogicalOr(x.Ne(y)).LogicalAnd(x.Lt(y).LogicalOr(x.Le(y)).LogicalOr(x.Gt(y)).LogicalOr(x.Ge(y))).LogicalNot()
		}},
		{"where clamp mask", func(x, y *Tensor) *Tensor {
			return Where(x.GtScalar(0), x, y).Clamp(-0.5, 0.5).MaskedFill(y.LtScalar(0), 9)
		}},
		{"casts", func(x, _ *Tensor) *Tensor { return x.MulScalar(10).To(Int32).To(Float16).To(Float64) }},
		{"reductions", func(x, _ *Tensor) *Tensor {
			return x.Sum(1).Add(x.Mean(1)).Add(x.Max(1)).Add(x.Min(1)).Add(x.Var([]int{1}, 1, false))
		}},
		{"arg reductions", func(x, _ *Tensor) *Tensor { return x.ArgMax(1, false).Add(x.ArgMin(0, false).Sum()) }},
		{"keepdim", func(x, _ *Tensor) *Tensor { return x.SumKeepDim(0).Add(x.MaxKeepDim(1)) }},
		{"softmax", func(x, _ *Tensor) *Tensor { return x.Softmax(-1).Add(x.LogSoftmax(0)) }},
		{"norms", func(x, y *Tensor) *Tensor {
			return x.LayerNorm([]int{1023}, y.Select(0, 0), y.Select(0, 1), 1e-5).Add(x.RMSNorm([]int{1023}, nil, 1e-6))
		}},
		{"matmul linear", func(x, y *Tensor) *Tensor { return x.MatMul(y.T()).Add(x.Linear(y, y.Select(1, 0))) }},
		{"views", func(x, _ *Tensor) *Tensor {
			return x.Reshape(3, 31, 33).Transpose(0, 2).Permute(1, 0, 2).Unsqueeze(0).Squeeze(0).Flatten(0, 1).Slice(0, 1, 30, 2).Contiguous()
		}},
		{"expand narrow select", func(x, _ *Tensor) *Tensor {
			return x.Select(0, 1).Unsqueeze(0).Expand(4, 1023).Narrow(1, 10, 100)
		}},
		{"cat stack split", func(x, y *Tensor) *Tensor {
			p := x.Split([]int{500, 523}, 1)
			return Stack([]*Tensor{Cat([]*Tensor{p[1], p[0]}, 1), y}, 0)
		}},
		{"gather index embedding", func(x, _ *Tensor) *Tensor {
			return x.Gather(1, idx).Sum().Add(x.IndexSelect(1, idx.Select(0, 0)).Sum()).Add(Embedding(idx, x.T()).Sum())
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			want := op.f(x, y)
			got := Compile(op.f, WithBackend("eager"))(x, y)
			switch op.name {
			case "softmax", "norms", "reductions": // composites: Softmax, LayerNorm, Var …
				fusedValues(t, op.name, got, want)
			default:
				sameValues(t, op.name, got, want)
			}
		})
	}
}

type mlpModel struct {
	W1, B1, W2, B2 *Tensor
}

func (m *mlpModel) forward(x *Tensor) *Tensor {
	return x.Linear(m.W1, m.B1).GELU().Linear(m.W2, m.B2)
}

// attention is a transformer block: layer norm, causal self-attention with
// softmax, residual, MLP.
func attention(x, wqkv, wo, w1, w2, ln *Tensor, mask *Tensor) *Tensor {
	b, s, d := x.Size(0), x.Size(1), x.Size(2)
	h := x.LayerNorm([]int{d}, ln, nil, 1e-5)
	qkv := h.Linear(wqkv, nil).Reshape(b, s, 3, d)
	q, k, v := qkv.Select(2, 0), qkv.Select(2, 1), qkv.Select(2, 2)
	scores := q.MatMul(k.Transpose(1, 2)).DivScalar(math.Sqrt(float64(d))).MaskedFill(mask, math.Inf(-1))
	x = x.Add(scores.Softmax(-1).MatMul(v).Linear(wo, nil))
	return x.Add(x.LayerNorm([]int{d}, nil, nil, 1e-5).Linear(w1, nil).ReLU().Linear(w2, nil))
}

func TestCompileComposites(t *testing.T) {
	g := NewGenerator(3)
	m := &mlpModel{g.Randn(Float32, 64, 32), g.Randn(Float32, 64), g.Randn(Float32, 8, 64), g.Randn(Float32, 8)}
	fwd := func(m *mlpModel, x *Tensor) *Tensor { return m.forward(x) }
	x := g.Randn(Float32, 5, 32)
	nearValues(t, "mlp", Compile(fwd)(m, x), fwd(m, x))

	const s, d = 7, 16
	xs := g.Randn(Float32, 2, s, d)
	wqkv, wo := g.Randn(Float32, 3*d, d), g.Randn(Float32, d, d)
	w1, w2, ln := g.Randn(Float32, 4*d, d), g.Randn(Float32, d, 4*d), g.Randn(Float32, d)
	mask := Ones(Float32, s, s).To(Bool)
	for i := range s {
		for j := 0; j <= i; j++ {
			mask.Set(0, i, j)
		}
	}
	block := func(x *Tensor) *Tensor { return attention(x, wqkv, wo, w1, w2, ln, mask) }
	nearValues(t, "transformer block", Compile(block)(xs), block(xs))
}

func TestCompileRecompiles(t *testing.T) {
	var st CompileStats
	f := Compile(func(x *Tensor) *Tensor { return x.Softmax(-1).MulScalar(2) }, WithStats(&st))
	f(Randn(1, Float32, 8, 16))
	f(Randn(2, Float32, 8, 16))
	if st.Compiles.Load() != 1 {
		t.Fatalf("same guards compiled %d times", st.Compiles.Load())
	}
	f(Randn(1, Float64, 8, 16))    // dtype
	f(Randn(1, Float32, 2, 8, 16)) // rank
	if st.Recompiles.Load() != 2 {
		t.Fatalf("dtype and rank changes: %d recompiles, want 2", st.Recompiles.Load())
	}
	// A new batch size recompiles once, making the dim dynamic; later sizes
	// reuse that graph.
	f(Randn(1, Float32, 9, 16))
	before := st.Compiles.Load()
	for _, b := range []int{3, 17, 64, 100} {
		x := Randn(uint64(b), Float32, b, 16)
		nearValues(t, fmt.Sprint("batch ", b), f(x), x.Softmax(-1).MulScalar(2))
	}
	if st.Compiles.Load() != before {
		t.Fatalf("new batch sizes recompiled %d times after the dim became dynamic", st.Compiles.Load()-before)
	}
	if st.Calls.Load() != 9 {
		t.Fatalf("calls counted %d, want 9", st.Calls.Load())
	}
}

func TestCompileRecompileLimitFallsBack(t *testing.T) {
	var st CompileStats
	f := Compile(func(x *Tensor, s float64) *Tensor { return x.MulScalar(s) }, RecompileLimit(2), WithStats(&st))
	x := FromSlice([]float32{1, 2})
	for i := range 5 {
		got := f(x, float64(i)) // scalars are guarded by value: each value recompiles
		if got.At(1) != float64(2*i) {
			t.Fatalf("call %d: %v", i, got.Float32s())
		}
	}
	if st.Compiles.Load() != 2 || st.EagerCalls.Load() != 3 {
		t.Fatalf("compiles %d, eager calls %d; want 2 and 3", st.Compiles.Load(), st.EagerCalls.Load())
	}
}

// The warning at the limit says once what happened and why the call
// missed.
func TestCompileRecompileLimitWarning(t *testing.T) {
	rec := record(t)
	f := Compile(logged, RecompileLimit(1))
	f(Zeros(Float32, 2))
	f(Zeros(Float64, 2))
	f(Zeros(Int64, 2)) // warned once
	want := "gocompile: recompile limit reached; running eagerly from now on function=gocompile/tensor.logged limit=1 " +
		"reason=entry 0: tensor 0: dtype float64, expected float32"
	if got := strings.Join(rec.Lines(), "\n"); got != want {
		t.Errorf("logged\n%s\nwant\n%s", got, want)
	}
}

// A function whose inputs change dtype recompiles; its device is guarded too.
func TestCompileGuardsDevice(t *testing.T) {
	requireGPU(t)
	var st CompileStats
	f := Compile(func(x *Tensor) *Tensor { return x.AddScalar(1) }, WithStats(&st))
	f(FromSlice([]float32{1}).To(CPU))
	got := f(FromSlice([]float32{1}).To(CUDA(0)))
	if got.Device() != CUDA(0) || got.Item() != 2 || st.Recompiles.Load() != 1 {
		t.Fatalf("device change: %v %v, %d recompiles", got.Device(), got.Item(), st.Recompiles.Load())
	}
}

func breaking(x *Tensor) *Tensor {
	y := x.Exp()
	if y.Sum().Item() > 10 { // reading a value: a graph break
		return y.Neg()
	}
	return y.MulScalar(2)
}

func TestCompileGraphBreak(t *testing.T) {
	var st CompileStats
	f := Compile(breaking, WithStats(&st))
	small, big := FromSlice([]float32{0, 0.5}), FromSlice([]float32{3, 4})
	for range 2 {
		nearValues(t, "small", f(small), breaking(small))
		nearValues(t, "big", f(big), breaking(big))
	}
	if st.Breaks.Load() == 0 {
		t.Fatal("the break was not counted")
	}
	ex, err := Explain(breaking, small)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Graphs != 2 || len(ex.Breaks) != 1 {
		t.Fatalf("explain: %d graphs, %d breaks:\n%v", ex.Graphs, len(ex.Breaks), ex)
	}
	if b := ex.Breaks[0]; !strings.Contains(b.Reason, "Item") || !strings.HasPrefix(b.Loc, "compile_test.go:") {
		t.Fatalf("break reported as %v", b)
	}
	wantLine := fmt.Sprintf("compile_test.go:%d", lineOf(t, "if y.Sum().Item() > 10"))
	if ex.Breaks[0].Loc != wantLine {
		t.Fatalf("break at %s, want %s", ex.Breaks[0].Loc, wantLine)
	}
	err = Try(func() { Compile(breaking, FullGraph())(small) })
	if err == nil || !strings.Contains(err.Error(), wantLine) || !strings.Contains(err.Error(), "Item") {
		t.Fatalf("FullGraph: %v", err)
	}
}

func TestExplainReportsOpsAndGuards(t *testing.T) {
	ex, err := Explain(func(x, w *Tensor) *Tensor { return x.MatMul(w).ReLU().Sum(1) },
		Zeros(Float32, 4, 8), Zeros(Float32, 8, 2))
	if err != nil {
		t.Fatal(err)
	}
	if ex.Graphs != 1 || len(ex.Breaks) != 0 || ex.OpCounts["matmul"] != 1 || ex.OpCounts["relu"] != 1 || ex.OpCounts["sum"] != 1 {
		t.Fatalf("explain:\n%v", ex)
	}
	if !strings.Contains(ex.Guards, "float32") || !strings.Contains(ex.String(), "matmul") {
		t.Fatalf("explain:\n%v", ex)
	}
	// matmul, then relu and the row sum in one row kernel.
	if len(ex.Regions) != 2 || !strings.HasPrefix(ex.Regions[1], "row relu+sum") ||
		ex.PeakBytes == 0 || ex.PeakBytes >= ex.EagerPeakBytes {
		t.Fatalf("explain regions %q, peak %d bytes, eager %d", ex.Regions, ex.PeakBytes, ex.EagerPeakBytes)
	}
}

func TestCompileConcurrent(t *testing.T) {
	var st CompileStats
	f := Compile(func(x *Tensor, w *Tensor) *Tensor { return x.Linear(w, nil).GELU().Sum(-1) }, WithStats(&st))
	w := Randn(1, Float32, 16, 32)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				b := 1 + (g+i)%5 // mixed batch sizes: 1 stays specialised
				x := Randn(uint64(g*10+i), Float32, b, 32)
				got, want := f(x, w).Float64s(), x.Linear(w, nil).GELU().Sum(-1).Float64s()
				for j := range want {
					if math.Abs(got[j]-want[j]) > 1e-5*(math.Abs(want[j])+1) { // fused: a few ulps
						errs <- fmt.Sprintf("goroutine %d batch %d: %v vs %v", g, b, got[j], want[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if st.Calls.Load() != 256 || st.Compiles.Load() > 4 {
		t.Fatalf("%d calls, %d compiles", st.Calls.Load(), st.Compiles.Load())
	}
}

func TestCompileArgumentKinds(t *testing.T) {
	type pair struct {
		A, B  *Tensor
		scale float64
	}
	f := func(p pair, xs []*Tensor, s int) []*Tensor {
		return []*Tensor{p.A.Add(p.B).MulScalar(p.scale), xs[0].Mul(xs[1]).AddScalar(float64(s))}
	}
	p := pair{FromSlice([]float32{1, 2}), FromSlice([]float32{3, 4}), 0.5}
	xs := []*Tensor{FromSlice([]float32{5, 6}), FromSlice([]float32{7, 8})}
	cf := Compile(f)
	for range 2 {
		got, want := cf(p, xs, 3), f(p, xs, 3)
		nearValues(t, "struct", got[0], want[0])
		nearValues(t, "slice", got[1], want[1])
	}
	err := Try(func() { Compile(func(m map[string]*Tensor) *Tensor { return m["a"] })(nil) })
	if err == nil || !strings.Contains(err.Error(), "unsupported type") {
		t.Fatalf("map argument: %v", err)
	}
}

// A variadic function compiles: its variadic slice is flattened like a
// slice argument, and each number of variadic arguments gets its own
// guards.
func TestCompileVariadic(t *testing.T) {
	sum := func(scale float64, xs ...*Tensor) *Tensor {
		acc := Full(scale, Float32, 2)
		for _, x := range xs {
			acc = acc.Add(x.MulScalar(scale))
		}
		return acc
	}
	args := []*Tensor{FromSlice([]float32{1, 2}), FromSlice([]float32{3, 4}), FromSlice([]float32{5, 6})}
	for _, backend := range []string{"eager", "inductor"} {
		var st CompileStats
		cf := Compile(sum, WithBackend(backend), WithStats(&st))
		for range 2 { // the second round replays
			for _, n := range []int{0, 1, 3} {
				what := fmt.Sprintf("%s, %d variadic args", backend, n)
				sameValues(t, what, cf(0.5, args[:n]...), sum(0.5, args[:n]...))
			}
		}
		if got := st.Compiles.Load(); got != 3 {
			t.Errorf("%s: %d compiles for three argument counts, want 3", backend, got)
		}
	}
	// Passing a slice with ... is the same call.
	cf := Compile(sum)
	sameValues(t, "slice...", cf(2, args...), sum(2, args...))

	// Variadic results of the trace are rebuilt too.
	split := Compile(func(xs ...*Tensor) []*Tensor {
		out := make([]*Tensor, len(xs))
		for i, x := range xs {
			out[i] = x.Neg()
		}
		return out
	})
	for _, n := range []int{0, 1, 3} {
		got := split(args[:n]...)
		if len(got) != n {
			t.Fatalf("%d args: %d results", n, len(got))
		}
		for i := range got {
			sameValues(t, "neg", got[i], args[i].Neg())
		}
	}

	ex, err := Explain(sum, 1.0, args[0], args[1])
	if err != nil || ex.OpCounts["add"] != 2 {
		t.Fatalf("Explain of a variadic function: %v, %v", err, ex)
	}
}

// Calls whose leaves agree but whose slices split them differently do not
// share a compiled graph.
func TestCompileGuardsArgumentStructure(t *testing.T) {
	f := func(pos, neg []*Tensor, opt *struct{ Bias *Tensor }) *Tensor {
		acc := Zeros(Float32, 2)
		for _, x := range pos {
			acc = acc.Add(x)
		}
		for _, x := range neg {
			acc = acc.Sub(x)
		}
		if opt != nil {
			acc = acc.Add(opt.Bias.MulScalar(10))
		}
		return acc
	}
	a, b, c := FromSlice([]float32{1, 2}), FromSlice([]float32{3, 4}), FromSlice([]float32{5, 7})
	cf := Compile(f, WithBackend("eager"))
	for _, tc := range []struct {
		name     string
		pos, neg []*Tensor
		opt      *struct{ Bias *Tensor }
	}{
		{"a - b - c", []*Tensor{a}, []*Tensor{b, c}, nil},
		{"a + b - c", []*Tensor{a, b}, []*Tensor{c}, nil},
		{"a + b + c", []*Tensor{a, b, c}, nil, nil},
		{"a + b + c, empty neg", []*Tensor{a, b, c}, []*Tensor{}, nil},
		{"a + b + 10c", []*Tensor{a, b}, nil, &struct{ Bias *Tensor }{c}},
		{"a - b - c again", []*Tensor{a}, []*Tensor{b, c}, nil},
	} {
		sameValues(t, tc.name, cf(tc.pos, tc.neg, tc.opt), f(tc.pos, tc.neg, tc.opt))
	}
}

// A backend that returns neither a program nor an error falls back to
// eager; one whose program returns the wrong number of outputs is an
// *Error, not an index out of range.
func TestCompileBadBackends(t *testing.T) {
	RegisterBackend("test-nil-program", BackendFunc(func(g *ir.Graph) (Program, error) { return nil, nil }))
	RegisterBackend("test-short-program", BackendFunc(func(g *ir.Graph) (Program, error) { return shortProgram{}, nil }))
	x := FromSlice([]float32{1, -2})
	f := func(x *Tensor) *Tensor { return x.Abs().AddScalar(1) }
	sameValues(t, "nil program", Compile(f, WithBackend("test-nil-program"))(x), f(x))
	err := Try(func() { Compile(f, WithBackend("test-short-program"))(x) })
	if err == nil || !strings.Contains(err.Error(), "returned 0 outputs for a graph with 1") {
		t.Fatalf("short program: %v", err)
	}
}

type shortProgram struct{}

func (shortProgram) Run([]*Tensor) []*Tensor { return nil }

func TestCompileDisabled(t *testing.T) {
	t.Setenv("GOCOMPILE_DISABLE", "1")
	f := func(x *Tensor) *Tensor { return x }
	if reflect.ValueOf(Compile(f)).Pointer() != reflect.ValueOf(f).Pointer() {
		t.Fatal("GOCOMPILE_DISABLE=1 did not return fn itself")
	}
}

// A compiled function writes its arguments and the tensors it captures;
// a write into a value it computed is an error.
func TestCompileInPlaceWriteIsAnError(t *testing.T) {
	err := Try(func() {
		Compile(func(x *Tensor) *Tensor { y := x.AddScalar(1); y.Fill(1); return y })(Zeros(Float32, 2))
	})
	if err == nil || !strings.Contains(err.Error(), "in-place") || !strings.Contains(err.Error(), "computed inside the function") {
		t.Fatalf("got %v", err)
	}
}

// lineOf finds the line of this file that contains s.
func lineOf(t *testing.T, s string) int {
	t.Helper()
	src, err := readFile("compile_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, s) && !strings.Contains(l, "lineOf") {
			return i + 1
		}
	}
	t.Fatalf("no line with %q", s)
	return 0
}

func readFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}

// BenchmarkCompiledCallHit is the hot path of a compiled call: flatten the
// arguments, pass the guards, replay the program (four tiny tensors, so
// the kernels cost little next to the call).
func BenchmarkCompiledCallHit(b *testing.B) {
	f := Compile(func(a, x, y, z *Tensor) *Tensor { return a.Add(x).Mul(y).Sub(z) })
	a, x, y, z := Ones(Float32, 2), Ones(Float32, 2), Ones(Float32, 2), Ones(Float32, 2)
	f(a, x, y, z)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f(a, x, y, z)
	}
}

// BenchmarkCompiledCallHitInNoGrad is BenchmarkCompiledCallHit inside a
// NoGrad scope, as an inference service would call it.
func BenchmarkCompiledCallHitInNoGrad(b *testing.B) {
	f := Compile(func(a, x, y, z *Tensor) *Tensor { return a.Add(x).Mul(y).Sub(z) })
	a, x, y, z := Ones(Float32, 2), Ones(Float32, 2), Ones(Float32, 2), Ones(Float32, 2)
	NoGrad(func() {
		f(a, x, y, z)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			f(a, x, y, z)
		}
	})
}

// BenchmarkEagerSameOps is the same work without Compile, for comparison.
func BenchmarkEagerSameOps(b *testing.B) {
	a, x, y, z := Ones(Float32, 2), Ones(Float32, 2), Ones(Float32, 2), Ones(Float32, 2)
	b.ReportAllocs()
	for range b.N {
		a.Add(x).Mul(y).Sub(z)
	}
}

// Without breaks, later calls replay the program and do not run fn; with
// breaks, fn runs on every call.
func TestCompileReplaysWithoutRunningFn(t *testing.T) {
	runs := 0
	f := Compile(func(x *Tensor) *Tensor { runs++; return x.Exp().Sum() })
	x := FromSlice([]float32{1, 2, 3})
	for range 5 {
		nearValues(t, "replay", f(x), x.Exp().Sum())
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times; a replay should not run it", runs)
	}
	runs = 0
	g := Compile(func(x *Tensor) *Tensor { runs++; return breaking(x) })
	for range 3 {
		g(x)
	}
	if runs != 3 { // once per call: the first call traces and runs in one go
		t.Fatalf("fn with breaks ran %d times over 3 calls", runs)
	}
}

func TestCompileMarkDynamicAndDynamicOption(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		mark bool
	}{
		{"MarkDynamic", nil, true},
		{"Dynamic(true)", []Option{Dynamic(true)}, false},
	} {
		var st CompileStats
		f := Compile(func(x *Tensor) *Tensor { return x.SumKeepDim(1) }, append(tc.opts, WithStats(&st))...)
		x := Randn(1, Float32, 4, 3)
		if tc.mark {
			MarkDynamic(x, 0)
		}
		f(x)
		for _, b := range []int{5, 9, 2} {
			nearValues(t, tc.name, f(Randn(2, Float32, b, 3)), Randn(2, Float32, b, 3).SumKeepDim(1))
		}
		if st.Compiles.Load() != 1 {
			t.Errorf("%s: %d compiles, want 1", tc.name, st.Compiles.Load())
		}
	}
	var st CompileStats
	f := Compile(func(x *Tensor) *Tensor { return x.Neg() }, Dynamic(false), WithStats(&st))
	for _, b := range []int{2, 3, 4} {
		f(Zeros(Float32, b))
	}
	if st.Compiles.Load() != 3 {
		t.Errorf("Dynamic(false): %d compiles, want one per size", st.Compiles.Load())
	}
}

// Reading a dynamic size pins it: the graph may have used the number.
func TestCompileShapeReadSpecializes(t *testing.T) {
	var st CompileStats
	f := Compile(func(x *Tensor) *Tensor { return x.Reshape(x.Size(0)*2, -1) }, Dynamic(true), WithStats(&st))
	for _, b := range []int{4, 6, 4} {
		x := Randn(1, Float32, b, 8)
		nearValues(t, "reshape", f(x), x.Reshape(b*2, -1))
	}
	if st.Compiles.Load() != 2 {
		t.Errorf("%d compiles, want one per size read", st.Compiles.Load())
	}
}

func TestCondWithoutBreak(t *testing.T) {
	f := func(x *Tensor) *Tensor {
		return Cond(x.Sum().GtScalar(0),
			func(a ...*Tensor) *Tensor { return a[0].MulScalar(2) },
			func(a ...*Tensor) *Tensor { return a[0].Neg() }, x)
	}
	cf := Compile(f, FullGraph())
	for _, v := range [][]float32{{1, 2}, {-3, 1}} {
		x := FromSlice(v)
		nearValues(t, fmt.Sprint(v), cf(x), f(x))
	}
	ex, err := Explain(f, FromSlice([]float32{1, 2}))
	if err != nil || ex.Graphs != 1 || len(ex.Breaks) != 0 || ex.OpCounts["where"] != 1 {
		t.Fatalf("Cond: %v\n%v", err, ex)
	}
	err = Try(func() {
		Compile(func(x *Tensor) *Tensor {
			return Cond(x.Sum().GtScalar(0),
				func(a ...*Tensor) *Tensor { return a[0] },
				func(a ...*Tensor) *Tensor { return a[0].Sum() }, x)
		})(FromSlice([]float32{1}))
	})
	if err == nil || !strings.Contains(err.Error(), "same shape") {
		t.Fatalf("mismatched branches: %v", err)
	}
}

// captureLogs turns on the GOCOMPILE_LOGS categories for the test and
// returns what gocompile logs until it ends, in slog's text format.
func captureLogs(t *testing.T, categories string) *strings.Builder {
	t.Helper()
	buf := &strings.Builder{}
	SetLogger(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { SetLogger(nil) })
	t.Setenv("GOCOMPILE_LOGS", categories)
	return buf
}

func TestCompileLogsAndDebugDir(t *testing.T) {
	buf := captureLogs(t, "graph,guards,recompiles,breaks")
	dir := t.TempDir()
	t.Setenv("GOCOMPILE_DEBUG_DIR", dir)
	f := Compile(breaking)
	f(FromSlice([]float32{1, 2}))
	g := Compile(func(x *Tensor) *Tensor { return x.Exp() })
	g(Zeros(Float32, 2))
	g(Zeros(Float32, 3))
	out := buf.String()
	for _, want := range []string{"gocompile: graph", "x0.Exp()", "gocompile: guards", "gocompile: recompiling",
		"tensor 0 dim 0", "gocompile: graph break", "Item"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.graph.txt"))
	dots, _ := filepath.Glob(filepath.Join(dir, "*.dot"))
	if len(files) < 2 || len(dots) != len(files) {
		t.Fatalf("debug dir holds %v and %v", files, dots)
	}
}

// Closure-captured tensors are bound by reference: an in-place update of a
// weight is seen by the next call of the compiled function, through direct
// uses and views. (Ops on captured tensors alone, with no traced operand,
// run once while tracing, as in JAX: their results are constants.)
func TestCompileConstantsByReference(t *testing.T) {
	w := FromSlice([]float32{1, 2})
	f := Compile(func(x *Tensor) *Tensor { return x.Mul(w).Add(w.Unsqueeze(0).Squeeze(0)) })
	x := FromSlice([]float32{1, 1})
	sameValues(t, "before", f(x), FromSlice([]float32{2, 4}))
	w.Fill(10)
	sameValues(t, "after", f(x), FromSlice([]float32{20, 20}))
}

// A backend registered by the user receives the optimised graph.
func TestCustomBackend(t *testing.T) {
	var seen []string
	RegisterBackend("recording", BackendFunc(func(g *ir.Graph) (Program, error) {
		for _, n := range g.Nodes {
			if n.Kind == ir.CallNode {
				seen = append(seen, n.Op.Name)
			}
		}
		return newEagerProgram(g), nil
	}))
	f := Compile(func(x *Tensor) *Tensor { return x.MulScalar(1).Softmax(0) }, WithBackend("recording"))
	x := FromSlice([]float32{1, 2, 3})
	sameValues(t, "custom backend", f(x), x.Softmax(0))
	// x*1 is simplified away; softmax arrives decomposed into primitives.
	if strings.Join(seen, " ") != "amax sub exp sum div" {
		t.Fatalf("backend saw %v", seen)
	}
	if err := Try(func() { Compile(func(x *Tensor) *Tensor { return x }, WithBackend("nope")) }); err == nil {
		t.Fatal("an unknown backend was accepted")
	}
}

func TestCompileDynamicScalars(t *testing.T) {
	var st CompileStats
	f := func(x *Tensor, s float64, lo float32) *Tensor {
		return x.MulScalar(s).AddScalar(s).Clamp(float64(lo), 100).LayerNorm([]int{3}, nil, nil, s*0+1e-5)
	}
	cf := Compile(f, DynamicScalars(1, 2), WithStats(&st))
	x := Randn(1, Float32, 4, 3)
	for _, v := range []struct {
		s  float64
		lo float32
	}{{0.5, -1.5}, {0.25, -0.5}, {3.5, 0.25}, {-2.75, -3.5}} {
		fusedValues(t, fmt.Sprint(v), cf(x, v.s, v.lo), f(x, v.s, v.lo)) // LayerNorm: see fusedValues
	}
	if st.Compiles.Load() != 1 {
		t.Fatalf("new scalar values recompiled: %d compiles", st.Compiles.Load())
	}
	// Integral values promote differently: one more compile, then shared.
	for _, s := range []float64{2, 3, -4} {
		fusedValues(t, fmt.Sprint(s), cf(x, s, -1.5), f(x, s, -1.5))
	}
	if st.Compiles.Load() != 2 {
		t.Fatalf("integral scalars: %d compiles, want 2", st.Compiles.Load())
	}

	// A number computed from the scalar cannot be a slot: it is guarded by
	// value, and every value still gives the right answer.
	var st2 CompileStats
	g := func(x *Tensor, s float64) *Tensor { return x.MulScalar(s * 2) }
	cg := Compile(g, DynamicScalars(1), WithStats(&st2))
	for _, s := range []float64{0.5, 0.75} {
		sameValues(t, fmt.Sprint(s), cg(x, s), g(x, s))
	}
	if st2.Compiles.Load() != 2 {
		t.Fatalf("a computed scalar: %d compiles, want one per value", st2.Compiles.Load())
	}
}

func TestCompileGraphShowsSymbols(t *testing.T) {
	buf := captureLogs(t, "graph")
	f := Compile(func(x, w *Tensor) *Tensor { return x.MatMul(w).Softmax(-1) }, Dynamic(true))
	f(Zeros(Float32, 4, 16), Zeros(Float32, 16, 8))
	if out := buf.String(); !strings.Contains(out, "x0 float32[s0, s1]") || !strings.Contains(out, "float32[s0, s2]") {
		t.Fatalf("graph log lacks symbolic shapes:\n%s", out)
	}
}

func TestCompileReshapeOfTranspose(t *testing.T) {
	f := func(x *Tensor) *Tensor { return x.Transpose(0, 1).Reshape(-1) }
	x := Arange(0, 6, 1, Float32).Reshape(2, 3)
	nearValues(t, "reshape of transpose", Compile(f)(x), f(x))
	var contiguous bool
	Compile(func(x *Tensor) *Tensor { contiguous = x.T().IsContiguous(); return x })(x)
	if contiguous {
		t.Fatal("a traced transpose claims to be contiguous")
	}
}

func TestCompileBreakFirstCallRunsOnce(t *testing.T) {
	runs := 0
	f := Compile(func(x *Tensor) *Tensor { runs++; return breaking(x) })
	x := FromSlice([]float32{1, 2})
	nearValues(t, "first call", f(x), breaking(x))
	if runs != 1 {
		t.Fatalf("the first call ran fn %d times", runs)
	}
	ex, err := Explain(breaking, x)
	if err != nil || len(ex.Graph) != 2 || ex.OpCounts["neg"]+ex.OpCounts["mul"] != 1 {
		t.Fatalf("explain should cover both segments: %v\n%v", err, ex)
	}
}

// A break after a composite op: the optimiser rewrites the segment's
// outputs, and later segments still find the values they need.
func TestCompileBreakAfterComposite(t *testing.T) {
	w, b := Randn(1, Float32, 6, 4), Randn(2, Float32, 6)
	fn := func(x *Tensor) *Tensor {
		h := x.Linear(w, b)
		_ = h.Select(0, 0).String() // a break
		return h.GELU().Softmax(-1)
	}
	x := Randn(3, Float32, 3, 4)
	f := Compile(fn)
	for range 2 {
		nearValues(t, "after a break", f(x), fn(x))
	}
}

// The inductor backend fuses pointwise chains and row reductions into one
// kernel each and gives the eager results within a few ulps.
func TestInductorBackendMatchesEager(t *testing.T) {
	g := NewGenerator(5)
	x := g.Randn(Float32, 3, 1023)
	y := g.Randn(Float32, 1023)
	fns := map[string]func(x, y *Tensor) *Tensor{
		"chain":     func(x, _ *Tensor) *Tensor { return x.MulScalar(1.5).AddScalar(0.5).GELU().Mul(x.Sigmoid()) },
		"broadcast": func(x, y *Tensor) *Tensor { return x.Add(y).GELU() },
		"softmax":   func(x, _ *Tensor) *Tensor { return x.Softmax(-1) },
		"layernorm": func(x, y *Tensor) *Tensor { return x.LayerNorm([]int{1023}, y, y, 1e-5).ReLU() },
		"mixed types": func(x, y *Tensor) *Tensor {
			return Where(x.Gt(y), x.To(Float64).MulScalar(2), y.To(Int64).To(Float64)).Add(x.GtScalar(0).To(Float64))
		},
		"half stays exact": func(x, _ *Tensor) *Tensor { return x.To(Float16).MulScalar(3).AddScalar(1).Exp() },
		"int32 wraps":      func(x, _ *Tensor) *Tensor { return x.MulScalar(1e9).To(Int32).MulScalar(3).AddScalar(7) },
		"views between":    func(x, _ *Tensor) *Tensor { return x.Exp().T().AddScalar(1).Reshape(-1).Neg() },
	}
	for name, f := range fns {
		t.Run(name, func(t *testing.T) {
			got, want := Compile(f, WithBackend("inductor"))(x, y), f(x, y)
			// Fused kernels round differently from eager ones in two places:
			// on a GPU NVRTC contracts a*b+c into one rounding (FMA), and on
			// the CPU fused float32 code evaluates transcendentals with
			// ir.FastMath's approximations (within a few ulps). Allow a few
			// ulps of the values' scale.
			closeValues(t, name, got, want, 1e-6)
		})
	}
}

// nearValues checks a compiled result against the eager one: the default
// backend's fused kernels may round differently (FMA contraction on GPUs,
// ir.FastMath's float32 transcendentals on the CPU, reductions in another
// order), and models carry those differences through matmuls, so values
// agree to 1e-4 relative to |want|+1 in float32 (1e-12 in float64, about
// two ulps in 16-bit types); integers and bools exactly.
func nearValues(t *testing.T, what string, got, want *Tensor) {
	t.Helper()
	rtol := map[DType]float64{Float32: 1e-4, Float64: 1e-12, Float16: 2e-3, BFloat16: 1.6e-2}[want.DType()]
	closeValues(t, what, got, want, rtol)
}

// closeValues is sameValues with a tolerance of rtol·(|want|+1).
func closeValues(t *testing.T, what string, got, want *Tensor, rtol float64) {
	t.Helper()
	if got.DType() != want.DType() || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Fatalf("%s: %v%v, want %v%v", what, got.DType(), got.Shape(), want.DType(), want.Shape())
	}
	g, w := got.Float64s(), want.Float64s()
	for i := range w {
		if g[i] != w[i] && !(math.IsNaN(g[i]) && math.IsNaN(w[i])) && math.Abs(g[i]-w[i]) > rtol*(math.Abs(w[i])+1) {
			t.Fatalf("%s: element %d is %v compiled, %v eager", what, i, g[i], w[i])
		}
	}
}

func BenchmarkPointwiseChain16M(b *testing.B) {
	x := Randn(1, Float32, 1<<24)
	chain := func(x *Tensor) *Tensor { return x.MulScalar(1.5).AddScalar(0.5).GELU().Mul(x.Sigmoid()) }
	for _, c := range []struct {
		name string
		f    func(*Tensor) *Tensor
	}{
		{"eager", chain},
		{"compiled", Compile(chain, WithBackend("inductor"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.f(x)
			b.SetBytes(2 * 4 << 24)
			b.ResetTimer()
			for range b.N {
				c.f(x)
			}
		})
	}
}

// A misuse inside fn while it is traced is the same *Error eager code
// gives; the function keeps working for good inputs.
func TestCompileErrorWhileTracing(t *testing.T) {
	f := Compile(func(x, y *Tensor) *Tensor { return x.Add(y).Exp() })
	err := Try(func() { f(Zeros(Float32, 2, 3), Zeros(Float32, 4)) })
	var e *Error
	if !errors.As(err, &e) || e.Op != "Add" || !strings.Contains(err.Error(), "[2, 3] and [4]") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("the error carries a stack trace: %v", err)
	}
	x := FromSlice([]float32{1, 2, 3})
	nearValues(t, "after an error", f(x, x), x.Add(x).Exp())
}

// Compiled code keeps the sign of zero as eager code does: -0 + 0 is +0,
// so the graph passes must not drop the add.
func TestCompileKeepsSignedZero(t *testing.T) {
	f := func(x *Tensor) *Tensor { return x.AddScalar(0) }
	x := FromSlice([]float32{float32(math.Copysign(0, -1)), 1})
	got, want := Compile(f)(x).Float32s(), f(x).Float32s()
	if math.Signbit(float64(got[0])) != math.Signbit(float64(want[0])) || math.Signbit(float64(want[0])) {
		t.Fatalf("-0 + 0: compiled %v, eager %v; want +0 from both", got[0], want[0])
	}
}

// A compiled function that returns an argument or a constant it captured
// returns that tensor itself, as the function does eagerly.
func TestCompileReturnsInputsThemselves(t *testing.T) {
	w := FromSlice([]float32{1, 2})
	f := func(x *Tensor) (*Tensor, *Tensor, *Tensor) { return x, w, x.Add(w) }
	for _, backend := range []string{"inductor", "eager"} {
		compiled := Compile(f, WithBackend(backend))
		for call := range 2 {
			x := MarkDynamic(FromSlice([]float32{3, 4}), 0)
			gx, gw, sum := compiled(x)
			if gx != x || gw != w {
				t.Errorf("%s, call %d: got %p, %p, want x %p and w %p themselves", backend, call, gx, gw, x, w)
			}
			if got := sum.Float32s(); got[0] != 4 || got[1] != 6 {
				t.Errorf("%s: x+w = %v", backend, got)
			}
		}
	}
}

// Copying a value computed inside a compiled function into a tensor
// outside it is a graph break, not a crash.
func TestCompileCopyOfTracedValue(t *testing.T) {
	buf := Zeros(Float32, 2)
	f := Compile(func(x *Tensor) *Tensor { buf.Copy(x.MulScalar(2)); return x })
	f(FromSlice([]float32{1, 2}))
	if got := buf.Float32s(); got[0] != 2 || got[1] != 4 {
		t.Fatalf("buf = %v, want [2 4]", got)
	}
}
