package tensor

import (
	"math"
	"testing"
)

// fastMathInputs are random values of several scales and the float32 values
// where exp, log, erf and tanh change regime or saturate, with the special
// values.
func fastMathInputs() *Tensor {
	xs := Randn(7, Float32, 1<<16).MulScalar(3).Float32s()
	xs = append(xs, Randn(8, Float32, 1<<12).MulScalar(30).Float32s()...)
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 0x1p-126, -0x1p-127, math.MaxFloat32, -math.MaxFloat32,
		1e30, -1e30, 88.72283, 88.72284, -87.33655, -103.97208, -104, 3.9192059, -3.9192059, 9.010913, -9.010913,
		0.25, -0.25, 4, -4, 1e-7, -1e-7)
	return FromSlice(xs)
}

// fastMathClose reports the first element where a fused result got is not
// within FastMath's tolerance of the eager result want, for input x: equal
// NaNs, infinities and signed zeros, else |got - want| ≤ 8 ulps of want
// (the primitives' error bounds of 1 to 2 ulps carried through an op's few
// roundings: sigmoid, SiLU and GELU stay within 4 ulps, a product of two
// of them within 8) plus 2^-22·(1 + |x|) absolute, which covers the terms
// 1 + erf(x) and 1 + tanh(x) that cancel at negative x (GELU), where
// erf's absolute error, scaled by the factor x/2 in front, is what is left
// of the relative one. Eager kernels are within 0.5 ulp per primitive, so
// this is the distance between two results each within its own bound.
func fastMathClose(got, want, x []float32) (int, bool) {
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		switch {
		case g != g || w != w:
			if g == g || w == w {
				return i, false
			}
		case math.IsInf(g, 0) || math.IsInf(w, 0) || g == 0 && w == 0:
			if g != w || math.Signbit(g) != math.Signbit(w) {
				return i, false
			}
		default:
			ulp := 0x1p-149
			if a := math.Abs(w); a >= 0x1p-126 {
				_, e := math.Frexp(a)
				ulp = math.Ldexp(1, e-24)
			}
			if math.Abs(g-w) > 8*ulp+0x1p-22*(1+math.Abs(float64(x[i]))) {
				return i, false
			}
		}
	}
	return 0, true
}

// Fused float32 pointwise regions that the inductor backend compiles for
// the CPU compute exp, log, tanh and erf with ir.FastMath's float32
// approximations; eager kernels keep the exact path. Compiled results agree
// with eager ones within fastMathClose's tolerance, special values exactly.
func TestFusedFastMathMatchesEager(t *testing.T) {
	x := fastMathInputs()
	xs := x.Float32s()
	fns := []struct {
		name string
		f    func(x *Tensor) *Tensor
	}{
		{"chain", func(x *Tensor) *Tensor { return x.MulScalar(1.5).AddScalar(0.5).GELU().Mul(x.Sigmoid()) }},
		{"gelu", func(x *Tensor) *Tensor { return x.GELU().MulScalar(0.5) }},
		{"gelu tanh", func(x *Tensor) *Tensor { return x.GELUTanh().MulScalar(3) }},
		{"silu", func(x *Tensor) *Tensor { return x.SiLU().MulScalar(2) }},
		{"sigmoid", func(x *Tensor) *Tensor { return x.MulScalar(-1).Sigmoid() }},
		{"softplus", func(x *Tensor) *Tensor { return x.Exp().AddScalar(1).Log() }},
		{"tanh", func(x *Tensor) *Tensor { return x.MulScalar(0.5).Tanh().AddScalar(1) }},
		{"erf", func(x *Tensor) *Tensor { return x.MulScalar(0.25).Erf().Neg() }},
		{"exp log", func(x *Tensor) *Tensor { return x.Abs().Log().MulScalar(0.5).Exp() }},
	}
	for _, fn := range fns {
		t.Run(fn.name, func(t *testing.T) {
			got, want := Compile(fn.f, WithBackend("inductor"))(x), fn.f(x)
			if got.Device() != CPU {
				t.Skip("FastMath is the CPU's block evaluator")
			}
			g, w := got.Float32s(), want.Float32s()
			if i, ok := fastMathClose(g, w, xs); !ok {
				t.Fatalf("element %d, x = %v: compiled %v, eager %v", i, xs[i], g[i], w[i])
			}
			if fn.name == "chain" {
				differ := 0
				for i := range w {
					if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
						differ++
					}
				}
				if differ == 0 {
					t.Fatal("the compiled chain is eager bit for bit: its fused region does not use FastMath")
				}
			}
		})
	}
}
