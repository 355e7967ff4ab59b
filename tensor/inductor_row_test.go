package tensor

import (
	"fmt"
	"math"
	"testing"

	"gocompile/array"
	"gocompile/inductor/program"
	"gocompile/ir"
	"gocompile/kcache"
)

// Row references: plain float64 loops over rows of r values.
func refSoftmax(x []float64, r int, log bool) []float64 {
	out := make([]float64, len(x))
	for o := 0; o < len(x); o += r {
		m := math.Inf(-1)
		for _, v := range x[o : o+r] {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range x[o : o+r] {
			s += math.Exp(v - m)
		}
		for j, v := range x[o : o+r] {
			if log {
				out[o+j] = v - m - math.Log(s)
			} else {
				out[o+j] = math.Exp(v-m) / s
			}
		}
	}
	return out
}

func refNorm(x, w, b []float64, r int, rms bool, eps float64) []float64 {
	out := make([]float64, len(x))
	for o := 0; o < len(x); o += r {
		mean, ss := 0.0, 0.0
		for _, v := range x[o : o+r] {
			mean += v
		}
		mean /= float64(r)
		if rms {
			mean = 0
		}
		for _, v := range x[o : o+r] {
			ss += (v - mean) * (v - mean)
		}
		inv := 1 / math.Sqrt(ss/float64(r)+eps)
		for j, v := range x[o : o+r] {
			y := (v - mean) * inv
			if w != nil {
				y *= w[j]
			}
			if b != nil {
				y += b[j]
			}
			out[o+j] = y
		}
	}
	return out
}

func refRowSumSquares(x []float64, r int) []float64 {
	out := make([]float64, len(x)/r)
	for o := range out {
		for _, v := range x[o*r : o*r+r] {
			out[o] += v * v
		}
	}
	return out
}

func refRowVar(x []float64, r int) []float64 {
	out := make([]float64, len(x)/r)
	for o := range out {
		m := 0.0
		for _, v := range x[o*r : o*r+r] {
			m += v
		}
		m /= float64(r)
		for _, v := range x[o*r : o*r+r] {
			out[o] += (v - m) * (v - m)
		}
		out[o] /= max(float64(r-1), 0)
	}
	return out
}

func refShiftedMean(x []float64, r int) []float64 {
	out := make([]float64, len(x)/r)
	for o := range out {
		m := math.Inf(-1)
		for _, v := range x[o*r : o*r+r] {
			m = math.Max(m, v)
		}
		for _, v := range x[o*r : o*r+r] {
			out[o] += v - m
		}
		out[o] /= float64(r)
	}
	return out
}

// Row regions (softmax, log-softmax, layer norm, RMS norm, reductions with
// prologues) compiled by the inductor backend agree with eager and with
// float64 loops, on odd row lengths, several row counts, non-contiguous
// inputs and every floating dtype.
func TestInductorRowRegions(t *testing.T) {
	type fn = func(x, w, b *Tensor) *Tensor
	cases := []struct {
		name string
		f    fn
		ref  func(x, w, b []float64, r int) []float64
	}{
		{"softmax", func(x, w, b *Tensor) *Tensor { return x.Softmax(-1) },
			func(x, w, b []float64, r int) []float64 { return refSoftmax(x, r, false) }},
		{"log_softmax", func(x, w, b *Tensor) *Tensor { return x.LogSoftmax(-1) },
			func(x, w, b []float64, r int) []float64 { return refSoftmax(x, r, true) }},
		{"layer_norm", func(x, w, b *Tensor) *Tensor { return x.LayerNorm([]int{x.Shape()[x.Dim()-1]}, w, b, 1e-5) },
			func(x, w, b []float64, r int) []float64 { return refNorm(x, w, b, r, false, 1e-5) }},
		{"layer_norm without affine", func(x, w, b *Tensor) *Tensor { return x.LayerNorm([]int{x.Shape()[x.Dim()-1]}, nil, nil, 1e-5) },
			func(x, w, b []float64, r int) []float64 { return refNorm(x, nil, nil, r, false, 1e-5) }},
		{"rms_norm", func(x, w, b *Tensor) *Tensor { return x.RMSNorm([]int{x.Shape()[x.Dim()-1]}, w, 1e-6) },
			func(x, w, b []float64, r int) []float64 { return refNorm(x, w, nil, r, true, 1e-6) }},
		{"sum of squares", func(x, w, b *Tensor) *Tensor { return x.Mul(x).Sum(-1) },
			func(x, w, b []float64, r int) []float64 { return refRowSumSquares(x, r) }},
		{"masked softmax", func(x, w, b *Tensor) *Tensor { return x.MaskedFill(x.GtScalar(1), math.Inf(-1)).Softmax(-1) },
			func(x, w, b []float64, r int) []float64 {
				m := append([]float64(nil), x...)
				for i, v := range m {
					if v > 1 {
						m[i] = math.Inf(-1)
					}
				}
				return refSoftmax(m, r, false)
			}},
		{"var", func(x, w, b *Tensor) *Tensor { return x.Var([]int{-1}, 1, false) },
			func(x, w, b []float64, r int) []float64 { return refRowVar(x, r) }},
		{"max-shifted mean", func(x, w, b *Tensor) *Tensor { return x.Sub(x.MaxKeepDim(-1)).MeanKeepDim(-1) },
			func(x, w, b []float64, r int) []float64 { return refShiftedMean(x, r) }},
	}
	type layout struct {
		name string
		make func(rows, r int, dt DType) *Tensor
	}
	layouts := []layout{
		{"contiguous", func(rows, r int, dt DType) *Tensor { return Randn(7, Float64, rows, r).To(dt) }},
		{"transposed", func(rows, r int, dt DType) *Tensor { return Randn(7, Float64, r, rows).To(dt).T() }},
		{"stepped", func(rows, r int, dt DType) *Tensor {
			return Randn(7, Float64, rows, 2*r).To(dt).Slice(1, 0, 2*r, 2)
		}},
	}
	tol := map[DType]float64{Float64: 1e-12, Float32: 2e-5, Float16: 2e-2, BFloat16: 2e-2}
	// Every case reads the same inputs, which are made once: random
	// numbers take much of the time, the race detector's most of all.
	type inputKey struct {
		lay     string
		dt      DType
		rows, r int
	}
	type input struct {
		x, w, b    *Tensor
		xs, ws, bs []float64
	}
	inputs := map[inputKey]*input{}
	inputFor := func(lay layout, dt DType, rows, r int) *input {
		k := inputKey{lay.name, dt, rows, r}
		if in := inputs[k]; in != nil {
			return in
		}
		in := &input{x: lay.make(rows, r, dt), w: Randn(8, Float64, r).To(dt), b: Randn(9, Float64, r).To(dt)}
		in.xs, in.ws, in.bs = in.x.To(Float64).Float64s(), in.w.To(Float64).Float64s(), in.b.To(Float64).Float64s()
		inputs[k] = in
		return in
	}
	for _, c := range cases {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16} {
			for _, lay := range layouts {
				for _, sz := range [][2]int{{1, 3}, {3, 1023}, {5, 4097}, {17, 64}, {2, 1}, {1, 70001}} {
					rows, r := sz[0], sz[1]
					if testing.Short() && !splits([]int{rows, r}) {
						continue
					}
					name := fmt.Sprintf("%s/%v/%s/%dx%d", c.name, dt, lay.name, rows, r)
					t.Run(name, func(t *testing.T) {
						in := inputFor(lay, dt, rows, r)
						compiled := Compile(c.f, WithBackend("inductor"))
						got, want := compiled(in.x, in.w, in.b), c.f(in.x, in.w, in.b)
						rowClose(t, "compiled vs eager", got, want.Float64s(), tol[dt])
						ref := c.ref(in.xs, in.ws, in.bs, r)
						if dt == Float16 { // beyond float16's range the result is infinite
							for i, v := range ref {
								if math.Abs(v) > 65520 {
									ref[i] = math.Inf(int(math.Copysign(1, v)))
								}
							}
						}
						rowClose(t, "compiled vs float64 loops", got, ref, 4*tol[dt])
					})
				}
			}
		}
	}
}

