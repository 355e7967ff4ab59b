package ir

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// Every registry entry is complete, and every pointwise entry compiles for
// every dtype its type rule accepts, both as a block program and as C.
func TestRegistryEntriesComplete(t *testing.T) {
	ops := Ops()
	if len(ops) < 50 {
		t.Fatalf("registry holds %d ops, expected the whole eager core", len(ops))
	}
	for _, op := range ops {
		if op.Title == "" || op.Doc == "" {
			t.Errorf("%s: missing Title or Doc", op.Name)
		}
		switch op.Kind {
		case Pointwise:
			if op.Expr == nil {
				t.Errorf("%s: pointwise without Expr", op.Name)
			}
		case View:
			if op.View == nil {
				t.Errorf("%s: view without rule", op.Name)
			}
		case Extern:
			if op.Shape == nil {
				t.Errorf("%s: extern without shape rule", op.Name)
			}
		case Composite:
			if op.Decompose == nil {
				t.Errorf("%s: composite without decomposition", op.Name)
			}
		}
		if op.Kind != Pointwise {
			continue
		}
		for _, dt := range DTypes {
			operands := make([]Operand, max(op.Arity, 1))
			for i := range operands {
				operands[i] = Operand{DType: dt}
				if contains(op.Masks, i) {
					operands[i].DType = Bool
				}
			}
			compute, _, err := op.Types(operands, &Attrs{DType: Float32})
			if err != nil {
				continue // the rule rejects this dtype; tensor tests check the error
			}
			kinds := make([]Kind, len(operands))
			for i := range kinds {
				kinds[i] = compute.Compute()
				if contains(op.Masks, i) {
					kinds[i] = I64
				}
			}
			if _, err := CompileBlock(op.Expr, kinds, compute.Compute()); err != nil {
				t.Errorf("%s on %v: block: %v", op.Name, dt, err)
			}
			name := func(i int) string { return "v" + string(rune('0'+i)) }
			c, err := op.Expr.C(name, name, kinds, compute.Compute())
			if err != nil || c == "" {
				t.Errorf("%s on %v: C: %q, %v", op.Name, dt, c, err)
			}
		}
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering add twice did not panic")
		}
	}()
	Register(&Op{Name: "add", Kind: Pointwise, Expr: Arg(0)})
}

func TestTypeRules(t *testing.T) {
	i32, f16 := Operand{DType: Int32}, Operand{DType: Float16}
	b := Operand{DType: Bool}
	tests := []struct {
		op       *Op
		in       []Operand
		compute  DType
		out      DType
		errMatch string
	}{
		{OpAdd, []Operand{i32, f16}, Float16, Float16, ""},
		{OpDiv, []Operand{i32, i32}, Float32, Float32, ""},
		{OpExp, []Operand{b}, Float32, Float32, ""},
		{OpSub, []Operand{b, b}, 0, 0, "bool"},
		{OpGELU, []Operand{i32}, 0, 0, "floating"},
		{OpLt, []Operand{i32, f16}, Float16, Bool, ""},
		{OpWhere, []Operand{b, i32, f16}, Float16, Float16, ""},
		{OpWhere, []Operand{i32, i32, i32}, 0, 0, "mask"},
		{OpSum, []Operand{b}, Int64, Int64, ""},
		{OpArgMax, []Operand{f16}, Float16, Int64, ""},
		{OpGather, []Operand{f16, {DType: Float32}}, 0, 0, "indices"},
		{OpMaskedFill, []Operand{i32, b}, Int32, Int32, ""},
		{OpEmbedding, []Operand{{DType: Int64}, f16}, Float16, Float16, ""}, // indices come first
	}
	for _, tc := range tests {
		c, o, err := tc.op.Types(tc.in, &Attrs{})
		if tc.errMatch != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
				t.Errorf("%s%v: error %v, want one mentioning %q", tc.op.Name, tc.in, err, tc.errMatch)
			}
			continue
		}
		if err != nil || c != tc.compute || o != tc.out {
			t.Errorf("%s%v = %v, %v, %v; want %v, %v", tc.op.Name, tc.in, c, o, err, tc.compute, tc.out)
		}
	}
}

