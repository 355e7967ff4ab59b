package tensor

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gocompile/internal/stats"
	"gocompile/ir"
)

// TestRandomGraphsInductor builds random graphs of pointwise, reduction,
// composite and view ops (with a few casts, concatenations and captured
// constants) over inputs of every layout (contiguous, permuted, T() of a
// contiguous tensor, strided, expanded, offset), with reductions over any
// dim set (dim 0, middle dims, several dims, the last; of permuted views
// too), runs each eagerly and compiled with the inductor backend, and
// compares every output: the same dtype and shape, and values within
//
//	|compiled - eager| <= rtol(dtype)·|eager| + bound
//
// where rtol is 1e-12 for float64, 1e-5 for float32, 1e-2 for float16,
// 2e-2 for bfloat16 and 0 for integers and bools, and bound is how far a
// correct compiled program may drift from the eager one: each op that
// rounds adds rtol times its result's largest magnitude (sums and means
// rtol times the largest sum of the magnitudes they reduce, so that a sum
// that cancels is held to what its terms allow; var, layer norm and RMS
// norm their rows' rounding likewise), and later ops carry the bounds of
// their operands by their derivatives (a sum over n elements n times its
// operand's bound, an exp its result's magnitude times its operand's
// bound, a layer norm its operand's bound over the smallest row
// deviation). Values that only select, move or convert elements (inputs,
// views, neg, abs, relu, maximum, where, clamp, amax, argmax, casts …) of
// such values must match exactly, as must integers and bools. NaN must
// match NaN. On the CPU fused float32 code evaluates transcendentals with
// ir.FastMath (within a few ulps of eager's); on a GPU
// (GOCOMPILE_DEVICE=cuda) NVRTC contracts a*b+c inside fused kernels and
// row kernels reduce in their own order: the bounds allow both, and the
// test logs how many outputs were not bit-identical.
//
// Each compiled function is called a second time with fresh inputs of the
// same shapes and dtypes, with other strides and offsets of the same
// contiguity where the graph allows (an input that was one tensor passed
// twice in the first call becomes two): that call must hit the guards (no
// recompile) and match eager again, and the first call's results must not
// change. Neither call may change its inputs or log a warning (the backend
// falls back to eager code with a warning when it cannot compile a graph).
//
// Everything derives from one seed. A failure prints the seed and the
// graph as Go code, with the command that reruns it alone:
// RANDOM_GRAPH_SEED=<seed> go test ./tensor -run 'TestRandomGraphsInductor/g0042$'.
// RANDOM_GRAPH_COUNT sets the number of graphs (300; 60 with -short), and
// RANDOM_GRAPH_VERBOSE=1 logs every graph.
func TestRandomGraphsInductor(t *testing.T) {
	seed := uint64(0x5eed_2026)
	if s := os.Getenv("RANDOM_GRAPH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("RANDOM_GRAPH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	count := 300
	if testing.Short() {
		count = 60
	}
	if s := os.Getenv("RANDOM_GRAPH_COUNT"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("RANDOM_GRAPH_COUNT=%q: %v", s, err)
		}
		count = v
	}

	// The backend falls back to eager execution, with a warning, when it
	// cannot compile a graph; a graph pass that fails warns too. Either
	// would hide a bug behind correct results, so warnings fail the graph.
	// (No other test runs meanwhile: this one is not parallel.)
	warns := &rgWarnings{}
	old := slog.Default()
	slog.SetDefault(slog.New(warns))
	defer slog.SetDefault(old)

	st := &rgStats{}
	start := time.Now()
	for i := range count {
		t.Run(fmt.Sprintf("g%04d", i), func(t *testing.T) {
			rgRunGraph(t, seed, i, warns, st)
		})
	}
	t.Logf("seed %#x: %d graphs (%d ops, %d outputs compared over 2 calls each) in %v; "+
		"%d outputs not bit-identical to eager (largest difference %.3g of its tolerance); "+
		"%d permuted and %d transposed inputs, %d reductions over dims other than the last, %d of permuted views",
		seed, count, st.ops, st.outputs, time.Since(start).Round(time.Millisecond), st.inexact, st.worst,
		st.permutedIn, st.transposedIn, st.outerReductions, st.permutedReductions)
	if count >= 60 && (st.permutedIn == 0 || st.transposedIn == 0 || st.outerReductions == 0 || st.permutedReductions == 0) {
		t.Errorf("the generator made none of some layouts or reductions it should (see the counts above)")
	}
}

// rgStats are totals over the graphs, logged at the end.
type rgStats struct {
	ops, outputs, inexact int
	worst                 float64 // largest |compiled - eager| / tolerance
	failures              int
	// Coverage of the layouts and reductions kernels specialise on:
	// permuted and transposed inputs, reductions that leave the last dim
	// (outer, middle, several dims) and reductions of permuted views.
	permutedIn, transposedIn, outerReductions, permutedReductions int
}

// rgWarnings records the warnings logged while the test runs.
type rgWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *rgWarnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *rgWarnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *rgWarnings) WithGroup(string) slog.Handler                { return w }
func (w *rgWarnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	w.msgs = append(w.msgs, b.String())
	w.mu.Unlock()
	return nil
}

func (w *rgWarnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// Limits of the generated graphs.
const (
	rgMaxNumel = 1 << 16 // elements of any value
	rgMaxRank  = 5
)

var rgSizes = []int{1, 2, 3, 5, 7, 16, 33}

// rgRtol is the relative tolerance for values of dtype dt.
func rgRtol(dt DType) float64 {
	switch dt {
	case Float64:
		return 1e-12
	case Float32:
		return 1e-5
	case Float16:
		return 1e-2
	case BFloat16:
		return 2e-2
	}
	return 0 // integers and bools: exact
}

// rgLimit is the largest magnitude a generated value may reach (checked on
// the first inputs): far enough from overflow that fresh inputs from the
// same distribution stay finite.
func rgLimit(dt DType) float64 {
	switch dt {
	case Float16:
		return 2e3
	case BFloat16:
		return 1e4
	case Int64:
		return 1e6
	}
	return 1e5
}

// rgErrFunc bounds the absolute difference a correct compiled program may
// show in a step's result beyond the step's own rounding, from the
// operands a (eager values), the operands' bounds e, and the magnitudes m
// of the operands and, last, of the result.
type rgErrFunc func(a []*Tensor, e, m []float64) float64

// rgStep is one op (or a small group of them) of a random graph.
type rgStep struct {
	args  []int
	text  string // a Go expression over $0, $1 …, the operands
	fn    func(a []*Tensor) *Tensor
	exact bool // the op only selects, moves or converts elements exactly
	err   rgErrFunc
	// nanOK: the op may make NaN from finite operands (Var with one
	// element and correction 1), the same in eager and compiled code.
	nanOK bool
	view  bool // a View, valid for the first inputs' layouts
	// A reduction's kind, counted in rgStats: outer (its dims leave the
	// last dim), of a permuted view.
	outer, permuted bool
}

// Input layouts.
const (
	rgContiguous = iota
	rgPermuted   // a permuted view of a contiguous tensor
	rgStrided    // every other element along a dim, at an offset
	rgExpanded   // a size-1 dim expanded (stride 0)
	rgOffset     // contiguous, at an offset into its storage
	rgTransposed // T() of a contiguous tensor: the last two dims swapped
)

// Input value distributions.
const (
	rgNormal   = iota // normal, scaled by 0.5, 1 or 2
	rgUniform         // uniform in [-3, 3)
	rgCoarse          // multiples of 0.5 in [-2, 2]: ties, exact zeros
	rgPositive        // uniform in [0.1, 3)
)

type rgInput struct {
	dtype  DType
	shape  []int
	layout int
	perm   []int // rgPermuted: the storage's dim i is dim perm[i]
	dim    int   // rgStrided, rgExpanded
	dist   int
	scale  float64
	// alias: in the first call, the input is the same tensor as the one
	// before it (whose spec it copies); fresh tensors in the second.
	alias bool
}

func (in rgInput) String() string {
	s := fmt.Sprintf("%v%v", in.dtype, in.shape)
	switch in.layout {
	case rgPermuted:
		s += fmt.Sprintf(" permuted (storage dims %v)", in.perm)
	case rgStrided:
		s += fmt.Sprintf(" strided (every other element of dim %d, offset)", in.dim)
	case rgExpanded:
		s += fmt.Sprintf(" expanded along dim %d", in.dim)
	case rgOffset:
		s += " at an offset"
	case rgTransposed:
		s += " transposed (T() of a contiguous tensor)"
	}
	if in.dtype == Int64 {
		s += " integers in [-5, 5]"
	} else {
		s += " " + [...]string{"normal", "uniform", "coarse", "positive"}[in.dist]
	}
	if in.alias {
		s += "; in the first call the same tensor as the input before"
	}
	return s
}

// make builds the input with values from r, on the default device.
func (in rgInput) make(r *rand.Rand) *Tensor {
	store := slices.Clone(in.shape)
	switch in.layout {
	case rgPermuted:
		for i, p := range in.perm {
			store[i] = in.shape[p]
		}
	case rgStrided:
		store[in.dim] = 2*in.shape[in.dim] + 1
	case rgExpanded:
		store[in.dim] = 1
	case rgOffset:
		store = append([]int{2}, store...)
	case rgTransposed:
		r := len(store)
		store[r-2], store[r-1] = store[r-1], store[r-2]
	}
	n := 1
	for _, s := range store {
		n *= s
	}
	var t *Tensor
	if in.dtype == Int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(r.IntN(11)) - 5
		}
		t = FromSlice(v, n).Reshape(store...) // FromSlice reads no sizes as 1-D
	} else {
		v := make([]float64, n)
		for i := range v {
			switch in.dist {
			case rgNormal:
				v[i] = r.NormFloat64() * in.scale
			case rgUniform:
				v[i] = 6*r.Float64() - 3
			case rgCoarse:
				v[i] = float64(r.IntN(9))/2 - 2
			case rgPositive:
				v[i] = 0.1 + 2.9*r.Float64()
			}
		}
		t = FromSlice(v, n).Reshape(store...).To(in.dtype)
	}
	switch in.layout {
	case rgPermuted:
		inv := make([]int, len(in.perm))
		for i, p := range in.perm {
			inv[p] = i
		}
		t = t.Permute(inv...)
	case rgStrided:
		t = t.Slice(in.dim, 1, store[in.dim], 2)
	case rgExpanded:
		t = t.Expand(in.shape...)
	case rgOffset:
		t = t.Select(0, 1)
	case rgTransposed:
		t = t.T()
	}
	return t
}

