package ir

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"testing"
)

// fastFuncs are the fast float32 functions with their float64 references
// and the error bound each is documented to keep (fastmath.go).
var fastFuncs = []struct {
	name  string
	fast  func(d, a []float32, ar around)
	ref   func(float64) float64
	bound float64 // ulps
	dense [2]float32
}{
	{"exp", expF32, math.Exp, 1, [2]float32{-104, 89}},
	{"log", logF32, math.Log, 1, [2]float32{0.25, 4}},
	{"erf", erfF32, math.Erf, 2, [2]float32{0, 4}},
	{"tanh", tanhF32, math.Tanh, 2, [2]float32{0, 9.25}},
}

// ulps is the error of got against the reference value ref in float32 ulps
// of ref (the ulp of the subnormals below 2^-126). Infinities, NaNs and
// zeros must match exactly, zeros with their sign; a mismatch is +Inf.
func ulps(got float32, ref float64) float64 {
	g := float64(got)
	want := float32(ref) // correctly rounded: float64 to float32 rounds once
	switch {
	case math.IsNaN(ref) || math.IsNaN(g):
		if math.IsNaN(ref) && math.IsNaN(g) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(float64(want), 0) || math.IsInf(g, 0) || want == 0 && ref == 0:
		if got == want && math.Signbit(g) == math.Signbit(float64(want)) {
			return 0
		}
		return math.Inf(1)
	}
	u := 0x1p-149
	if a := math.Abs(ref); a >= 0x1p-126 {
		_, e := math.Frexp(a)
		u = math.Ldexp(1, e-24)
	}
	return math.Abs(g-ref) / u
}

// fastSpecials are inputs every function is checked on.
var fastSpecials = []float32{
	0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 0x1p-126, -0x1p-126, 0x1p-127, 0x1.fffffcp-127,
	math.MaxFloat32, -math.MaxFloat32, 1, -1, 0.5, 2, 1e-7, -1e-7, 88.72283, 88.72284, 89, -87.33655,
	-103.27893, -103.97207, -103.97208, -104, -105, erfOne, -erfOne, 3.9192057, tanhOne, -tanhOne,
	9.010913, 0.25, 0.5, 0.75, 3.75, 4, 9, 9.25, 0.70710677, 1.4142135, 1.4142137,
}

type fastWorst struct {
	x    float32
	ulps float64
	got  float32
	ref  float64
}

// checkFast runs f over xs and returns the worst error.
func checkFast(fast func(d, a []float32, ar around), ref func(float64) float64, xs []float32, buf []float32) fastWorst {
	var w fastWorst
	d := buf[:len(xs)]
	fast(d, xs, noAround)
	for i, x := range xs {
		r := ref(float64(x))
		if e := ulps(d[i], r); e > w.ulps || math.IsNaN(e) {
			w = fastWorst{x, e, d[i], r}
		}
	}
	return w
}

// sweepBits checks f on the float32 values whose bits run from lo to hi
// (inclusive) in steps of stride, in parallel, and returns the worst error.
func sweepBits(fast func(d, a []float32, ar around), ref func(float64) float64, lo, hi, stride uint64) fastWorst {
	const chunk = 1 << 12
	workers := runtime.GOMAXPROCS(0)
	results := make([]fastWorst, workers)
	span := (hi - lo) / stride / uint64(workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := lo + uint64(w)*span*stride
			to := hi
			if w < workers-1 {
				to = from + span*stride - 1
			}
			xs, buf := make([]float32, 0, chunk), make([]float32, chunk)
			for b := from; b <= to; b += stride {
				xs = append(xs, math.Float32frombits(uint32(b)))
				if len(xs) == chunk || b+stride > to {
					if r := checkFast(fast, ref, xs, buf); r.ulps > results[w].ulps {
						results[w] = r
					}
					xs = xs[:0]
				}
			}
		}()
	}
	wg.Wait()
	var worst fastWorst
	for _, r := range results {
		if r.ulps > worst.ulps {
			worst = r
		}
	}
	return worst
}