// Each primitive's Go loop against the float64 math it stands for.
func TestPrimitiveLoops(t *testing.T) {
	xs := []float64{-2.5, -1, -0.25, 0, 0.5, 1, 3}
	ys := []float64{1.5, -1, 2, 0.5, -3, 1, 3}
	tests := []struct {
		e   *Expr
		ref func(x, y float64) float64
	}{
		{Neg(Arg(0)), func(x, _ float64) float64 { return -x }},
		{Abs(Arg(0)), func(x, _ float64) float64 { return math.Abs(x) }},
		{Recip(Arg(1)), func(_, y float64) float64 { return 1 / y }},
		{Exp(Arg(0)), func(x, _ float64) float64 { return math.Exp(x) }},
		{Log(Abs(Arg(0))), func(x, _ float64) float64 { return math.Log(math.Abs(x)) }},
		{Sqrt(Abs(Arg(0))), func(x, _ float64) float64 { return math.Sqrt(math.Abs(x)) }},
		{Rsqrt(Abs(Arg(1))), func(_, y float64) float64 { return 1 / math.Sqrt(math.Abs(y)) }},
		{Sin(Arg(0)), func(x, _ float64) float64 { return math.Sin(x) }},
		{Cos(Arg(0)), func(x, _ float64) float64 { return math.Cos(x) }},
		{Tanh(Arg(0)), func(x, _ float64) float64 { return math.Tanh(x) }},
		{Erf(Arg(0)), func(x, _ float64) float64 { return math.Erf(x) }},
		{Add(Arg(0), Arg(1)), func(x, y float64) float64 { return x + y }},
		{Sub(Arg(0), Arg(1)), func(x, y float64) float64 { return x - y }},
		{Mul(Arg(0), Arg(1)), func(x, y float64) float64 { return x * y }},
		{Div(Arg(0), Arg(1)), func(x, y float64) float64 { return x / y }},
		{Pow(Abs(Arg(0)), Arg(1)), func(x, y float64) float64 { return math.Pow(math.Abs(x), y) }},
		{Max(Arg(0), Arg(1)), func(x, y float64) float64 { return math.Max(x, y) }},
		{Min(Arg(0), Arg(1)), func(x, y float64) float64 { return math.Min(x, y) }},
		{Where(Lt(Arg(0), Arg(1)), Arg(0), Const(7)), func(x, y float64) float64 {
			if x < y {
				return x
			}
			return 7
		}},
		{Where(Or(Ge(Arg(0), Arg(1)), Not(Ne(Arg(0), Const(0)))), Const(1), Param(0)), func(x, y float64) float64 {
			if x >= y || x == 0 {
				return 1
			}
			return -9
		}},
	}
	for _, tc := range tests {
		for _, k := range []Kind{F32, F64} {
			blk, err := CompileBlock(tc.e, []Kind{k, k}, k)
			if err != nil {
				t.Fatalf("%v: %v", tc.e, err)
			}
			f := blk.NewFrame(len(xs), []float64{-9})
			if k == F32 {
				a, b := make([]float32, len(xs)), make([]float32, len(xs))
				for i := range xs {
					a[i], b[i] = float32(xs[i]), float32(ys[i])
				}
				f.SetArg(0, Vec{F32: a})
				f.SetArg(1, Vec{F32: b})
			} else {
				f.SetArg(0, Vec{F64: xs})
				f.SetArg(1, Vec{F64: ys})
			}
			got := f.Run(len(xs), nil)
			for i := range xs {
				want := tc.ref(xs[i], ys[i])
				var g, tol float64
				if k == F32 {
					g, tol = float64(got.F32[i]), 1e-6*math.Max(1, math.Abs(want))
				} else {
					g, tol = got.F64[i], 1e-15*math.Max(1, math.Abs(want))
				}
				if math.Abs(g-want) > tol {
					t.Errorf("%v %v at (%g, %g) = %g, want %g", k, tc.e, xs[i], ys[i], g, want)
				}
			}
		}
	}
}