// relayout is the input with another layout of the same kind, contiguous
// or not, chosen with r: the guards check contiguity, not strides or
// offsets, so the compiled program must serve either. (The caller checks
// that the new input is as contiguous as the old.)
func (in rgInput) relayout(r *rand.Rand) rgInput {
	out := in
	if in.layout == rgContiguous || in.layout == rgOffset {
		out.layout = []int{rgContiguous, rgOffset}[r.IntN(2)]
		return out
	}
	out.layout = []int{rgPermuted, rgStrided, rgExpanded, rgTransposed}[r.IntN(4)]
	switch out.layout {
	case rgTransposed:
		if len(in.shape) < 2 {
			return in
		}
	case rgPermuted:
		if len(in.shape) < 2 {
			return in
		}
		out.perm = r.Perm(len(in.shape))
	case rgStrided:
		out.dim = r.IntN(len(in.shape))
	case rgExpanded:
		out.dim = -1
		for _, d := range r.Perm(len(in.shape)) {
			if in.shape[d] > 1 {
				out.dim = d
				break
			}
		}
		if out.dim < 0 {
			return in
		}
	}
	return out
}

// rgGraph is a random graph: inputs, steps, outputs. Value k is input k
// for k < len(inputs), else the result of step k-len(inputs).
type rgGraph struct {
	index   int
	seed    uint64
	inputs  []rgInput
	steps   []rgStep
	exact   []bool // per value: computed without rounding
	outputs []int
	hasView bool      // a step calls View, which needs the inputs' layouts
	consts  []rgInput // tensors the steps capture, c0, c1 …
}

func rgName(k int) string { return "v" + strconv.Itoa(k) }

func (s *rgStep) expr() string {
	e := s.text
	for j := len(s.args) - 1; j >= 0; j-- { // $10 before $1
		e = strings.ReplaceAll(e, "$"+strconv.Itoa(j), rgName(s.args[j]))
	}
	return e
}

// String prints the graph as a Go function that reproduces it.
func (g *rgGraph) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "random graph %d of seed %#x (RANDOM_GRAPH_SEED=%#x go test ./tensor -run 'TestRandomGraphsInductor/g%04d$')\n",
		g.index, g.seed, g.seed, g.index)
	for k, in := range g.inputs {
		fmt.Fprintf(&b, "  // %s: %v\n", rgName(k), in)
	}
	for k, c := range g.consts {
		fmt.Fprintf(&b, "  // c%d: a captured constant, %v\n", k, c)
	}
	params := make([]string, len(g.inputs))
	for k := range params {
		params[k] = rgName(k)
	}
	fmt.Fprintf(&b, "  fn := func(%s *Tensor) []*Tensor {\n", strings.Join(params, ", "))
	for i := range g.steps {
		fmt.Fprintf(&b, "  \t%s := %s\n", rgName(len(g.inputs)+i), g.steps[i].expr())
	}
	outs := make([]string, len(g.outputs))
	for i, o := range g.outputs {
		outs[i] = rgName(o)
	}
	fmt.Fprintf(&b, "  \treturn []*Tensor{%s}\n  }\n", strings.Join(outs, ", "))
	return b.String()
}

// eval runs the steps on xs and returns every value.
func (g *rgGraph) eval(xs []*Tensor) []*Tensor {
	vals := append(make([]*Tensor, 0, len(xs)+len(g.steps)), xs...)
	for i := range g.steps {
		s := &g.steps[i]
		a := make([]*Tensor, len(s.args))
		for j, k := range s.args {
			a[j] = vals[k]
		}
		vals = append(vals, s.fn(a))
	}
	return vals
}

// run is the function that is compiled: it reads no values, so it traces
// into one graph.
func (g *rgGraph) run(xs []*Tensor) []*Tensor {
	vals := g.eval(xs)
	out := make([]*Tensor, len(g.outputs))
	for i, o := range g.outputs {
		out[i] = vals[o]
	}
	return out
}

// reference runs the graph eagerly and returns its outputs with their
// error bounds.
func (g *rgGraph) reference(xs []*Tensor) ([]*Tensor, []float64) {
	vals := g.eval(xs)
	mags := make([]float64, len(vals))
	errs := make([]float64, len(vals))
	for k, v := range vals {
		mags[k] = rgMaxAbs(v)
	}
	for i := range g.steps {
		s := &g.steps[i]
		k := len(xs) + i
		if g.exact[k] {
			continue
		}
		a := make([]*Tensor, len(s.args))
		e := make([]float64, len(s.args))
		m := make([]float64, len(s.args)+1)
		for j, arg := range s.args {
			a[j], e[j], m[j] = vals[arg], errs[arg], mags[arg]
		}
		m[len(a)] = mags[k]
		errs[k] = rgRtol(vals[k].DType())*mags[k] + s.err(a, e, m)
	}
	outs := make([]*Tensor, len(g.outputs))
	bounds := make([]float64, len(g.outputs))
	for i, o := range g.outputs {
		outs[i], bounds[i] = vals[o], errs[o]
	}
	return outs, bounds
}

// rgMaxAbs is the largest magnitude in t, ignoring NaNs.
func rgMaxAbs(t *Tensor) float64 {
	m := 0.0
	for _, v := range t.Float64s() {
		if a := math.Abs(v); a > m {
			m = a
		}
	}
	return m
}

func rgHasNaN(t *Tensor) bool {
	if !t.DType().IsFloat() {
		return false
	}
	return slices.ContainsFunc(t.Float64s(), math.IsNaN)
}

func rgNumel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

func rgB2I(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rgBroadcast is the broadcast shape of the given shapes, if they
// broadcast.
func rgBroadcast(shapes ...[]int) ([]int, bool) {
	out, err := ir.Broadcast("graph generator", shapes...)
	return out, err == nil
}

// rgCall runs f, turning a panic into an error with its stack.
func rgCall(f func() []*Tensor) (out []*Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := strings.Split(string(debug.Stack()), "\n")
			if len(stack) > 40 {
				stack = append(stack[:40], "\t…")
			}
			err = fmt.Errorf("panic: %v\n%s", r, strings.Join(stack, "\n"))
		}
	}()
	return f(), nil
}

// rgCompare checks a compiled output against the eager one. It returns
// the largest ratio of a difference to its tolerance, whether the values
// are bit-identical, and an error past the tolerance.
func rgCompare(got, want *Tensor, bound float64) (float64, bool, error) {
	if got.DType() != want.DType() || !slices.Equal(got.Shape(), want.Shape()) {
		return 0, false, fmt.Errorf("compiled gives %v%v, eager %v%v", got.DType(), got.Shape(), want.DType(), want.Shape())
	}
	if got.DType() == Int64 || got.DType() == Int32 {
		g, w := got.Int64s(), want.Int64s()
		for i := range w {
			if g[i] != w[i] {
				return math.Inf(1), false, fmt.Errorf("element %d %v: compiled %d, eager %d (integers must match exactly)",
					i, rgIndex(want.Shape(), i), g[i], w[i])
			}
		}
		return 0, true, nil
	}
	g, w := got.Float64s(), want.Float64s()
	rtol := rgRtol(want.DType())
	worst, same := 0.0, true
	for i := range w {
		if g[i] == w[i] || math.IsNaN(g[i]) && math.IsNaN(w[i]) {
			continue
		}
		same = false
		diff := math.Abs(g[i] - w[i])
		tol := rtol*math.Abs(w[i]) + bound
		if !(diff <= tol) { // NaN differences fail too
			return math.Inf(1), false, fmt.Errorf("element %d %v: compiled %v, eager %v: |difference| %.4g > tolerance %.4g (rtol %g, error bound %.4g)",
				i, rgIndex(want.Shape(), i), g[i], w[i], diff, tol, rtol, bound)
		}
		if tol > 0 {
			worst = max(worst, diff/tol)
		}
	}
	return worst, same, nil
}

// rgSameBits reports whether a and b hold the same values (NaN equal to
// NaN).
func rgSameBits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) })
}