// rowClose checks got against want elementwise: |got-want| <= tol·(|want|+1),
// NaN matching NaN.
func rowClose(t *testing.T, what string, got *Tensor, want []float64, tol float64) {
	t.Helper()
	g := got.Float64s()
	if len(g) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(g), len(want))
	}
	for i := range g {
		if math.IsNaN(want[i]) && math.IsNaN(g[i]) || g[i] == want[i] {
			continue
		}
		if d := math.Abs(g[i] - want[i]); !(d <= tol*(math.Abs(want[i])+1)) {
			t.Fatalf("%s: element %d is %v, want %v (tolerance %g)", what, i, g[i], want[i], tol)
		}
	}
}

// Softmax, log-softmax, layer norm and RMS norm each compile to a single
// kernel: one row region.
func TestInductorRowRegionsAreOneKernel(t *testing.T) {
	prog := captureBackend("inductor-capture", program.Config{})
	x, w, b := Randn(1, Float32, 4, 8), Randn(2, Float32, 8), Randn(3, Float32, 8)
	for name, f := range map[string]func(x, w, b *Tensor) *Tensor{
		"softmax":          func(x, w, b *Tensor) *Tensor { return x.Softmax(-1) },
		"log_softmax":      func(x, w, b *Tensor) *Tensor { return x.LogSoftmax(1) },
		"layer_norm":       func(x, w, b *Tensor) *Tensor { return x.LayerNorm([]int{8}, w, b, 1e-5) },
		"rms_norm":         func(x, w, b *Tensor) *Tensor { return x.RMSNorm([]int{8}, w, 1e-6) },
		"bfloat16 softmax": func(x, w, b *Tensor) *Tensor { return x.Softmax(-1) },
	} {
		prog.p = nil
		in := x
		if name == "bfloat16 softmax" {
			in = x.To(BFloat16)
		}
		Compile(f, WithBackend("inductor-capture"))(in, w, b)
		if prog.p == nil {
			t.Fatalf("%s: no program was compiled", name)
		}
		var kernels []string
		for _, s := range prog.steps() {
			if s.Region.Root.Op.Kind != ir.View {
				kernels = append(kernels, s.Region.String())
			}
		}
		if len(kernels) != 1 || prog.steps()[len(prog.steps())-1].Kind != program.RowStep {
			t.Errorf("%s: %d kernels %v, want one row kernel", name, len(kernels), kernels)
		}
	}
}