func TestIntegerPrimitives(t *testing.T) {
	tests := []struct {
		e    *Expr
		a, b []int64
		want []int64
	}{
		{Pow(Arg(0), Arg(1)), []int64{2, -2, 3, 1, -1, 5}, []int64{10, 3, 0, -4, -3, -1}, []int64{1024, -8, 1, 1, -1, 0}},
		{Max(Arg(0), Arg(1)), []int64{1, -5}, []int64{0, -2}, []int64{1, -2}},
		{Abs(Sub(Arg(0), Arg(1))), []int64{1, -5}, []int64{4, 2}, []int64{3, 7}},
		{Mul(Arg(0), Arg(1)), []int64{math.MaxInt64, 3}, []int64{2, -3}, []int64{-2, -9}},
		{Where(Eq(Arg(0), Arg(1)), Const(1), Neg(Arg(1))), []int64{1, 2}, []int64{1, 3}, []int64{1, -3}},
	}
	for _, tc := range tests {
		blk, err := CompileBlock(tc.e, []Kind{I64, I64}, I64)
		if err != nil {
			t.Fatal(err)
		}
		f := blk.NewFrame(len(tc.a), nil)
		f.SetArg(0, Vec{I64: tc.a})
		f.SetArg(1, Vec{I64: tc.b})
		got := f.Run(len(tc.a), nil).I64
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Errorf("%v at %d: %d, want %d", tc.e, i, got[i], tc.want[i])
			}
		}
	}
}

func TestCompileBlockRejectsIllTyped(t *testing.T) {
	if _, err := CompileBlock(Exp(Arg(0)), []Kind{I64}, I64); err == nil {
		t.Error("exp of an integer operand compiled")
	}
	if _, err := CompileBlock(Add(Arg(0), Arg(1)), []Kind{F32, F64}, F32); err == nil {
		t.Error("mixed-kind add compiled")
	}
	if _, err := CompileBlock(Add(Arg(0), Arg(2)), []Kind{F32, F32}, F32); err == nil {
		t.Error("reference to a missing operand compiled")
	}
}

func TestHalfConversions(t *testing.T) {
	tests := []struct {
		f      float32
		f16    uint16
		bf16   uint16
		backBF float32
	}{
		{1, 0x3c00, 0x3f80, 1},
		{-2, 0xc000, 0xc000, -2},
		{65504, 0x7bff, 0x4780, 65536}, // low half 0xe000 rounds up
		{1e6, 0x7c00, 0x4974, 999424},  // beyond half: +Inf
		{float32(math.Inf(-1)), 0xfc00, 0xff80, float32(math.Inf(-1))},
		{1.00390625, 0x3c04, 0x3f80, 1},                        // bf16 ties to even
		{5.960464477539063e-08, 0x0001, 0x3380, 5.9604645e-08}, // smallest half subnormal
	}
	for _, tc := range tests {
		if got := F32ToF16(tc.f); got != tc.f16 {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", tc.f, got, tc.f16)
		}
		if got := F32ToBF16(tc.f); got != tc.bf16 {
			t.Errorf("F32ToBF16(%g) = %#04x, want %#04x", tc.f, got, tc.bf16)
		}
		if got := BF16ToF32(tc.bf16); got != tc.backBF {
			t.Errorf("BF16ToF32(%#04x) = %g, want %g", tc.bf16, got, tc.backBF)
		}
	}
	if v := BF16ToF32(F32ToBF16(float32(math.NaN()))); v == v {
		t.Error("bfloat16 NaN did not stay NaN")
	}
	for h := range 1 << 16 { // every half value round-trips
		f := F16ToF32(uint16(h))
		if f != f {
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f, back)
		}
	}
}

func TestCastPrimitive(t *testing.T) {
	e := Add(Cast(Arg(0), I64), Cast(Lt(Arg(0), Const(0)), I64)) // trunc(x) + (x < 0)
	blk, err := CompileBlock(e, []Kind{F32}, I64)
	if err != nil {
		t.Fatal(err)
	}
	f := blk.NewFrame(4, nil)
	f.SetArg(0, Vec{F32: []float32{2.7, -2.7, 0, 5}})
	got := f.Run(4, nil).I64
	if want := []int64{2, -1, 0, 5}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	c, err := Cast(Mul(Arg(0), Const(2)), F64).C(func(int) string { return "x" }, nil, []Kind{F32}, F32)
	if err != nil || c != "((double)((x * 2.0f)))" {
		t.Fatalf("C: %q %v", c, err)
	}
}