// rgIndex is the multi-index of row-major element i of shape.
func rgIndex(shape []int, i int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

func rgRunGraph(t *testing.T, seed uint64, index int, warns *rgWarnings, st *rgStats) {
	r := rand.New(rand.NewPCG(seed, uint64(index)))
	gen := newRGGen(r, seed, index)
	xs := gen.vals[:len(gen.g.inputs)]
	if err := gen.generate(); err != nil {
		st.failures++
		t.Fatalf("%v\nwhile generating (eager code failed on a valid op):\n%v", err, gen.g)
	}
	g := gen.g
	st.ops += len(g.steps)
	for _, in := range g.inputs {
		st.permutedIn += rgB2I(in.layout == rgPermuted)
		st.transposedIn += rgB2I(in.layout == rgTransposed)
	}
	for _, s := range g.steps {
		st.outerReductions += rgB2I(s.outer)
		st.permutedReductions += rgB2I(s.permuted)
	}
	if os.Getenv("RANDOM_GRAPH_VERBOSE") != "" {
		t.Logf("%v", g)
	}
	layouts := make([]string, len(xs))
	for k, x := range xs {
		layouts[k] = fmt.Sprintf("%v strides %v offset %d", x.Shape(), x.Strides(), x.Offset())
	}
	fail := func(format string, args ...any) {
		t.Helper()
		st.failures++
		desc := g.String() + "  inputs of this call: " + strings.Join(layouts, "; ") + "\n"
		if st.failures > 10 {
			desc = fmt.Sprintf("random graph %d of seed %#x (description left out after 10 failures)\n", g.index, g.seed)
		}
		t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), desc)
	}

	var cs CompileStats
	compiled := Compile(g.run, WithBackend("inductor"), FullGraph(), WithStats(&cs))
	fresh := rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, uint64(index)))
	var firstOut []*Tensor
	var firstVals [][]float64
	for call := 1; call <= 2; call++ {
		if call == 2 {
			// Fresh values, and other strides and offsets where the
			// graph allows (View needs the layout it was made for).
			first := xs
			xs = make([]*Tensor, len(g.inputs))
			for k, in := range g.inputs {
				if !g.hasView {
					in = in.relayout(fresh)
				}
				xs[k] = in.make(fresh)
				if xs[k].IsContiguous() != first[k].IsContiguous() {
					xs[k] = g.inputs[k].make(fresh)
				}
				layouts[k] = fmt.Sprintf("%v strides %v offset %d", xs[k].Shape(), xs[k].Strides(), xs[k].Offset())
			}
		}
		before := make([][]float64, len(xs))
		for k, x := range xs {
			before[k] = x.Float64s()
		}
		var bounds []float64
		want, err := rgCall(func() []*Tensor {
			w, b := g.reference(xs)
			bounds = b
			return w
		})
		if err != nil {
			fail("call %d: eager code failed: %v", call, err)
		}
		got, err := rgCall(func() []*Tensor { return compiled(xs) })
		if err != nil {
			fail("call %d: the compiled function failed: %v", call, err)
		}
		if w := warns.take(); len(w) > 0 {
			fail("call %d: warnings while compiling or running:\n  %s", call, strings.Join(w, "\n  "))
		}
		if len(got) != len(want) {
			fail("call %d: %d outputs compiled, %d eager", call, len(got), len(want))
		}
		for i := range want {
			ratio, same, err := rgCompare(got[i], want[i], bounds[i])
			if err != nil {
				fail("call %d: output %d (%s): %v", call, i, rgName(g.outputs[i]), err)
			}
			st.outputs++
			st.worst = max(st.worst, ratio)
			if !same {
				st.inexact++
			}
		}
		for k, x := range xs {
			if !rgSameBits(before[k], x.Float64s()) {
				fail("call %d: the compiled function changed input %s", call, rgName(k))
			}
		}
		if call == 1 {
			firstOut = got
			for _, o := range got {
				firstVals = append(firstVals, o.Float64s())
			}
		}
	}
	// A later call must not reuse the memory of results handed out before.
	for i, o := range firstOut {
		if !rgSameBits(firstVals[i], o.Float64s()) {
			fail("output %d (%s) of the first call changed during the second", i, rgName(g.outputs[i]))
		}
	}
	if cs.Compiles.Load() != 1 || cs.Calls.Load() != 2 || cs.EagerCalls.Load() != 0 || cs.Breaks.Load() != 0 {
		fail("compile stats after 2 calls with the same shapes: %d calls, %d compiles, %d eager calls, %d breaks; want 2, 1, 0, 0",
			cs.Calls.Load(), cs.Compiles.Load(), cs.EagerCalls.Load(), cs.Breaks.Load())
	}
}

// rgGen generates a graph, evaluating each step eagerly on the first
// inputs to know its shape, dtype and magnitude.
type rgGen struct {
	r    *rand.Rand
	g    *rgGraph
	vals []*Tensor
	uses []int
	// kinds[i] is the generator that made step i; force, when >= 0, is
	// the operand the next pick returns if it qualifies (a twin step).
	kinds []int
	force int
}

func newRGGen(r *rand.Rand, seed uint64, index int) *rgGen {
	gen := &rgGen{r: r, g: &rgGraph{index: index, seed: seed}, force: -1}
	gen.inputs()
	for k, in := range gen.g.inputs {
		if in.alias {
			gen.vals = append(gen.vals, gen.vals[k-1])
			gen.g.exact = append(gen.g.exact, true)
			gen.uses = append(gen.uses, 0)
			continue
		}
		gen.vals = append(gen.vals, in.make(r))
		gen.g.exact = append(gen.g.exact, true)
		gen.uses = append(gen.uses, 0)
	}
	return gen
}

func (s *rgGen) chance(p float64) bool { return s.r.Float64() < p }

func (s *rgGen) oneOf(xs ...int) int { return xs[s.r.IntN(len(xs))] }

func (s *rgGen) oneOfF(xs ...float64) float64 { return xs[s.r.IntN(len(xs))] }

// inputs chooses the graph's dtype and inputs: a base shape, and inputs
// that broadcast with it.
func (s *rgGen) inputs() {
	dt := []DType{Float32, Float32, Float32, Float32, Float64, Float64, Float16, BFloat16, Int64}[s.r.IntN(9)]
	var base []int
	for {
		base = make([]int, 1+s.r.IntN(4))
		for i := range base {
			base[i] = rgSizes[s.r.IntN(len(rgSizes))]
		}
		if len(base) >= 2 && s.chance(0.3) { // square: sums over either dim agree in shape
			i, j := s.r.IntN(len(base)), s.r.IntN(len(base))
			base[i] = base[j]
		}
		if s.chance(0.25) { // one long dim
			base[s.r.IntN(len(base))] = s.oneOf(1023, 4097)
		}
		if rgNumel(base) <= rgMaxNumel && (rgNumel(base) > 1 || s.chance(0.1)) {
			break
		}
	}
	n := 1 + s.r.IntN(3)
	for k := range n {
		in := rgInput{dtype: dt, dist: s.r.IntN(4), scale: s.oneOfF(0.5, 1, 2)}
		if dt.IsFloat() && k > 0 && s.chance(0.1) { // mixed precision
			in.dtype = []DType{Float32, Float64, Float16, BFloat16}[s.r.IntN(4)]
		}
		switch {
		case k == 0:
			in.shape = slices.Clone(base)
		case s.chance(0.07): // a zero-dimensional tensor, which promotes like a scalar
			in.shape = []int{}
			if dt.IsFloat() {
				in.dtype = []DType{Float32, Float64, Float16, BFloat16}[s.r.IntN(4)]
			}
		case s.chance(0.2): // a vector of the last dim: a norm weight, a bias
			in.shape = []int{base[len(base)-1]}
		default:
			drop := 0
			if s.chance(0.25) {
				drop = s.r.IntN(len(base))
			}
			in.shape = slices.Clone(base[drop:])
			for i := range in.shape {
				if s.chance(0.25) {
					in.shape[i] = 1
				}
			}
		}
		switch p := s.r.Float64(); {
		case p < 0.18 && len(in.shape) >= 2:
			in.layout, in.perm = rgPermuted, s.r.Perm(len(in.shape))
		case p < 0.26 && len(in.shape) >= 2:
			in.layout = rgTransposed
		case p < 0.34 && len(in.shape) >= 1 && rgNumel(in.shape)*2 <= rgMaxNumel:
			in.layout, in.dim = rgStrided, s.r.IntN(len(in.shape))
		case p < 0.40:
			for _, d := range s.r.Perm(len(in.shape)) {
				if in.shape[d] > 1 {
					in.layout, in.dim = rgExpanded, d
					break
				}
			}
		case p < 0.48 && rgNumel(in.shape)*2 <= rgMaxNumel:
			in.layout = rgOffset
		}
		if k > 0 && s.chance(0.08) {
			in = s.g.inputs[k-1]
			in.alias = true
		}
		s.g.inputs = append(s.g.inputs, in)
	}
}

// The predicates generators choose operands by.
func (s *rgGen) numeric(k int) bool { return s.vals[k].DType() != Bool }
func (s *rgGen) float(k int) bool   { return s.vals[k].DType().IsFloat() }
func (s *rgGen) exactNumeric(k int) bool {
	return s.g.exact[k] && s.numeric(k)
}
func (s *rgGen) rank(k int) int    { return s.vals[k].Dim() }
func (s *rgGen) shape(k int) []int { return s.vals[k].Shape() }

// pick chooses a value that satisfies ok: the latest such value half the
// time (to make chains, which fuse), a value nothing uses yet a quarter of
// the time (to keep the graph connected), else any.
func (s *rgGen) pick(ok func(k int) bool) (int, bool) {
	if f := s.force; f >= 0 {
		s.force = -1
		if ok(f) {
			return f, true
		}
	}
	var c, unused []int
	for k := range s.vals {
		if ok(k) {
			c = append(c, k)
			if s.uses[k] == 0 {
				unused = append(unused, k)
			}
		}
	}
	switch p := s.r.Float64(); {
	case len(c) == 0:
		return 0, false
	case p < 0.5:
		return c[len(c)-1], true
	case p < 0.75 && len(unused) > 0:
		return unused[s.r.IntN(len(unused))], true
	}
	return c[s.r.IntN(len(c))], true
}