// TestFastMath checks each fast function against its float64 reference on
// the special values, on every 4093rd float32 (all binades of both signs,
// subnormals and the ends of the range included), and on about 4M evenly
// spaced float32 of each sign in the range where the function's
// approximations change (dense).
func TestFastMath(t *testing.T) {
	// With -short (the race detector's run) the sweeps take 16 times
	// larger steps: their goroutines are the test's own, not the
	// package's. The run without -short checks every input above.
	density := uint64(1)
	if testing.Short() {
		density = 16
	}
	for _, f := range fastFuncs {
		t.Run(f.name, func(t *testing.T) {
			w := checkFast(f.fast, f.ref, fastSpecials, make([]float32, len(fastSpecials)))
			report := func(what string, w fastWorst) {
				t.Helper()
				if w.ulps > f.bound {
					t.Errorf("%s: %s(%v) [%#x] = %v, want %v: %.3g ulps, bound %v",
						what, f.name, w.x, math.Float32bits(w.x), w.got, w.ref, w.ulps, f.bound)
				}
			}
			report("specials", w)
			report("all binades", sweepBits(f.fast, f.ref, 0, math.MaxUint32, 4093*density|1))
			dense := func(what string, lo, hi uint64) {
				t.Helper()
				report(what, sweepBits(f.fast, f.ref, lo, hi, max(1, density*(hi-lo)>>22)|1))
			}
			lo, hi := uint64(math.Float32bits(f.dense[0])), uint64(math.Float32bits(f.dense[1]))
			if f.dense[0] < 0 { // a range across 0: each sign on its own
				dense("dense", 0, hi)
				dense("dense negative", 1<<31, lo)
			} else {
				dense("dense", lo, hi)
				dense("dense negative", lo|1<<31, hi|1<<31)
			}
		})
	}
}

// TestFastMathExhaustive checks every float32 input (2^32 per function;
// minutes). It runs when GOCOMPILE_FASTMATH_EXHAUSTIVE is set.
func TestFastMathExhaustive(t *testing.T) {
	if os.Getenv("GOCOMPILE_FASTMATH_EXHAUSTIVE") == "" {
		t.Skip("set GOCOMPILE_FASTMATH_EXHAUSTIVE=1 to check every float32 input")
	}
	for _, f := range fastFuncs {
		w := sweepBits(f.fast, f.ref, 0, math.MaxUint32, 1)
		msg := fmt.Sprintf("%s: worst %.4f ulps at %v [%#x] (got %v, want %v)", f.name, w.ulps, w.x, math.Float32bits(w.x), w.got, w.ref)
		t.Log(msg)
		if w.ulps > f.bound {
			t.Errorf("%s; bound %v", msg, f.bound)
		}
	}
}

// fastOps are the registry ops whose float32 loops FastMath changes, with
// the instructions their FastMath block runs once foldAround has folded
// the scalar steps around exp, erf and tanh.
var fastOps = []struct {
	name   string
	instrs int
}{
	{"exp", 1}, {"log", 1}, {"tanh", 1}, {"erf", 1},
	{"sigmoid", 1},   // 1/(1 + exp(-x))
	{"silu", 2},      // x · sigmoid(x)
	{"gelu", 3},      // (0.5·x) · (1 + erf(x·√½))
	{"gelu_tanh", 7}, // the cubic stays, tanh folds its scale and the 1 +
}

// fastInputs are the inputs the block tests run on: the special values,
// every 65537th float32 and a fine grid over [-20, 20].
func fastInputs() []float32 {
	xs := append([]float32(nil), fastSpecials...)
	for b := uint64(0); b <= math.MaxUint32; b += 65537 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	for x := float32(-20); x <= 20; x += 1.0 / 512 {
		xs = append(xs, x)
	}
	return xs
}

// runBlock32 runs blk over xs, with 1.75 for a scalar parameter.
func runBlock32(t *testing.T, blk *Block, xs []float32) []float32 {
	t.Helper()
	f := blk.NewFrame(len(xs), []float64{1.75})
	f.SetArg(0, Vec{F32: xs})
	return append([]float32(nil), f.Run(len(xs), nil).F32...)
}

