package ir

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector loops of float32 arithmetic give floatLoop's bits, on every
// length, with specials and subnormals among the operands.
func TestVectorArithSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	value := func() float32 {
		if rng.IntN(8) == 0 {
			return fastSpecials[rng.IntN(len(fastSpecials))]
		}
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10)))
	}
	for _, p := range []Prim{PAdd, PSub, PMul, PDiv} {
		for range 300 {
			n := rng.IntN(100)
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = value(), value()
			}
			got, want := make([]float32, n), make([]float32, n)
			if !vecF32(p, got, a, b, 0) {
				floatLoop(p, got, a, b)
			}
			floatLoop(p, want, a, b)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%v(%v, %v), element %d of %d: %v, want %v", p, a[i], b[i], i, n, got[i], want[i])
				}
			}
		}
	}
}

// A program reading an operand through SetUniform computes what it
// computes from a block of copies of the value, bit for bit, whatever
// reads it: arithmetic on either side, transcendentals (exact and
// FastMath), casts, comparisons, selections, literals, and programs that
// compute nothing or only from uniform values.
func TestUniformOperandSameBits(t *testing.T) {
	x, s, u := Arg(0), Arg(1), Arg(2)
	exprs := []*Expr{
		Sub(x, s), Sub(s, x), Div(Exp(Sub(x, s)), u), Div(s, x),
		Add(Mul(Mul(Sub(x, s), u), Const(1.5)), Const(-2)), // a layer norm's root
		Mul(x, Rsqrt(Add(s, Const(1e-5)))),                 // only uniform under the rsqrt
		Where(Gt(x, s), Exp(s), Log(Abs(x))),
		Max(x, s), Min(s, x), Pow(s, x),
		Cast(Mul(Cast(s, F64), Cast(x, F64)), F32),
		Add(s, u),                         // uniform result
		s,                                 // computes nothing
		Recip(Add(Const(1), Exp(Neg(s)))), // sigmoid of a uniform, folded with FastMath
		Add(Recip(Add(Const(1), Exp(Neg(x)))), s),
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for ei, e := range exprs {
		for _, k := range []Kind{F32, F64} {
			for _, fast := range []bool{false, true} {
				var opts []BlockOption
				if fast {
					opts = append(opts, FastMath())
				}
				blk, err := CompileBlock(e, []Kind{k, k, k}, k, opts...)
				if err != nil {
					t.Fatal(err)
				}
				const capacity = 300
				uf, ff := blk.NewFrame(capacity, nil), blk.NewFrame(capacity, nil)
				for trial := range 6 {
					n := 1 + rng.IntN(capacity)
					xs, sv, uv := NewVec(k, n), NewVec(k, 1), NewVec(k, 1)
					sb, ub := NewVec(k, n), NewVec(k, n)
					for i := range n {
						setF(xs, k, i, rng.NormFloat64()*3)
					}
					setF(sv, k, 0, rng.NormFloat64()*3)
					setF(uv, k, 0, rng.NormFloat64()+3)
					for i := range n {
						setF(sb, k, i, getF(sv, k, 0))
						setF(ub, k, i, getF(uv, k, 0))
					}
					uf.SetArg(0, xs)
					uf.SetUniform(1, sv)
					uf.SetUniform(2, uv)
					ff.SetArg(0, xs)
					ff.SetArg(1, sb)
					ff.SetArg(2, ub)
					var got Vec
					if trial%2 == 0 {
						got = uf.Run(n, nil)
					} else {
						got = NewVec(blk.OutKind(), n)
						uf.Run(n, &got)
						if !blk.Computes() {
							got = uf.Run(n, nil)
						}
					}
					want := ff.Run(n, nil)
					for i := range n {
						g, w := getF(got, blk.OutKind(), i), getF(want, blk.OutKind(), i)
						if math.Float64bits(g) != math.Float64bits(w) && !(g != g && w != w) {
							t.Fatalf("expr %d (%v, %v, fast %v), n %d, element %d: %v uniform, %v filled", ei, e, k, fast, n, i, g, w)
						}
					}
				}
			}
		}
	}
}

func setF(v Vec, k Kind, i int, x float64) {
	switch k {
	case F32:
		v.F32[i] = float32(x)
	case F64:
		v.F64[i] = x
	default:
		v.I64[i] = int64(x)
	}
}

func getF(v Vec, k Kind, i int) float64 {
	switch k {
	case F32:
		return float64(v.F32[i])
	case F64:
		return v.F64[i]
	}
	return float64(v.I64[i])
}