// pickWith chooses a value that satisfies ok and broadcasts with the
// given shapes to at most rgMaxNumel elements.
func (s *rgGen) pickWith(ok func(k int) bool, shapes ...[]int) (int, bool) {
	return s.pick(func(k int) bool {
		if !ok(k) {
			return false
		}
		b, fits := rgBroadcast(append(slices.Clone(shapes), s.shape(k))...)
		return fits && rgNumel(b) <= rgMaxNumel
	})
}

// dim is a random dim of a rank-r value, negative a third of the time.
func (s *rgGen) dim(r int) int {
	d := s.r.IntN(r)
	if s.chance(0.3) {
		d -= r
	}
	return d
}

// dims is a random non-empty set of dims of a rank-r value, in random
// order.
func (s *rgGen) dims(r int) []int {
	p := s.r.Perm(r)[:1+s.r.IntN(r)]
	for i := range p {
		if s.chance(0.3) {
			p[i] -= r
		}
	}
	return p
}

// rgOuter reports whether a reduction of a rank-r value over dims (every
// dim if none) keeps its last dim.
func rgOuter(dims []int, r int) bool {
	return len(dims) > 0 && !slices.Contains(dims, r-1) && !slices.Contains(dims, -1)
}

// reduceDims is the dim set of a reduction of a rank-r value: half the
// time one of the sets kernels treat apart (dim 0, the last dim, a middle
// dim, dims 0 and 2, all but the last, all but the first), else any
// non-empty set; negative a third of the time.
func (s *rgGen) reduceDims(r int) []int {
	if s.chance(0.5) {
		return s.dims(r)
	}
	var p []int
	switch k := s.r.IntN(6); {
	case k == 0 || r == 1:
		p = []int{0}
	case k == 1:
		p = []int{r - 1}
	case k == 2 && r >= 3:
		p = []int{1 + s.r.IntN(r-2)}
	case k == 3 && r >= 3:
		p = []int{0, 2}
	case k == 4:
		for d := range r - 1 {
			p = append(p, d)
		}
	default:
		for d := 1; d < r; d++ {
			p = append(p, d)
		}
	}
	for i := range p {
		if s.chance(0.3) {
			p[i] -= r
		}
	}
	return p
}

func rgInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func rgFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "math.Inf(1)"
	case math.IsInf(v, -1):
		return "math.Inf(-1)"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Error propagation helpers (see rgErrFunc).

// rgLip is for ops with Lipschitz constants k (per operand).
func rgLip(k ...float64) rgErrFunc {
	return func(_ []*Tensor, e, _ []float64) float64 {
		sum := 0.0
		for i, ki := range k {
			sum += ki * e[i]
		}
		return sum
	}
}

// rgSumErr adds the operands' bounds.
func rgSumErr(_ []*Tensor, e, _ []float64) float64 {
	sum := 0.0
	for _, v := range e {
		sum += v
	}
	return sum
}

func (s *rgGen) step(text string, fn func(a []*Tensor) *Tensor, exact bool, err rgErrFunc, args ...int) *rgStep {
	return &rgStep{args: args, text: text, fn: fn, exact: exact, err: err}
}

// rgUnaryOps are the unary pointwise ops: expression, function, Lipschitz
// constant (0: computed by err), whether the op is exact, whether it needs
// a floating operand.
var rgUnaryOps = []struct {
	text   string
	fn     func(x *Tensor) *Tensor
	lip    float64
	exact  bool
	float  bool
	errFun rgErrFunc
}{
	{text: "$0.Exp()", fn: (*Tensor).Exp, errFun: func(_ []*Tensor, e, m []float64) float64 { return m[1] * math.Expm1(e[0]) }},
	{text: "$0.Abs().AddScalar(1).Log()", fn: func(x *Tensor) *Tensor { return x.Abs().AddScalar(1).Log() }, lip: 1},
	{text: "$0.Tanh()", fn: (*Tensor).Tanh, lip: 1},
	{text: "$0.Sigmoid()", fn: (*Tensor).Sigmoid, lip: 1},
	{text: "$0.Sin()", fn: (*Tensor).Sin, lip: 1},
	{text: "$0.Cos()", fn: (*Tensor).Cos, lip: 1},
	{text: "$0.Erf()", fn: (*Tensor).Erf, lip: 1.2},
	{text: "$0.GELU()", fn: (*Tensor).GELU, float: true, errFun: rgGELUErr},
	{text: "$0.GELUTanh()", fn: (*Tensor).GELUTanh, float: true, errFun: rgGELUErr},
	{text: "$0.SiLU()", fn: (*Tensor).SiLU, lip: 1.2, float: true},
	{text: "$0.ReLU()", fn: (*Tensor).ReLU, lip: 1, exact: true},
	{text: "$0.Neg()", fn: (*Tensor).Neg, lip: 1, exact: true},
	{text: "$0.Abs()", fn: (*Tensor).Abs, lip: 1, exact: true},
	{text: "$0.Abs().AddScalar(0.25).Sqrt()", fn: func(x *Tensor) *Tensor { return x.Abs().AddScalar(0.25).Sqrt() }, lip: 1},
	{text: "$0.Abs().AddScalar(1).Rsqrt()", fn: func(x *Tensor) *Tensor { return x.Abs().AddScalar(1).Rsqrt() }, lip: 0.5},
}

// rgGELUErr is GELU's error: its Lipschitz constant times its operand's,
// plus, for values computed in float32 (FastMath in fused CPU code), the
// cancellation of 1 + erf(x) (or 1 + tanh(…)) at negative x, which
// ir.FastMath bounds by |x|·2^-24 (allowed twice over).
func rgGELUErr(a []*Tensor, e, m []float64) float64 {
	err := 1.2 * e[0]
	if dt := a[0].DType(); dt == Float32 || dt == Float16 || dt == BFloat16 {
		err += m[0] * 0x1p-23
	}
	return err
}

func (s *rgGen) unaryOp() *rgStep {
	op := rgUnaryOps[s.r.IntN(len(rgUnaryOps))]
	k, ok := s.pick(func(k int) bool { return s.numeric(k) && (!op.float || s.float(k)) })
	if !ok {
		return nil
	}
	err := op.errFun
	if err == nil {
		err = rgLip(op.lip)
	}
	if op.text == "$0.Abs().AddScalar(0.25).Sqrt()" && s.g.exact[k] {
		// No error to amplify: the square root itself, near zero too.
		return s.step("$0.Abs().Sqrt()", func(a []*Tensor) *Tensor { return a[0].Abs().Sqrt() }, false, rgLip(0), k)
	}
	return s.step(op.text, func(a []*Tensor) *Tensor { return op.fn(a[0]) }, op.exact, err, k)
}

func (s *rgGen) scalarOp() *rgStep {
	k, ok := s.pick(s.numeric)
	if !ok {
		return nil
	}
	c := s.oneOfF(0, 1, 2, 3, -1, 0.5, -1.5, 0.25, 1.75)
	switch s.r.IntN(9) {
	case 0:
		return s.step("$0.AddScalar("+rgFloat(c)+")", func(a []*Tensor) *Tensor { return a[0].AddScalar(c) }, false, rgLip(1), k)
	case 1:
		return s.step("$0.SubScalar("+rgFloat(c)+")", func(a []*Tensor) *Tensor { return a[0].SubScalar(c) }, false, rgLip(1), k)
	case 2:
		return s.step("$0.MulScalar("+rgFloat(c)+")", func(a []*Tensor) *Tensor { return a[0].MulScalar(c) }, false, rgLip(math.Abs(c)), k)
	case 3:
		c = s.oneOfF(1, 2, -4, 0.5, 3, -0.75)
		return s.step("$0.DivScalar("+rgFloat(c)+")", func(a []*Tensor) *Tensor { return a[0].DivScalar(c) }, false, rgLip(1/math.Abs(c)), k)
	case 4:
		return s.step("$0.MaximumScalar("+rgFloat(c)+")", func(a []*Tensor) *Tensor { return a[0].MaximumScalar(c) }, true, rgLip(1), k)
	case 5:
		return s.step("$0.MinimumScalar("+rgFloat(c)+")", func(a []*Tensor) *Tensor { return a[0].MinimumScalar(c) }, true, rgLip(1), k)
	case 6:
		return s.step("$0.PowScalar(2)", func(a []*Tensor) *Tensor { return a[0].PowScalar(2) }, false,
			func(_ []*Tensor, e, m []float64) float64 { return 2*m[0]*e[0] + e[0]*e[0] }, k)
	case 7:
		b := [][2]float64{{-1, 1}, {0, 2}, {-0.5, 0.5}, {math.Inf(-1), 1}, {-1, math.Inf(1)}, {-2, 3}}[s.r.IntN(6)]
		lo, hi := b[0], b[1]
		return s.step("$0.Clamp("+rgFloat(lo)+", "+rgFloat(hi)+")", func(a []*Tensor) *Tensor { return a[0].Clamp(lo, hi) }, true, rgLip(1), k)
	default: // a multiply-add, which a GPU compiler contracts into an FMA
		c2 := s.oneOfF(0.5, -1, 2.5)
		return s.step("$0.MulScalar("+rgFloat(c)+").AddScalar("+rgFloat(c2)+")",
			func(a []*Tensor) *Tensor { return a[0].MulScalar(c).AddScalar(c2) }, false, rgLip(math.Abs(c)), k)
	}
}