// A FastMath block keeps the accuracy contract of FastMath: the primitives
// within their bounds of the exact values, the ops built from them within
// 4 ulps of the exact path's result, or, where the GELUs' 1 + erf(…) and
// 1 + tanh(…) cancel, within |x|·2^-24 (erf's and tanh's bound of 2 ulps
// of 1, scaled by x/2); the same specials; and without FastMath, or in
// float64, the exact path bit for bit.
func TestFastMathBlock(t *testing.T) {
	xs := fastInputs()
	for _, o := range fastOps {
		t.Run(o.name, func(t *testing.T) {
			op, ok := Lookup(o.name)
			if !ok {
				t.Fatalf("no op %s", o.name)
			}
			exactBlk, err := CompileBlock(op.Expr, []Kind{F32}, F32)
			if err != nil {
				t.Fatal(err)
			}
			fastBlk, err := CompileBlock(op.Expr, []Kind{F32}, F32, FastMath())
			if err != nil {
				t.Fatal(err)
			}
			if len(fastBlk.code) != o.instrs {
				t.Errorf("FastMath block runs %d instructions, want %d", len(fastBlk.code), o.instrs)
			}
			exact, fast := runBlock32(t, exactBlk, xs), runBlock32(t, fastBlk, xs)
			for i, x := range xs {
				e, f := float64(exact[i]), float64(fast[i])
				if e == f && math.Signbit(e) == math.Signbit(f) || e != e && f != f {
					continue
				}
				if e != e || f != f || math.IsInf(e, 0) || math.IsInf(f, 0) || e == 0 && f == 0 ||
					ulps(fast[i], e) > 4 && math.Abs(e-f) > math.Abs(float64(x))*0x1p-24 {
					t.Fatalf("%s(%v) = %v, exact path %v", o.name, x, f, e)
				}
			}
			for _, f := range fastFuncs {
				if f.name != o.name {
					continue
				}
				for i, x := range xs {
					if e := ulps(fast[i], f.ref(float64(x))); e > f.bound {
						t.Fatalf("%s(%v) = %v: %.3g ulps, bound %v", o.name, x, fast[i], e, f.bound)
					}
					if want := float32(f.ref(float64(x))); exact[i] != want && !(want != want && exact[i] != exact[i]) {
						t.Fatalf("exact path: %s(%v) = %v, want %v", o.name, x, exact[i], want)
					}
				}
			}
			// float64 blocks are exact with or without FastMath.
			x64 := make([]float64, len(xs))
			for i, x := range xs {
				x64[i] = float64(x) * 1.25
			}
			var r64 [2][]float64
			for k, opts := range [][]BlockOption{nil, {FastMath()}} {
				blk, err := CompileBlock(op.Expr, []Kind{F64}, F64, opts...)
				if err != nil {
					t.Fatal(err)
				}
				f := blk.NewFrame(len(x64), nil)
				f.SetArg(0, Vec{F64: x64})
				r64[k] = append([]float64(nil), f.Run(len(x64), nil).F64...)
			}
			for i := range x64 {
				if math.Float64bits(r64[0][i]) != math.Float64bits(r64[1][i]) && !(r64[0][i] != r64[0][i] && r64[1][i] != r64[1][i]) {
					t.Fatalf("float64 %s(%v): %v with FastMath, %v without", o.name, x64[i], r64[1][i], r64[0][i])
				}
			}
		})
	}
}

// Folding the scalar steps around a FastMath loop changes no bit: each op
// gives what the unfolded FastMath loops give, primitive by primitive.
func TestFoldAroundExact(t *testing.T) {
	xs := fastInputs()
	neg, erf := Neg(Arg(0)), Erf(Arg(0))
	cases := map[string]struct {
		e      *Expr
		instrs int // once folded
	}{
		"scaled exp":      {Exp(Mul(Arg(0), Const(-0.75))), 1},
		"exp of neg":      {Exp(Neg(Arg(0))), 1},
		"const first":     {Add(Const(2.5), Tanh(Mul(Const(3), Arg(0)))), 1},
		"recip of sum":    {Recip(Add(Log(Arg(0)), Const(1))), 1},
		"recip alone":     {Recip(Exp(Arg(0))), 2}, // only after an addition
		"sum is the out":  {Add(Exp(Recip(Arg(0))), Const(1)), 2},
		"shared operand":  {Mul(Exp(neg), neg), 3}, // neg is read twice: not folded
		"shared result":   {Add(erf, Mul(erf, erf)), 3},
		"sum not literal": {Recip(Add(Exp(Arg(0)), Arg(0))), 3},
		"param scale":     {Exp(Mul(Arg(0), Param(0))), 2}, // parameters vary per frame
		"chain":           {Mul(Mul(Mul(Const(0.5), Arg(0)), Add(Const(1), Erf(Mul(Arg(0), Const(math.Sqrt2/2))))), Recip(Add(Const(1), Exp(Neg(Arg(0)))))), 5},
	}
	for _, o := range fastOps {
		op, _ := Lookup(o.name)
		cases[o.name] = struct {
			e      *Expr
			instrs int
		}{op.Expr, o.instrs}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := c.e
			folded, err := CompileBlock(e, []Kind{F32}, F32, FastMath())
			if err != nil {
				t.Fatal(err)
			}
			// The same block without folding: each F32 transcendental on
			// its own FastMath loop.
			unfolded, err := CompileBlock(e, []Kind{F32}, F32)
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range unfolded.code {
				if in.kind == F32 && fastLoops[in.p] != nil {
					unfolded.code[i].f32, unfolded.code[i].ar = fastLoops[in.p], noAround
				}
			}
			if len(folded.code) != c.instrs {
				t.Errorf("folded block runs %d instructions, want %d", len(folded.code), c.instrs)
			}
			got, want := runBlock32(t, folded, xs), runBlock32(t, unfolded, xs)
			for i := range xs {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%s(%v): folded %v, unfolded %v", name, xs[i], got[i], want[i])
				}
			}
		})
	}
}
