package tensor

import (
	"math"
	"testing"

	"gocompile/ir"
)

// Type promotion, checked against tables transcribed from PyTorch
// (torch.promote_types, torch.result_type and the dtypes its ops return).

// torchPromote is torch.promote_types over the seven dtypes, row and column
// in the order bool, int32, int64, float16, bfloat16, float32, float64.
var torchPromote = [7][7]DType{
	/* bool     */ {Bool, Int32, Int64, Float16, BFloat16, Float32, Float64},
	/* int32    */ {Int32, Int32, Int64, Float16, BFloat16, Float32, Float64},
	/* int64    */ {Int64, Int64, Int64, Float16, BFloat16, Float32, Float64},
	/* float16  */ {Float16, Float16, Float16, Float16, Float32, Float32, Float64},
	/* bfloat16 */ {BFloat16, BFloat16, BFloat16, Float32, BFloat16, Float32, Float64},
	/* float32  */ {Float32, Float32, Float32, Float32, Float32, Float32, Float64},
	/* float64  */ {Float64, Float64, Float64, Float64, Float64, Float64, Float64},
}

var promoteOrder = []DType{Bool, Int32, Int64, Float16, BFloat16, Float32, Float64}

func TestPromoteTypes(t *testing.T) {
	for i, a := range promoteOrder {
		for j, b := range promoteOrder {
			if got, want := ir.PromoteTypes(a, b), torchPromote[i][j]; got != want {
				t.Errorf("PromoteTypes(%v, %v) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func dimT(dt DType) ir.Operand  { return ir.Operand{DType: dt} }
func zeroT(dt DType) ir.Operand { return ir.Operand{DType: dt, Rank0: true} }

var (
	intScalar   = ir.Operand{DType: Int64, Scalar: true}
	floatScalar = ir.Operand{DType: Float64, Scalar: true}
	boolScalar  = ir.Operand{DType: Bool, Scalar: true}
)

func TestResultType(t *testing.T) {
	cases := []struct {
		name string
		ops  []ir.Operand
		want DType
	}{
		// dimensioned tensors alone: promote_types
		{"bool+bool", []ir.Operand{dimT(Bool), dimT(Bool)}, Bool},
		{"bool+int32", []ir.Operand{dimT(Bool), dimT(Int32)}, Int32},
		{"int32+int64", []ir.Operand{dimT(Int32), dimT(Int64)}, Int64},
		{"int64+float16", []ir.Operand{dimT(Int64), dimT(Float16)}, Float16},
		{"int32+bfloat16", []ir.Operand{dimT(Int32), dimT(BFloat16)}, BFloat16},
		{"float16+bfloat16", []ir.Operand{dimT(Float16), dimT(BFloat16)}, Float32},
		{"float16+float32", []ir.Operand{dimT(Float16), dimT(Float32)}, Float32},
		{"float32+float64", []ir.Operand{dimT(Float32), dimT(Float64)}, Float64},
		{"three tensors", []ir.Operand{dimT(Bool), dimT(Int32), dimT(Float16)}, Float16},
		{"single tensor", []ir.Operand{dimT(Int32)}, Int32},

		// Python scalars only raise the category
		{"int32+int scalar", []ir.Operand{dimT(Int32), intScalar}, Int32},
		{"int64+int scalar", []ir.Operand{dimT(Int64), intScalar}, Int64},
		{"int32+float scalar", []ir.Operand{dimT(Int32), floatScalar}, Float32},
		{"int64+float scalar", []ir.Operand{dimT(Int64), floatScalar}, Float32},
		{"bool+int scalar", []ir.Operand{dimT(Bool), intScalar}, Int64},
		{"bool+float scalar", []ir.Operand{dimT(Bool), floatScalar}, Float32},
		{"bool+bool scalar", []ir.Operand{dimT(Bool), boolScalar}, Bool},
		{"int32+bool scalar", []ir.Operand{dimT(Int32), boolScalar}, Int32},
		{"float16+float scalar", []ir.Operand{dimT(Float16), floatScalar}, Float16},
		{"bfloat16+float scalar", []ir.Operand{dimT(BFloat16), floatScalar}, BFloat16},
		{"float16+int scalar", []ir.Operand{dimT(Float16), intScalar}, Float16},
		{"float32+float scalar", []ir.Operand{dimT(Float32), floatScalar}, Float32},
		{"float64+float scalar", []ir.Operand{dimT(Float64), floatScalar}, Float64},
		{"scalars only: int", []ir.Operand{intScalar, intScalar}, Int64},
		{"scalars only: int+float", []ir.Operand{intScalar, floatScalar}, Float32},
		{"scalars only: bool", []ir.Operand{boolScalar}, Bool},

		// zero-dim tensors count only when of a higher category, and then
		// with their own type (not the default float)
		{"float16 + float32 rank-0", []ir.Operand{dimT(Float16), zeroT(Float32)}, Float16},
		{"float32 + float64 rank-0", []ir.Operand{dimT(Float32), zeroT(Float64)}, Float32},
		{"int32 + int64 rank-0", []ir.Operand{dimT(Int32), zeroT(Int64)}, Int32},
		{"int32 + float64 rank-0", []ir.Operand{dimT(Int32), zeroT(Float64)}, Float64},
		{"int64 + float16 rank-0", []ir.Operand{dimT(Int64), zeroT(Float16)}, Float16},
		{"bool + int32 rank-0", []ir.Operand{dimT(Bool), zeroT(Int32)}, Int32},
		{"bfloat16 + float16 rank-0", []ir.Operand{dimT(BFloat16), zeroT(Float16)}, BFloat16},
		{"int32 + float16 and bfloat16 rank-0", []ir.Operand{dimT(Int32), zeroT(Float16), zeroT(BFloat16)}, Float32},
		{"rank-0 alone", []ir.Operand{zeroT(Int32), zeroT(Float16)}, Float16},
		{"rank-0 int64 + float scalar", []ir.Operand{zeroT(Int64), floatScalar}, Float32},
		{"rank-0 float16 + int32 + float scalar", []ir.Operand{dimT(Int32), zeroT(Float16), floatScalar}, Float16},
		{"int32 + bool rank-0 + float scalar", []ir.Operand{dimT(Int32), zeroT(Bool), floatScalar}, Float32},
		{"bool + int32 rank-0 + float scalar", []ir.Operand{dimT(Bool), zeroT(Int32), floatScalar}, Float32},
		{"float16 rank-0 + int scalar", []ir.Operand{zeroT(Float16), intScalar}, Float16},
	}
	for _, c := range cases {
		if got := ir.ResultType(c.ops...); got != c.want {
			t.Errorf("ResultType(%s) = %v, want %v", c.name, got, c.want)
		}
		// the order of operands does not matter
		rev := make([]ir.Operand, len(c.ops))
		for i, o := range c.ops {
			rev[len(rev)-1-i] = o
		}
		if got := ir.ResultType(rev...); got != c.want {
			t.Errorf("ResultType(%s, reversed) = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestOpResultTypes checks the dtypes tensor ops return.
func TestOpResultTypes(t *testing.T) {
	v := func(dt DType) *Tensor { return build([]float64{1, 2, 0}, dt, []int{3}) }
	r0 := func(dt DType) *Tensor { return build([]float64{2}, dt, []int{}) }
	mask := build([]float64{1, 0, 1}, Bool, []int{3})
	cases := []struct {
		name string
		f    func() *Tensor
		want DType
	}{
		{"Div(int32, int32)", func() *Tensor { return v(Int32).Div(v(Int32)) }, Float32},
		{"Div(int64, int64)", func() *Tensor { return v(Int64).Div(v(Int64)) }, Float32},
		{"Div(bool, bool)", func() *Tensor { return v(Bool).Div(v(Bool)) }, Float32},
		{"Div(int64, float16)", func() *Tensor { return v(Int64).Div(v(Float16)) }, Float16},
		{"Div(float16, float16)", func() *Tensor { return v(Float16).Div(v(Float16)) }, Float16},
		{"DivScalar(int32, 2)", func() *Tensor { return v(Int32).DivScalar(2) }, Float32},
		{"DivScalar(float64, 2)", func() *Tensor { return v(Float64).DivScalar(2) }, Float64},
		{"Exp(int32)", func() *Tensor { return v(Int32).Exp() }, Float32},
		{"Exp(int64)", func() *Tensor { return v(Int64).Exp() }, Float32},
		{"Exp(bool)", func() *Tensor { return v(Bool).Exp() }, Float32},
		{"Sqrt(int64)", func() *Tensor { return v(Int64).Sqrt() }, Float32},
		{"Sigmoid(int32)", func() *Tensor { return v(Int32).Sigmoid() }, Float32},
		{"Exp(bfloat16)", func() *Tensor { return v(BFloat16).Exp() }, BFloat16},
		{"Neg(int32)", func() *Tensor { return v(Int32).Neg() }, Int32},
		{"ReLU(int64)", func() *Tensor { return v(Int64).ReLU() }, Int64},
		{"Abs(float16)", func() *Tensor { return v(Float16).Abs() }, Float16},
		{"Add(int32, float16)", func() *Tensor { return v(Int32).Add(v(Float16)) }, Float16},
		{"Add(int32, int64)", func() *Tensor { return v(Int32).Add(v(Int64)) }, Int64},
		{"Add(float16, bfloat16)", func() *Tensor { return v(Float16).Add(v(BFloat16)) }, Float32},
		{"Add(bool, int32)", func() *Tensor { return v(Bool).Add(v(Int32)) }, Int32},
		{"Add(bool, bool)", func() *Tensor { return v(Bool).Add(v(Bool)) }, Bool},
		{"Mul(float16, float32)", func() *Tensor { return v(Float16).Mul(v(Float32)) }, Float32},
		{"Sub(bool, int64)", func() *Tensor { return v(Bool).Sub(v(Int64)) }, Int64},
		{"Pow(int32, float32)", func() *Tensor { return v(Int32).Pow(v(Float32)) }, Float32},
		{"Maximum(int32, bool)", func() *Tensor { return v(Int32).Maximum(v(Bool)) }, Int32},
		{"Add(int32, float64 rank-0)", func() *Tensor { return v(Int32).Add(r0(Float64)) }, Float64},
		{"Add(float16, float32 rank-0)", func() *Tensor { return v(Float16).Add(r0(Float32)) }, Float16},
		{"Add(int32, int64 rank-0)", func() *Tensor { return v(Int32).Add(r0(Int64)) }, Int32},
		{"Add(float32 rank-0, int64 rank-0)", func() *Tensor { return r0(Float32).Add(r0(Int64)) }, Float32},
		{"Add(float64 rank-0, float32 rank-0)", func() *Tensor { return r0(Float64).Add(r0(Float32)) }, Float64},
		{"AddScalar(int32, 2)", func() *Tensor { return v(Int32).AddScalar(2) }, Int32},
		{"AddScalar(int32, 2.5)", func() *Tensor { return v(Int32).AddScalar(2.5) }, Float32},
		{"AddScalar(bool, 1)", func() *Tensor { return v(Bool).AddScalar(1) }, Int64},
		{"AddScalar(bool, 0.5)", func() *Tensor { return v(Bool).AddScalar(0.5) }, Float32},
		{"SubScalar(bool, 1)", func() *Tensor { return v(Bool).SubScalar(1) }, Int64},
		{"MulScalar(float16, 2.5)", func() *Tensor { return v(Float16).MulScalar(2.5) }, Float16},
		{"MulScalar(bfloat16, 3)", func() *Tensor { return v(BFloat16).MulScalar(3) }, BFloat16},
		{"PowScalar(int64, 2)", func() *Tensor { return v(Int64).PowScalar(2) }, Int64},
		{"PowScalar(int64, 0.5)", func() *Tensor { return v(Int64).PowScalar(0.5) }, Float32},
		{"AddScalar(int64, +Inf)", func() *Tensor { return v(Int64).AddScalar(math.Inf(1)) }, Float32},
		{"Eq(int32, float16)", func() *Tensor { return v(Int32).Eq(v(Float16)) }, Bool},
		{"Lt(float64, float64)", func() *Tensor { return v(Float64).Lt(v(Float64)) }, Bool},
		{"GeScalar(int32, 0.5)", func() *Tensor { return v(Int32).GeScalar(0.5) }, Bool},
		{"LogicalNot(float32)", func() *Tensor { return v(Float32).LogicalNot() }, Bool},
		{"LogicalOr(int64, float16)", func() *Tensor { return v(Int64).LogicalOr(v(Float16)) }, Bool},
		{"Where(bool, int32, float16)", func() *Tensor { return Where(mask, v(Int32), v(Float16)) }, Float16},
		{"Where(bool, int32, int64)", func() *Tensor { return Where(mask, v(Int32), v(Int64)) }, Int64},
		{"Where(bool, bool, bool)", func() *Tensor { return Where(mask, v(Bool), v(Bool)) }, Bool},
		{"MaskedFill(int32, 2.5)", func() *Tensor { return v(Int32).MaskedFill(mask, 2.5) }, Int32},
		{"MaskedFill(float16, 1)", func() *Tensor { return v(Float16).MaskedFill(mask, 1) }, Float16},
		{"Clamp(int32, -1, 2)", func() *Tensor { return v(Int32).Clamp(-1, 2) }, Int32},
		{"Clamp(int32, -1.5, 2)", func() *Tensor { return v(Int32).Clamp(-1.5, 2) }, Float32},
		{"Clamp(int32, -Inf, 0.5)", func() *Tensor { return v(Int32).Clamp(math.Inf(-1), 0.5) }, Float32},
		{"Clamp(float16, -0.5, 0.5)", func() *Tensor { return v(Float16).Clamp(-0.5, 0.5) }, Float16},
		{"Sum(int32)", func() *Tensor { return v(Int32).Sum() }, Int64},
		{"Sum(bool)", func() *Tensor { return v(Bool).Sum() }, Int64},
		{"Sum(float16)", func() *Tensor { return v(Float16).Sum() }, Float16},
	}
	for _, c := range cases {
		var got *Tensor
		if err := Try(func() { got = c.f() }); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.DType() != c.want {
			t.Errorf("%s: dtype %v, want %v", c.name, got.DType(), c.want)
		}
	}

	// values follow the promoted type
	checkClose(t, "Add(int32, float16)", v(Int32).Add(build([]float64{0.5, -0.25, 1.5}, Float16, []int{3})), Float16, []int{3},
		[]float64{1.5, 1.75, 1.5}, 0)
	checkClose(t, "Div(int32, int32)", build([]float64{7, -7, 1}, Int32, []int{3}).Div(build([]float64{2, 2, 3}, Int32, []int{3})),
		Float32, []int{3}, []float64{3.5, -3.5, 1.0 / 3}, 0)
	checkClose(t, "AddScalar(int32, 2.5)", v(Int32).AddScalar(2.5), Float32, []int{3}, []float64{3.5, 4.5, 2.5}, 0)
	checkClose(t, "AddScalar(bool, 1)", v(Bool).AddScalar(1), Int64, []int{3}, []float64{2, 2, 1}, 0)
	checkClose(t, "Add(int32, float64 rank-0)", v(Int32).Add(build([]float64{0.1}, Float64, []int{})), Float64, []int{3},
		[]float64{1.1, 2.1, 0.1}, 0)
	// float16 + a float32 rank-0 tensor computes in float16's compute type
	// and rounds to float16
	checkClose(t, "Add(float16, float32 rank-0)", v(Float16).Add(build([]float64{1e-4}, Float32, []int{})), Float16, []int{3},
		[]float64{1 + 1e-4, 2 + 1e-4, 1e-4}, 0)
	checkInts(t, "Sum(int32) does not wrap", buildInts([]int64{1 << 30, 1 << 30, 1 << 30}, Int32, []int{3}).Sum(), Int64,
		[]int{}, []int64{3 << 30})

	// ops that reject the promoted type
	for name, f := range map[string]func(){
		"Sub(bool, bool)":    func() { v(Bool).Sub(v(Bool)) },
		"Neg(bool)":          func() { v(Bool).Neg() },
		"GELU(int64)":        func() { v(Int64).GELU() },
		"SiLU(int32)":        func() { v(Int32).SiLU() },
		"GELUTanh(bool)":     func() { v(Bool).GELUTanh() },
		"Mean(int32)":        func() { v(Int32).Mean() },
		"ReLU(bool)":         func() { v(Bool).ReLU() },
		"Abs(bool)":          func() { v(Bool).Abs() },
		"To(invalid)":        func() { v(Float32).To(ir.Invalid) },
		"Where(int32 cond)":  func() { Where(v(Int32), v(Float32), v(Float32)) },
		"MaskedFill(f mask)": func() { v(Float32).MaskedFill(v(Float32), 1) },
	} {
		expectError(t, name, f)
	}
}