func rgDTypeName(dt DType) string {
	switch dt {
	case Float32:
		return "Float32"
	case Float64:
		return "Float64"
	case Float16:
		return "Float16"
	case BFloat16:
		return "BFloat16"
	case Int64:
		return "Int64"
	case Int32:
		return "Int32"
	case Bool:
		return "Bool"
	}
	return dt.String()
}

func (s *rgGen) binaryOp() *rgStep {
	a, ok := s.pick(s.numeric)
	if !ok {
		return nil
	}
	b, ok := s.pickWith(func(k int) bool { return s.numeric(k) && (k != a || s.chance(0.1)) }, s.shape(a))
	if !ok {
		return nil
	}
	switch s.r.IntN(7) {
	case 0:
		return s.step("$0.Add($1)", func(x []*Tensor) *Tensor { return x[0].Add(x[1]) }, false, rgSumErr, a, b)
	case 1:
		return s.step("$0.Sub($1)", func(x []*Tensor) *Tensor { return x[0].Sub(x[1]) }, false, rgSumErr, a, b)
	case 2:
		return s.step("$0.Mul($1)", func(x []*Tensor) *Tensor { return x[0].Mul(x[1]) }, false,
			func(_ []*Tensor, e, m []float64) float64 { return e[0]*m[1] + e[1]*m[0] + e[0]*e[1] }, a, b)
	case 3:
		return s.step("$0.Maximum($1)", func(x []*Tensor) *Tensor { return x[0].Maximum(x[1]) }, true, rgSumErr, a, b)
	case 4:
		return s.step("$0.Minimum($1)", func(x []*Tensor) *Tensor { return x[0].Minimum(x[1]) }, true, rgSumErr, a, b)
	case 5: // a divisor bounded away from zero
		return s.step("$0.Div($1.Abs().AddScalar(0.5))", func(x []*Tensor) *Tensor { return x[0].Div(x[1].Abs().AddScalar(0.5)) }, false,
			func(_ []*Tensor, e, m []float64) float64 { return 2*e[0] + 4*m[0]*e[1] }, a, b)
	default: // a base in [0.5, ∞), an exponent in (-1, 1)
		return s.step("$0.Abs().AddScalar(0.5).Pow($1.Tanh())", func(x []*Tensor) *Tensor { return x[0].Abs().AddScalar(0.5).Pow(x[1].Tanh()) }, false,
			func(x []*Tensor, e, m []float64) float64 {
				// The base and the exponent are rounded in their operands'
				// dtypes before the power (tanh within FastMath's few ulps).
				baseType := x[0].DType()
				if !baseType.IsFloat() {
					baseType = Float32
				}
				eBase := e[0] + rgRtol(baseType)*(m[0]+0.5)
				tanhType := x[1].DType()
				if !tanhType.IsFloat() {
					tanhType = Float32 // the default float type, as for integers' tanh
				}
				eExp := e[1] + rgRtol(tanhType)
				return 4*eBase + m[2]*max(0.7, math.Log(m[0]+0.5))*eExp
			}, a, b)
	}
}

// rgMask is a Bool mask for Where and MaskedFill: a Bool value, or a
// comparison of exact values (so that compiled and eager code agree on
// every element).
type rgMask struct {
	args []int
	text func(off int) string // over $off, $off+1
	fn   func(a []*Tensor, off int) *Tensor
}

var rgCompares = []struct {
	name   string
	fn     func(x, y *Tensor) *Tensor
	scalar func(x *Tensor, c float64) *Tensor
}{
	{"Gt", (*Tensor).Gt, (*Tensor).GtScalar},
	{"Lt", (*Tensor).Lt, (*Tensor).LtScalar},
	{"Ge", (*Tensor).Ge, (*Tensor).GeScalar},
	{"Le", (*Tensor).Le, (*Tensor).LeScalar},
	{"Eq", (*Tensor).Eq, (*Tensor).EqScalar},
	{"Ne", (*Tensor).Ne, (*Tensor).NeScalar},
}

// mask picks a mask whose shape, with shapes, broadcasts to one that
// satisfies fits.
func (s *rgGen) mask(fits func(shape []int) bool, shapes ...[]int) (rgMask, bool) {
	ok := func(extra ...int) func(k int) bool {
		return func(k int) bool {
			all := slices.Clone(shapes)
			for _, e := range extra {
				all = append(all, s.shape(e))
			}
			b, bc := rgBroadcast(append(all, s.shape(k))...)
			return bc && fits(b)
		}
	}
	p := s.r.Float64()
	if p < 0.25 {
		if m, found := s.pick(func(k int) bool { return s.vals[k].DType() == Bool && ok()(k) }); found {
			return rgMask{args: []int{m},
				text: func(off int) string { return "$" + strconv.Itoa(off) },
				fn:   func(a []*Tensor, off int) *Tensor { return a[off] }}, true
		}
	}
	cmp := rgCompares[s.r.IntN(len(rgCompares))]
	c, found := s.pick(func(k int) bool { return s.exactNumeric(k) && ok()(k) })
	if !found {
		return rgMask{}, false
	}
	if p < 0.6 {
		v := s.oneOfF(0, 0.5, -0.5, 1)
		if cmp.name == "Eq" || cmp.name == "Ne" {
			v = s.oneOfF(0, 1, -1.5) // values the coarse inputs hold
		}
		return rgMask{args: []int{c},
			text: func(off int) string { return "$" + strconv.Itoa(off) + "." + cmp.name + "Scalar(" + rgFloat(v) + ")" },
			fn:   func(a []*Tensor, off int) *Tensor { return cmp.scalar(a[off], v) }}, true
	}
	d, found := s.pick(func(k int) bool { return s.exactNumeric(k) && ok(c)(k) })
	if !found {
		return rgMask{}, false
	}
	return rgMask{args: []int{c, d},
		text: func(off int) string {
			return "$" + strconv.Itoa(off) + "." + cmp.name + "($" + strconv.Itoa(off+1) + ")"
		},
		fn: func(a []*Tensor, off int) *Tensor { return cmp.fn(a[off], a[off+1]) }}, true
}

func (s *rgGen) whereOp() *rgStep {
	a, ok := s.pick(s.numeric)
	if !ok {
		return nil
	}
	b, ok := s.pickWith(func(k int) bool { return s.numeric(k) && (k != a || s.chance(0.1)) }, s.shape(a))
	if !ok {
		return nil
	}
	m, ok := s.mask(func(sh []int) bool { return rgNumel(sh) <= rgMaxNumel }, s.shape(a), s.shape(b))
	if !ok {
		return nil
	}
	return s.step("Where("+m.text(2)+", $0, $1)", func(x []*Tensor) *Tensor { return Where(m.fn(x, 2), x[0], x[1]) },
		true, func(_ []*Tensor, e, _ []float64) float64 { return e[0] + e[1] }, append([]int{a, b}, m.args...)...)
}

func (s *rgGen) maskedFillOp() *rgStep {
	a, ok := s.pick(s.numeric)
	if !ok {
		return nil
	}
	m, ok := s.mask(func(sh []int) bool { return slices.Equal(sh, s.shape(a)) }, s.shape(a))
	if !ok {
		return nil
	}
	v := s.oneOfF(0, -1, 2.5, 100)
	if !s.float(a) {
		v = s.oneOfF(0, -1, 7)
	}
	return s.step("$0.MaskedFill("+m.text(1)+", "+rgFloat(v)+")", func(x []*Tensor) *Tensor { return x[0].MaskedFill(m.fn(x, 1), v) },
		true, func(_ []*Tensor, e, _ []float64) float64 { return e[0] }, append([]int{a}, m.args...)...)
}

// compareOp makes a Bool value: a comparison of exact values, or a logical
// op on Bool values.
func (s *rgGen) compareOp() *rgStep {
	if s.chance(0.4) {
		a, ok := s.pick(func(k int) bool { return s.vals[k].DType() == Bool })
		if ok {
			if s.chance(0.3) {
				return s.step("$0.LogicalNot()", func(x []*Tensor) *Tensor { return x[0].LogicalNot() }, true, rgLip(0), a)
			}
			b, ok := s.pickWith(func(k int) bool { return s.g.exact[k] }, s.shape(a))
			if ok {
				if s.chance(0.5) {
					return s.step("$0.LogicalAnd($1)", func(x []*Tensor) *Tensor { return x[0].LogicalAnd(x[1]) }, true, rgLip(0, 0), a, b)
				}
				return s.step("$0.LogicalOr($1)", func(x []*Tensor) *Tensor { return x[0].LogicalOr(x[1]) }, true, rgLip(0, 0), a, b)
			}
		}
	}
	m, ok := s.mask(func(sh []int) bool { return rgNumel(sh) <= rgMaxNumel })
	if !ok {
		return nil
	}
	return s.step(m.text(0), func(x []*Tensor) *Tensor { return m.fn(x, 0) }, true, rgLip(0, 0), m.args...)
}

func (s *rgGen) castOp() *rgStep {
	k, ok := s.pick(func(int) bool { return true })
	if !ok {
		return nil
	}
	dt := s.vals[k].DType()
	var to DType
	switch {
	case dt.IsFloat():
		to = []DType{Float32, Float64, Float16, BFloat16}[s.r.IntN(4)]
		if s.g.exact[k] && s.chance(0.3) {
			to = Int64 // truncating exact values only: nothing to round differently
		}
	default: // int64, bool
		to = []DType{Float32, Float64, Int64, Float16}[s.r.IntN(4)]
	}
	return s.step("$0.To("+rgDTypeName(to)+")", func(a []*Tensor) *Tensor { return a[0].To(to) }, true, rgLip(1), k)
}