// With dynamic batch sizes, one compiled program serves every size: fused
// and row kernels take their shapes from the call's tensors.
func TestInductorDynamicShapes(t *testing.T) {
	f := func(x, w *Tensor) *Tensor {
		return x.MulScalar(2).AddScalar(1).Sigmoid().Mul(w).Softmax(-1).Add(x.Mul(x).SumKeepDim(-1))
	}
	var st CompileStats
	compiled := Compile(f, WithBackend("inductor"), WithStats(&st))
	w := Randn(1, Float32, 33)
	for i, batch := range []int{2, 3, 7, 1, 64} {
		x := Randn(uint64(10+i), Float32, batch, 33)
		rowClose(t, fmt.Sprintf("batch %d", batch), compiled(x, w), f(x, w).Float64s(), 2e-5)
	}
	// Static, then dynamic; size 1 is specialised, as in PyTorch.
	if n := st.Compiles.Load(); n > 3 {
		t.Errorf("%d compiles for 5 batch sizes, want at most 3", n)
	}
}

// Programs whose intermediates live in reused buffers give every
// concurrent caller its own: results stay right under many goroutines.
func TestInductorBufferPlanConcurrent(t *testing.T) {
	f := func(x *Tensor) *Tensor {
		v := x.Exp()
		for range 3 { // reductions over dim 0 stay separate: intermediates materialise
			v = v.Div(v.SumKeepDim(0)).MulScalar(2).Softmax(-1)
		}
		return v.Neg()
	}
	compiled := Compile(f, WithBackend("inductor"))
	prog := captureBackend("inductor-plan", program.Config{})
	Compile(f, WithBackend("inductor-plan"))(Randn(0, Float32, 9, 17))
	if prog.p == nil || prog.slots() == 0 {
		t.Fatal("no intermediates were planned")
	}
	errs := make(chan error, 16)
	for w := range 16 {
		go func() {
			var err error
			for i := range 10 {
				x := Randn(uint64(100*w+i), Float32, 9, 17)
				got, want := compiled(x).Float64s(), f(x).Float64s()
				for j := range want {
					if math.Abs(got[j]-want[j]) > 1e-5*(math.Abs(want[j])+1) {
						err = fmt.Errorf("goroutine %d call %d: element %d is %v, want %v", w, i, j, got[j], want[j])
					}
				}
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Independent pointwise values over one iteration space come from one
// kernel (a horizontal group) and agree with eager, on broadcast and
// non-contiguous inputs, with outputs of different dtypes.
func TestInductorHorizontalGroup(t *testing.T) {
	prog := captureBackend("inductor-group", program.Config{})
	f := func(x, y *Tensor) (*Tensor, *Tensor, *Tensor) {
		return x.Exp(), x.Sin().Mul(y), x.AddScalar(1).To(Float16)
	}
	for _, sz := range [][2]int{{1, 1}, {3, 1023}, {5, 4097}} {
		x := Randn(1, Float32, sz[1], sz[0]).T() // transposed
		y := Randn(2, Float32, sz[1])            // broadcast over rows
		a, b, c := Compile(f, WithBackend("inductor-group"))(x, y)
		ea, eb, ec := f(x, y)
		nearValues(t, "exp", a, ea)
		nearValues(t, "sin*y", b, eb)
		nearValues(t, "x+1 as float16", c, ec)
		if len(prog.steps()) != 1 || prog.steps()[0].Kind != program.GroupStep || len(prog.steps()[0].Region.Group) != 3 {
			t.Fatalf("%v: %d steps, want one group of 3", sz, len(prog.steps()))
		}
	}
}

// captured is the last program a capturing backend compiled.
type captured struct{ p array.Program }

// steps describes the program's steps, and slots how many buffers its
// plan reuses.
func (c *captured) steps() []program.Step { s, _ := program.Steps(c.p); return s }
func (c *captured) slots() int            { _, n := program.Steps(c.p); return n }

// captureBackend registers a backend under name that compiles as
// "inductor" does, with cfg, and keeps the last program it built.
func captureBackend(name string, cfg program.Config) *captured {
	c := &captured{}
	RegisterBackend(name, BackendFunc(func(g *ir.Graph) (Program, error) {
		p, err := program.Compile(g, cfg)
		if err != nil {
			return nil, err
		}
		c.p = p
		return arrayProgram{p}, nil
	}))
	return c
}

// A compile in a new process (here: a new cache on the same directory)
// rebuilds its fusion regions from the layout an earlier one stored,
// instead of partitioning again, and computes the same values.
func TestInductorLayoutFromCache(t *testing.T) {
	dir := t.TempDir()
	f := func(x, w *Tensor) (*Tensor, *Tensor) {
		return x.LayerNorm([]int{33}, w, nil, 1e-5).GELU(), x.Exp()
	}
	x, w := Randn(1, Float32, 5, 33), Randn(2, Float32, 33)
	var first, second *kcache.Cache
	for i, c := range []**kcache.Cache{&first, &second} {
		*c = kcache.Open(dir)
		name := fmt.Sprint("inductor-process-", i)
		captureBackend(name, program.Config{Artifacts: array.NewArtifacts(*c, "")})
		a, b := Compile(f, WithBackend(name))(x, w)
		ea, eb := f(x, w)
		nearValues(t, fmt.Sprint("layer norm, process ", i), a, ea)
		nearValues(t, fmt.Sprint("exp, process ", i), b, eb)
	}
	if s := first.Stats(); s.Writes == 0 {
		t.Fatalf("the first process stored no layout: %+v", s)
	}
	if s := second.Stats(); s.DiskHits == 0 || s.Writes != 0 {
		t.Fatalf("the second process did not reuse the layout: %+v", s)
	}
}

// A pointwise producer read through a transpose, permute, slice, squeeze
// or unsqueeze fuses into its reader: one kernel that reads the producer's
// inputs through the view (or views in a row), with no intermediate and
// no copy.
func TestInductorFusesThroughViews(t *testing.T) {
	prog := captureBackend("inductor-views", program.Config{})
	cases := map[string]func(x, y *Tensor) *Tensor{
		"transpose": func(x, y *Tensor) *Tensor { return x.Exp().Mul(y).T().AddScalar(1).Sigmoid() },
		"permute":   func(x, y *Tensor) *Tensor { return x.Cos().Permute(1, 0).MulScalar(3) },
		"unsqueeze": func(x, y *Tensor) *Tensor { return x.Sin().Unsqueeze(1).Neg().Squeeze(1) },
		"views in a row": func(x, y *Tensor) *Tensor {
			return x.Add(y).Exp().Unsqueeze(0).Permute(2, 0, 1).Slice(0, 0, 1000, 2).Neg()
		},
		"slice": func(x, y *Tensor) *Tensor { return x.Mul(y).Tanh().Slice(1, 1, 1000, 3).MulScalar(2) },
	}
	for name, f := range cases {
		for _, sz := range [][2]int{{1, 3}, {3, 1023}, {5, 4097}} {
			x := Randn(1, Float32, sz[0], sz[1])
			y := Randn(2, Float32, sz[1]) // broadcast, read through the view too
			got, want := Compile(f, WithBackend("inductor-views"))(x, y), f(x, y)
			nearValues(t, fmt.Sprint(name, sz), got, want)
			kernels := 0
			for _, s := range prog.steps() {
				if s.Region.Root.Op.Kind != ir.View {
					kernels++
				}
			}
			if kernels != 1 {
				t.Errorf("%s %v: %d kernels, want 1", name, sz, kernels)
			}
		}
	}
}

// Chains of float16 and bfloat16 ops, and reductions with 16-bit
// prologues and epilogues, fuse into one kernel that rounds each
// intermediate as its store would, and agree with eager to one rounding of
// the dtype (fused float32 arithmetic may contract a*b+c on a GPU, and CPU
// blocks compute exp, erf and tanh with ir.FastMath). For contiguous,
// broadcast and transposed operands and odd sizes, on the CPU and a GPU.
func TestInductorHalfChainsFuseRounded(t *testing.T) {
	prog := captureBackend("inductor-half", program.Config{})
	// check compiles f, compares it with eager on (x, y) and wants it run
	// as one step of the kind.
	check := func(what string, f func(x, y *Tensor) *Tensor, x, y *Tensor, kind program.StepKind, kindName string) {
		t.Helper()
		got, want := Compile(f, WithBackend("inductor-half"))(x, y), f(x, y)
		closeValues(t, what, got, want, map[DType]float64{Float16: 1e-3, BFloat16: 8e-3}[x.DType()])
		if s := prog.steps(); len(s) != 1 || s[0].Kind != kind {
			t.Fatalf("%s: %d steps, want one %s kernel", what, len(s), kindName)
		}
	}
	chains := []struct {
		name string
		f    func(x, y *Tensor) *Tensor
	}{
		{"scale, silu, maximum, neg", func(x, y *Tensor) *Tensor { return y.Maximum(x.MulScalar(-0.25).SiLU()).Neg() }},
		{"sigmoid, sub, sub, scale", func(x, y *Tensor) *Tensor { return y.Sub(y.Sub(x.Sigmoid())).MulScalar(1.5) }},
		{"mul, tanh, add, abs", func(x, y *Tensor) *Tensor { return x.Mul(y).Tanh().AddScalar(-0.25).Abs() }},
		{"exp, div, gelu", func(x, y *Tensor) *Tensor { return x.Exp().Div(x.Mul(y).Abs().AddScalar(1)).GELU() }},
	}
	for _, dt := range []DType{Float16, BFloat16} {
		for _, c := range chains {
			for _, sz := range [][2]int{{1, 1}, {3, 1023}, {7, 4097}} {
				for _, layout := range []string{"contiguous", "broadcast", "transposed"} {
					x := Randn(1, Float32, sz[0], sz[1]).To(dt)
					y := Randn(2, Float32, sz[0], sz[1]).To(dt)
					switch layout {
					case "broadcast":
						y = Randn(2, Float32, sz[1]).To(dt)
					case "transposed":
						x = Randn(1, Float32, sz[1], sz[0]).To(dt).T()
					}
					check(fmt.Sprintf("%s %v %dx%d %s", c.name, dt, sz[0], sz[1], layout), c.f, x, y, program.GroupStep, "fused")
				}
			}
		}
		// Reductions with 16-bit prologues and epilogues: one row region.
		for _, c := range []struct {
			name string
			f    func(x, y *Tensor) *Tensor
		}{
			{"tanh, sum over the last dim", func(x, _ *Tensor) *Tensor { return x.Tanh().Sum(-1) }},
			{"mul, max over dim 0, neg", func(x, y *Tensor) *Tensor { return x.Mul(y).Max(0).Neg() }},
			{"scale, sum over dim 0, relu", func(x, _ *Tensor) *Tensor { return x.MulScalar(0.5).Sum(0).ReLU() }},
		} {
			for _, sz := range [][2]int{{3, 1023}, {7, 4097}} {
				for _, transposed := range []bool{false, true} {
					x, y := Randn(1, Float32, sz[0], sz[1]).To(dt), Randn(2, Float32, sz[0], sz[1]).To(dt)
					if transposed {
						x = Randn(1, Float32, sz[1], sz[0]).To(dt).T()
					}
					check(fmt.Sprintf("%s %v %dx%d transposed %v", c.name, dt, sz[0], sz[1], transposed), c.f, x, y, program.RowStep, "row")
				}
			}
		}
	}
}

// A reduction over the last dim that drops it, followed by pointwise ops
// at the reduced shape (Var(-1).Sigmoid(), Sum(-1).Exp()), is one row
// region: the ops after the reduction run once per row in its kernel.
func TestInductorRowEpilogueAtDroppedShape(t *testing.T) {
	prog := captureBackend("inductor-dropped", program.Config{})
	for _, c := range []struct {
		name string
		f    func(x *Tensor) *Tensor
	}{
		{"var, sigmoid", func(x *Tensor) *Tensor { return x.Var([]int{-1}, 1, false).Sigmoid() }},
		{"sum, exp, scale", func(x *Tensor) *Tensor { return x.Sum(-1).Exp().MulScalar(0.5) }},
		{"max, neg", func(x *Tensor) *Tensor { return x.Max(-1).Neg() }},
	} {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16} {
			for _, shape := range [][]int{{3, 7}, {60, 25, 21, 10}, {5, 4097}} {
				x := Randn(4, Float32, shape...).To(dt)
				what := fmt.Sprintf("%s %v %v", c.name, dt, shape)
				// Within a few ulps: fused CPU code computes exp and the
				// sigmoid with ir.FastMath, GPU code may contract a*b+c.
				nearValues(t, what, Compile(c.f, WithBackend("inductor-dropped"))(x), c.f(x))
				if s := prog.steps(); len(s) != 1 || s[0].Kind != program.RowStep || s[0].Region.Row.Dims != nil {
					t.Fatalf("%s: %d steps, want one last-dim row kernel", what, len(s))
				}
			}
		}
	}
}

// A row region that reduces the same values twice (softmax's maximum and
// another maximum of the same scores) keeps them once on the CPU and gives
// eager's values: the second reduction used to read back a kept-values
// slot no stage had filled yet, and panicked.
func TestRowRegionSameReductionTwice(t *testing.T) {
	for _, dims := range [][]int{{-1}, {2}} {
		f := func(x *Tensor) *Tensor {
			s := x.MulScalar(0.25)
			blind := s.MaxKeepDim(dims...).EqScalar(math.Inf(-1))
			return s.Softmax(-1).MaskedFill(blind, 0)
		}
		x := Randn(1, Float32, 4, 3, 300)
		want := f(x)
		var got *Tensor
		if err := Try(func() { got = Compile(f)(x) }); err != nil {
			t.Fatalf("dims %v: %v", dims, err)
		}
		checkClose(t, fmt.Sprintf("dims %v", dims), got, Float32, want.Shape(), vals(want), 1)
	}
}