// The reductions, by name: plain and keeping dims.
var rgReductions = []struct {
	name       string
	fn, keepFn func(x *Tensor, dims ...int) *Tensor
	float      bool // needs a floating operand
	selects    bool // amax, amin: exact
}{
	{"Sum", (*Tensor).Sum, (*Tensor).SumKeepDim, false, false},
	{"Mean", (*Tensor).Mean, (*Tensor).MeanKeepDim, true, false},
	{"Max", (*Tensor).Max, (*Tensor).MaxKeepDim, false, true},
	{"Min", (*Tensor).Min, (*Tensor).MinKeepDim, false, true},
}

func (s *rgGen) reductionOp() *rgStep {
	red := rgReductions[s.r.IntN(len(rgReductions))]
	k, ok := s.pick(func(k int) bool {
		return s.rank(k) >= 1 && (red.name == "Sum" || s.numeric(k)) && (!red.float || s.float(k))
	})
	if !ok {
		return nil
	}
	var dims []int
	if !s.chance(0.15) {
		dims = s.reduceDims(s.rank(k))
	}
	// A quarter of the time the reduction reads a permuted view of its
	// operand (as x.Permute(p).Sum(0) is written), so that its dims are
	// strided every way in memory.
	var perm []int
	shape := s.shape(k)
	if s.rank(k) >= 2 && s.chance(0.25) {
		perm = s.r.Perm(s.rank(k))
		shape = make([]int, len(perm))
		for i, p := range perm {
			shape[i] = s.shape(k)[p]
		}
	}
	n := 1 // elements per reduced group
	for d, size := range shape {
		if dims == nil || slices.Contains(dims, d) || slices.Contains(dims, d-s.rank(k)) {
			n *= size
		}
	}
	name, reduce := red.name, red.fn
	if s.chance(0.5) {
		name, reduce = red.name+"KeepDim", red.keepFn
	}
	text, fn := "$0", reduce
	if perm != nil {
		text = "$0.Permute(" + rgInts(perm) + ")"
		fn = func(x *Tensor, dims ...int) *Tensor { return reduce(x.Permute(perm...), dims...) }
	}
	err := rgLip(1)
	if red.name == "Sum" || red.name == "Mean" {
		// The operand's bound n times over (a mean divides it back), and
		// rounding relative to the sum of the magnitudes reduced, not to
		// the result: a sum that cancels is exact only to that.
		scale := 1.0
		if red.name == "Mean" {
			scale = 1 / float64(n)
		}
		err = func(a []*Tensor, e, _ []float64) float64 {
			x := a[0]
			if perm != nil {
				x = x.Permute(perm...)
			}
			mags := rgMaxAbs(x.To(Float64).Abs().Sum(dims...))
			return float64(n)*scale*e[0] + rgRtol(a[0].DType())*scale*mags
		}
	}
	st := s.step(text+"."+name+"("+rgInts(dims)+")", func(a []*Tensor) *Tensor { return fn(a[0], dims...) }, red.selects, err, k)
	st.outer, st.permuted = rgOuter(dims, len(shape)), perm != nil
	return st
}

func (s *rgGen) argOp() *rgStep {
	k, ok := s.pick(func(k int) bool { return s.exactNumeric(k) && s.rank(k) >= 1 })
	if !ok {
		return nil
	}
	d, keep := s.dim(s.rank(k)), s.chance(0.5)
	if s.chance(0.5) {
		return s.step(fmt.Sprintf("$0.ArgMax(%d, %v)", d, keep), func(a []*Tensor) *Tensor { return a[0].ArgMax(d, keep) }, true, rgLip(0), k)
	}
	return s.step(fmt.Sprintf("$0.ArgMin(%d, %v)", d, keep), func(a []*Tensor) *Tensor { return a[0].ArgMin(d, keep) }, true, rgLip(0), k)
}

// arrangeOp is one of the ops that move, select or accumulate elements
// along a dim: Repeat, Pad, Tril, Triu, CumSum, ArgSort, and the rounding
// ops (on exact values only: rounding is discontinuous, and a value
// rounded differently would differ by a whole unit).
func (s *rgGen) arrangeOp() *rgStep {
	switch s.r.IntN(6) {
	case 0: // Repeat
		k, ok := s.pick(func(k int) bool { return s.rank(k) < rgMaxRank && 4*rgNumel(s.shape(k)) <= rgMaxNumel })
		if !ok {
			return nil
		}
		counts := make([]int, max(1, s.rank(k)+s.r.IntN(2))) // at least one count, for a 0-d tensor too
		for i := range counts {
			counts[i] = 1
		}
		counts[s.r.IntN(len(counts))] = 1 + s.r.IntN(2)
		counts[s.r.IntN(len(counts))] = 1 + s.r.IntN(2)
		return s.step("$0.Repeat("+rgInts(counts)+")", func(a []*Tensor) *Tensor { return a[0].Repeat(counts...) }, true, rgLip(1), k)
	case 1: // Pad, sometimes cropping
		k, ok := s.pick(func(k int) bool {
			return s.rank(k) >= 1 && s.shape(k)[s.rank(k)-1] >= 2 && 4*rgNumel(s.shape(k)) <= rgMaxNumel
		})
		if !ok {
			return nil
		}
		pads := []int{s.r.IntN(3) - 1, s.r.IntN(3)}
		value := s.oneOfF(0, -1.5, 2)
		return s.step(fmt.Sprintf("$0.Pad(%s, %g)", rgInts(pads), value), func(a []*Tensor) *Tensor { return a[0].Pad(pads, value) },
			true, rgLip(1), k)
	case 2: // Tril, Triu
		k, ok := s.pick(func(k int) bool { return s.rank(k) >= 2 })
		if !ok {
			return nil
		}
		diag := s.r.IntN(5) - 2
		if s.chance(0.5) {
			return s.step(fmt.Sprintf("$0.Tril(%d)", diag), func(a []*Tensor) *Tensor { return a[0].Tril(diag) }, true, rgLip(1), k)
		}
		return s.step(fmt.Sprintf("$0.Triu(%d)", diag), func(a []*Tensor) *Tensor { return a[0].Triu(diag) }, true, rgLip(1), k)
	case 3: // CumSum: the operand's bound times the line, and rounding relative to the running magnitudes
		k, ok := s.pick(func(k int) bool { return s.rank(k) >= 1 })
		if !ok {
			return nil
		}
		d := s.dim(s.rank(k))
		n := float64(s.shape(k)[(d+s.rank(k))%s.rank(k)])
		err := func(a []*Tensor, e, _ []float64) float64 {
			return n*e[0] + rgRtol(a[0].DType())*rgMaxAbs(a[0].To(Float64).Abs().CumSum(d))
		}
		return s.step(fmt.Sprintf("$0.CumSum(%d)", d), func(a []*Tensor) *Tensor { return a[0].CumSum(d) }, false, err, k)
	case 4: // ArgSort of exact values: ties break the same way everywhere
		k, ok := s.pick(func(k int) bool { return s.exactNumeric(k) && s.rank(k) >= 1 })
		if !ok {
			return nil
		}
		d, desc := s.dim(s.rank(k)), s.chance(0.5)
		return s.step(fmt.Sprintf("$0.ArgSort(%d, %v)", d, desc), func(a []*Tensor) *Tensor { return a[0].ArgSort(d, desc) }, true, rgLip(0), k)
	default: // Floor, Ceil, Round, Sign of exact values, scaled so that they round
		k, ok := s.pick(func(k int) bool { return s.exactNumeric(k) && s.float(k) })
		if !ok {
			return nil
		}
		ops := []struct {
			name string
			fn   func(*Tensor) *Tensor
		}{{"Floor", (*Tensor).Floor}, {"Ceil", (*Tensor).Ceil}, {"Round", (*Tensor).Round}, {"Sign", (*Tensor).Sign}}
		op := ops[s.r.IntN(len(ops))]
		return s.step("$0.MulScalar(0.5)."+op.name+"()", func(a []*Tensor) *Tensor { return op.fn(a[0].MulScalar(0.5)) }, true, rgLip(0), k)
	}
}

func (s *rgGen) varOp() *rgStep {
	k, ok := s.pick(func(k int) bool { return s.float(k) && s.rank(k) >= 1 })
	if !ok {
		return nil
	}
	var dims []int
	text := "nil"
	if !s.chance(0.15) {
		dims = s.reduceDims(s.rank(k))
		text = "[]int{" + rgInts(dims) + "}"
	}
	n := 1
	for d, size := range s.shape(k) {
		if dims == nil || slices.Contains(dims, d) || slices.Contains(dims, d-s.rank(k)) {
			n *= size
		}
	}
	corr, keep := float64(s.r.IntN(2)), s.chance(0.5)
	st := s.step(fmt.Sprintf("$0.Var(%s, %v, %v)", text, corr, keep), func(a []*Tensor) *Tensor { return a[0].Var(dims, corr, keep) }, false,
		// d var = 2/(n-c)·Σ(x-mean)(dx-dmean), and n/(n-c) <= 2.
		func(a []*Tensor, e, m []float64) float64 { return 16*m[0]*e[0] + 8*rgRtol(a[0].DType())*m[0]*m[0] }, k)
	st.nanOK = n == 1 && corr == 1 // 0/0, as in PyTorch
	st.outer = rgOuter(dims, s.rank(k))
	return st
}

func (s *rgGen) softmaxOp() *rgStep {
	k, ok := s.pick(func(k int) bool { return s.float(k) && s.rank(k) >= 1 })
	if !ok {
		return nil
	}
	d := s.dim(s.rank(k))
	if s.chance(0.5) {
		return s.step(fmt.Sprintf("$0.Softmax(%d)", d), func(a []*Tensor) *Tensor { return a[0].Softmax(d) }, false, rgLip(2), k)
	}
	return s.step(fmt.Sprintf("$0.LogSoftmax(%d)", d), func(a []*Tensor) *Tensor { return a[0].LogSoftmax(d) }, false, rgLip(2), k)
}

// rgMinIgnoringNaN is the smallest element of t that is not NaN (+Inf if
// none).
func rgMinIgnoringNaN(t *Tensor) float64 {
	m := math.Inf(1)
	for _, v := range t.Float64s() {
		if v < m {
			m = v
		}
	}
	return m
}

func (s *rgGen) normOp() *rgStep {
	k, ok := s.pick(func(k int) bool { return s.float(k) && s.rank(k) >= 1 })
	if !ok {
		return nil
	}
	n := s.shape(k)[s.rank(k)-1]
	args := []int{k}
	// param adds an optional weight or bias of shape [n]: its argument
	// index, or 0 and its text "nil".
	param := func() (int, string) {
		if s.chance(0.5) {
			return 0, "nil"
		}
		p, ok := s.pick(func(j int) bool { return s.float(j) && slices.Equal(s.shape(j), []int{n}) })
		if !ok {
			return 0, "nil"
		}
		args = append(args, p)
		return len(args) - 1, "$" + strconv.Itoa(len(args)-1)
	}
	opt := func(a []*Tensor, i int) *Tensor {
		if i == 0 {
			return nil
		}
		return a[i]
	}
	eps := s.oneOfF(1e-5, 1e-6)
	sqn := math.Sqrt(float64(n))
	w, wText := param()
	// The result moves by 2(1+sqrt(n)) times the input's bound over the
	// smallest row deviation (or root mean square), times the weight's
	// magnitude, plus the weight's bound times the normalised values'
	// magnitude (at most sqrt(n)) and the bias's bound. Rounding in the
	// row's mean (relative to the input's magnitude) counts as input
	// error, rounding in its variance or mean square (relative to
	// itself) as sqrt(n)·rtol.
	errOf := func(rowStat func(x *Tensor) *Tensor, b int, centred bool) rgErrFunc {
		return func(a []*Tensor, e, m []float64) float64 {
			rt := rgRtol(a[0].DType())
			sigma := math.Sqrt(max(rgMinIgnoringNaN(rowStat(a[0].To(Float64))), 0) + eps)
			in := e[0]
			if centred {
				in += rt * m[0]
			}
			err := 2*(1+sqn)/sigma*in + sqn*rt
			if w != 0 {
				err = err*max(1, m[w]) + sqn*e[w]
			}
			if b != 0 {
				err += e[b]
			}
			return err
		}
	}
	if s.chance(0.5) {
		b, bText := param()
		return s.step(fmt.Sprintf("$0.LayerNorm([]int{%d}, %s, %s, %g)", n, wText, bText, eps),
			func(a []*Tensor) *Tensor { return a[0].LayerNorm([]int{n}, opt(a, w), opt(a, b), eps) }, false,
			errOf(func(x *Tensor) *Tensor { return x.Var([]int{-1}, 0, false) }, b, true), args...)
	}
	return s.step(fmt.Sprintf("$0.RMSNorm([]int{%d}, %s, %g)", n, wText, eps),
		func(a []*Tensor) *Tensor { return a[0].RMSNorm([]int{n}, opt(a, w), eps) }, false,
		errOf(func(x *Tensor) *Tensor { return x.Mul(x).Mean(-1) }, 0, false), args...)
}

// rgFactor is a factor of n strictly between 1 and n, or 0.
func (s *rgGen) factor(n int) int {
	var fs []int
	for f := 2; f < n; f++ {
		if n%f == 0 {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return 0
	}
	return fs[s.r.IntN(len(fs))]
}

// newShape is a new shape with x's elements: two adjacent dims merged, or
// one split, sometimes with -1 for one size.
func (s *rgGen) newShape(shape []int) []int {
	r := len(shape)
	var out []int
	if r >= 2 && s.chance(0.5) {
		i := s.r.IntN(r - 1)
		out = append(slices.Clone(shape[:i]), shape[i]*shape[i+1])
		out = append(out, shape[i+2:]...)
	} else {
		if r == 0 {
			return []int{1}
		}
		i := s.r.IntN(r)
		f := s.factor(shape[i])
		a, b := 1, shape[i]
		if f > 0 && s.chance(0.7) {
			a, b = f, shape[i]/f
		} else if s.chance(0.5) {
			a, b = b, a
		}
		out = append(slices.Clone(shape[:i]), a, b)
		out = append(out, shape[i+1:]...)
	}
	if len(out) > rgMaxRank {
		return nil
	}
	if s.chance(0.4) {
		out[s.r.IntN(len(out))] = -1
	}
	return out
}

func (s *rgGen) viewOp() *rgStep {
	k, ok := s.pick(func(int) bool { return true })
	if !ok {
		return nil
	}
	shape, r := s.shape(k), s.rank(k)
	view := func(text string, fn func(x *Tensor) *Tensor) *rgStep {
		return s.step(text, func(a []*Tensor) *Tensor { return fn(a[0]) }, true, rgLip(1), k)
	}
	switch s.r.IntN(12) {
	case 0:
		if r < 2 {
			return nil
		}
		d0 := s.r.IntN(r)
		d1 := (d0 + 1 + s.r.IntN(r-1)) % r
		if s.chance(0.3) {
			d1 -= r
		}
		return view(fmt.Sprintf("$0.Transpose(%d, %d)", d0, d1), func(x *Tensor) *Tensor { return x.Transpose(d0, d1) })
	case 1:
		if r < 2 {
			return nil
		}
		p := s.r.Perm(r)
		if s.chance(0.3) {
			p[0] -= r
		}
		return view("$0.Permute("+rgInts(p)+")", func(x *Tensor) *Tensor { return x.Permute(p...) })
	case 2:
		if r < 2 {
			return nil
		}
		return view("$0.T()", (*Tensor).T)
	case 3:
		if r < 1 {
			return nil
		}
		d := s.dim(r)
		n := shape[(d+r)%r]
		start := s.r.IntN(n)
		stop := start + 1 + s.r.IntN(n-start+2) // may pass the end: clamped
		step := s.oneOf(1, 1, 2, 3)
		if s.chance(0.25) {
			start -= n // from the end, as Python
		}
		return view(fmt.Sprintf("$0.Slice(%d, %d, %d, %d)", d, start, stop, step), func(x *Tensor) *Tensor { return x.Slice(d, start, stop, step) })
	case 4:
		if r < 1 {
			return nil
		}
		d := s.dim(r)
		n := shape[(d+r)%r]
		start := s.r.IntN(n)
		length := 1 + s.r.IntN(n-start)
		return view(fmt.Sprintf("$0.Narrow(%d, %d, %d)", d, start, length), func(x *Tensor) *Tensor { return x.Narrow(d, start, length) })
	case 5:
		if r < 1 {
			return nil
		}
		d := s.dim(r)
		n := shape[(d+r)%r]
		i := s.r.IntN(2*n) - n
		return view(fmt.Sprintf("$0.Select(%d, %d)", d, i), func(x *Tensor) *Tensor { return x.Select(d, i) })
	case 6:
		target := []int{}
		if r < rgMaxRank && s.chance(0.3) {
			target = append(target, rgSizes[s.r.IntN(len(rgSizes))])
		}
		changed := len(target) > 0
		for _, size := range shape {
			switch {
			case size == 1 && s.chance(0.7):
				target = append(target, rgSizes[1+s.r.IntN(len(rgSizes)-1)])
				changed = true
			case s.chance(0.5):
				target = append(target, -1)
			default:
				target = append(target, size)
			}
		}
		full := slices.Clone(target)
		for i, size := range full {
			if size == -1 {
				full[i] = shape[i-(len(target)-r)]
			}
		}
		if !changed || rgNumel(full) > rgMaxNumel {
			return nil
		}
		return view("$0.Expand("+rgInts(target)+")", func(x *Tensor) *Tensor { return x.Expand(target...) })
	case 7:
		switch {
		case s.chance(0.3):
			return view("$0.Reshape(-1)", func(x *Tensor) *Tensor { return x.Reshape(-1) })
		case r >= 1 && s.chance(0.4):
			a, b := s.r.IntN(r), s.r.IntN(r)
			a, b = min(a, b), max(a, b)
			if s.chance(0.3) {
				b -= r
			}
			return view(fmt.Sprintf("$0.Flatten(%d, %d)", a, b), func(x *Tensor) *Tensor { return x.Flatten(a, b) })
		}
		ns := s.newShape(shape)
		if ns == nil {
			return nil
		}
		return view("$0.Reshape("+rgInts(ns)+")", func(x *Tensor) *Tensor { return x.Reshape(ns...) })
	case 8: // View where the eager layout allows it
		ns := s.newShape(shape)
		if ns == nil || Try(func() { s.vals[k].View(ns...) }) != nil {
			return nil
		}
		st := view("$0.View("+rgInts(ns)+")", func(x *Tensor) *Tensor { return x.View(ns...) })
		st.view = true
		return st
	case 9:
		if r >= rgMaxRank {
			return nil
		}
		d := s.r.IntN(r+1) - s.r.IntN(2)*(r+1)
		return view(fmt.Sprintf("$0.Unsqueeze(%d)", d), func(x *Tensor) *Tensor { return x.Unsqueeze(d) })
	case 10:
		if r < 1 || s.chance(0.3) {
			return view("$0.Squeeze()", func(x *Tensor) *Tensor { return x.Squeeze() })
		}
		dims := s.dims(r)
		if len(dims) > 2 {
			dims = dims[:2]
		}
		return view("$0.Squeeze("+rgInts(dims)+")", func(x *Tensor) *Tensor { return x.Squeeze(dims...) })
	default:
		return view("$0.Contiguous()", (*Tensor).Contiguous)
	}
}

// constOp captures a tensor made while generating, as weights are:
// Compile binds it as a constant, by reference. Ops on constants alone run
// once, while tracing.
func (s *rgGen) constOp() *rgStep {
	k, _ := s.pick(func(int) bool { return true })
	shape := slices.Clone(s.shape(k))
	if len(shape) > 0 && s.chance(0.3) {
		shape = shape[s.r.IntN(len(shape)):]
	}
	for i := range shape {
		if s.chance(0.3) {
			shape[i] = 1
		}
	}
	dt := s.vals[k].DType()
	if dt == Bool {
		dt = Float32
	}
	spec := rgInput{dtype: dt, shape: shape, dist: s.r.IntN(4), scale: 1}
	c := spec.make(s.r)
	name := "c" + strconv.Itoa(len(s.g.consts))
	s.g.consts = append(s.g.consts, spec)
	switch {
	case s.chance(0.3) && dt.IsFloat():
		return s.step(name+".Tanh()", func([]*Tensor) *Tensor { return c.Tanh() }, false, rgLip())
	case s.chance(0.3) && len(shape) >= 1:
		return s.step(name+".Unsqueeze(0)", func([]*Tensor) *Tensor { return c.Unsqueeze(0) }, true, rgLip())
	}
	return s.step(name, func([]*Tensor) *Tensor { return c }, true, rgLip())
}

// catOp concatenates or stacks two values.
func (s *rgGen) catOp() *rgStep {
	a, ok := s.pick(func(k int) bool { return s.rank(k) >= 1 })
	if !ok {
		return nil
	}
	r := s.rank(a)
	if s.chance(0.5) {
		d := s.dim(r)
		dd := (d + r) % r
		b, ok := s.pick(func(k int) bool {
			sa, sb := s.shape(a), s.shape(k)
			if len(sb) != r || rgNumel(sa)+rgNumel(sb) > rgMaxNumel {
				return false
			}
			for i := range sa {
				if i != dd && sa[i] != sb[i] {
					return false
				}
			}
			return true
		})
		if !ok {
			return nil
		}
		return s.step(fmt.Sprintf("Cat([]*Tensor{$0, $1}, %d)", d), func(x []*Tensor) *Tensor { return Cat([]*Tensor{x[0], x[1]}, d) },
			true, rgSumErr, a, b)
	}
	if r >= rgMaxRank {
		return nil
	}
	b, ok := s.pick(func(k int) bool { return slices.Equal(s.shape(a), s.shape(k)) && 2*rgNumel(s.shape(k)) <= rgMaxNumel })
	if !ok {
		return nil
	}
	d := s.r.IntN(r+1) - s.r.IntN(2)*(r+1)
	return s.step(fmt.Sprintf("Stack([]*Tensor{$0, $1}, %d)", d), func(x []*Tensor) *Tensor { return Stack([]*Tensor{x[0], x[1]}, d) },
		true, rgSumErr, a, b)
}

// propose makes a random step, or nil when the chosen kind does not
// apply, and says which kind it chose. A tenth of the time it makes a twin
// of the last step: the same kind of op on the same operand with other
// attributes (sums over other dims, other bounds), which common
// subexpression elimination must keep apart.
func (s *rgGen) propose() (*rgStep, int) {
	kinds := []struct {
		weight int
		make   func() *rgStep
	}{
		{14, s.unaryOp}, {10, s.scalarOp}, {14, s.binaryOp}, {4, s.whereOp}, {2, s.maskedFillOp},
		{2, s.compareOp}, {3, s.castOp}, {10, s.reductionOp}, {2, s.argOp}, {3, s.varOp},
		{5, s.softmaxOp}, {4, s.normOp}, {18, s.viewOp}, {2, s.constOp}, {2, s.catOp}, {4, s.arrangeOp},
	}
	if n := len(s.g.steps); n > 0 && len(s.g.steps[n-1].args) > 0 && s.chance(0.1) {
		s.force = s.g.steps[n-1].args[0]
		kind := s.kinds[n-1]
		st := kinds[kind].make()
		s.force = -1
		return st, kind
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	w := s.r.IntN(total)
	for i, k := range kinds {
		if w < k.weight {
			return k.make(), i
		}
		w -= k.weight
	}
	return nil, 0
}

// generate adds 3 to 12 steps and chooses the outputs. An error is eager
// code failing on a step the generator believes valid.
func (s *rgGen) generate() error {
	nsteps := 3 + s.r.IntN(10)
	for tries := 0; len(s.g.steps) < nsteps && tries < 500; tries++ {
		st, kind := s.propose()
		if st == nil {
			continue
		}
		a := make([]*Tensor, len(st.args))
		nanIn := false
		for j, k := range st.args {
			a[j] = s.vals[k]
			nanIn = nanIn || rgHasNaN(a[j])
		}
		out, err := rgCall(func() []*Tensor { return []*Tensor{st.fn(a)} })
		if err != nil {
			s.g.steps = append(s.g.steps, *st)
			s.g.outputs = []int{len(s.vals)}
			return fmt.Errorf("step %s: %v", st.expr(), err)
		}
		v := out[0]
		if v.Numel() == 0 || v.Numel() > rgMaxNumel {
			continue
		}
		if v.DType() != Bool && rgMaxAbs(v) > rgLimit(v.DType()) {
			continue // keep values far from overflow
		}
		if !nanIn && !st.nanOK && rgHasNaN(v) {
			continue
		}
		exact, integral := st.exact, !v.DType().IsFloat()
		for _, k := range st.args {
			exact = exact && s.g.exact[k]
			integral = integral && !s.vals[k].DType().IsFloat()
			s.uses[k]++
		}
		s.g.steps = append(s.g.steps, *st)
		s.g.hasView = s.g.hasView || st.view
		s.kinds = append(s.kinds, kind)
		s.g.exact = append(s.g.exact, exact || integral)
		s.vals = append(s.vals, v)
		s.uses = append(s.uses, 0)
	}
	// The last value and up to two others nothing uses; sometimes an
	// intermediate too, which other outputs depend on, an input as it
	// is, or one value twice.
	last := len(s.vals) - 1
	s.g.outputs = []int{last}
	for _, k := range s.r.Perm(last) {
		if len(s.g.outputs) < 3 && k >= len(s.g.inputs) && s.uses[k] == 0 {
			s.g.outputs = append(s.g.outputs, k)
		}
	}
	if s.chance(0.3) {
		if o, ok := s.pick(func(k int) bool { return k != last && s.uses[k] > 0 }); ok {
			s.g.outputs = append(s.g.outputs, o)
		}
	}
	if s.chance(0.05) {
		s.g.outputs = append(s.g.outputs, s.g.outputs[s.r.IntN(len(s.g.outputs))])
	}
	s.r.Shuffle(len(s.g.outputs), func(i, j int) {
		s.g.outputs[i], s.g.outputs[j] = s.g.outputs[j], s.g.outputs[i]
	})
	return nil
}

// With the default device a GPU (GOCOMPILE_DEVICE=cuda), the random graphs
// replayed from CUDA graphs (ReduceOverhead: small kernels launched as
// programmatic dependents, products loading weights ahead of the kernel
// before them) give what the same compiled programs give launched
// plainly: the same bits, or within the graph's error bound where a
// kernel adds in an order of its own. A dependent kernel that read before
// the kernel ahead had written would be off by far more.
func TestRandomGraphsReplayed(t *testing.T) {
	if DefaultDevice() == CPU {
		t.Skip("the default device is the CPU: ReduceOverhead replays CUDA graphs")
	}
	count := 60
	if testing.Short() {
		count = 15
	}
	seed := uint64(0x5eed_2027)
	warns := &rgWarnings{}
	old := slog.Default()
	slog.SetDefault(slog.New(warns))
	defer slog.SetDefault(old)
	replays := stats.GraphReplays.Load()
	for i := range count {
		t.Run(fmt.Sprintf("g%04d", i), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			gen := newRGGen(r, seed, i)
			xs := gen.vals[:len(gen.g.inputs)]
			if err := gen.generate(); err != nil {
				t.Fatalf("%v\nwhile generating:\n%v", err, gen.g)
			}
			g := gen.g
			_, bounds := g.reference(xs)
			plain := Compile(g.run, WithBackend("inductor"), FullGraph())
			graphed := Compile(g.run, WithBackend("inductor"), FullGraph(), WithMode(ReduceOverhead))
			want, err := rgCall(func() []*Tensor { return plain(xs) })
			if err != nil {
				t.Fatalf("the compiled function failed: %v\n%v", err, g)
			}
			for call := 1; call <= 3; call++ { // plain, captured, replayed
				got, err := rgCall(func() []*Tensor { return graphed(xs) })
				if err != nil {
					t.Fatalf("call %d of the replayed function failed: %v\n%v", call, err, g)
				}
				for k := range want {
					if _, _, err := rgCompare(got[k], want[k], bounds[k]); err != nil {
						t.Fatalf("call %d, output %d (%s), replayed against plain: %v\n%v", call, k, rgName(g.outputs[k]), err, g)
					}
				}
			}
			warns.take() // graphs that run plainly say why; that is no failure here
		})
	}
	if stats.GraphReplays.Load() == replays {
		t.Error("no random graph was replayed from a CUDA graph")
	}
}
