package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Writes of weights around matrix products that read them, the case that
// markInPlace orders with After edges (a training step's dX = dY·W beside
// W's update): named programs, then seeded random ones over two square
// weights, each run three calls compiled and eagerly on its own weights,
// in float32 and float64, comparing results and weights after every call.
// The weights are captured by the compiled function, or passed to it as
// arguments.

// productProgram reads and writes the weights w and v; x is the call's
// argument.
type productProgram func(w, v, x *Tensor) []*Tensor

// checkProductProgram runs prog compiled and eagerly on n×n weights,
// captured or passed as arguments, and reports whether they agreed.
func checkProductProgram(t *testing.T, name string, prog productProgram, dt DType, n int, asArgs bool) bool {
	t.Helper()
	weights := func() (*Tensor, *Tensor) { return Randn(1, dt, n, n), Randn(5, dt, n, n) }
	we, ve := weights()
	wc, vc := weights()
	compiled := func(x *Tensor) []*Tensor { return prog(wc, vc, x) }
	if asArgs {
		f := Compile(func(w, v, x *Tensor) []*Tensor { return prog(w, v, x) })
		compiled = func(x *Tensor) []*Tensor { return f(wc, vc, x) }
	} else {
		compiled = Compile(compiled)
	}
	for call := range 3 {
		x := Randn(uint64(10+call), dt, n, n)
		want := prog(we, ve, x)
		var got []*Tensor
		if err := Try(func() { got = compiled(x) }); err != nil {
			t.Errorf("%s, call %d: %v", name, call, err)
			return false
		}
		what := fmt.Sprintf("%s, call %d", name, call)
		for i := range want {
			if !checkClose(t, fmt.Sprintf("%s: result %d", what, i), got[i], dt, want[i].Shape(), vals(want[i]), 8) {
				return false
			}
		}
		if !checkClose(t, what+": w", wc, dt, we.Shape(), vals(we), 8) || !checkClose(t, what+": v", vc, dt, ve.Shape(), vals(ve), 8) {
			return false
		}
	}
	return true
}

func TestCompiledWritesAroundProducts(t *testing.T) {
	named := map[string]productProgram{
		"a product, then a write": func(w, v, x *Tensor) []*Tensor {
			y := x.MatMul(w)
			w.Copy(w.MulScalar(0.5))
			return []*Tensor{y}
		},
		"a product of the transpose": func(w, v, x *Tensor) []*Tensor {
			y := x.MatMul(w.Transpose(0, 1))
			w.Copy(w.MulScalar(0.5))
			return []*Tensor{y}
		},
		"a product of the new contents": func(w, v, x *Tensor) []*Tensor {
			y := x.MatMul(w)
			w.Copy(w.AddScalar(1))
			return []*Tensor{y, x.MatMul(w)}
		},
		"two writes": func(w, v, x *Tensor) []*Tensor {
			y1 := x.MatMul(w)
			w.Copy(w.AddScalar(1))
			y2 := x.MatMul(w)
			w.Copy(w.MulScalar(2))
			return []*Tensor{y1, y2}
		},
		"crossed writes": func(w, v, x *Tensor) []*Tensor {
			a, b := x.MatMul(w), x.MatMul(v)
			w.Copy(v.MulScalar(0.5))
			v.Copy(w.AddScalar(1))
			return []*Tensor{a, b}
		},
		"a row write": func(w, v, x *Tensor) []*Tensor {
			y := x.MatMul(w)
			w.Narrow(0, 1, 2).Copy(w.Narrow(0, 1, 2).MulScalar(3))
			return []*Tensor{y}
		},
		"a view taken before the write": func(w, v, x *Tensor) []*Tensor {
			wt := w.Transpose(0, 1)
			w.Copy(w.MulScalar(-1))
			return []*Tensor{x.MatMul(wt)}
		},
		"a product and a sum of the old contents": func(w, v, x *Tensor) []*Tensor {
			y, s := x.MatMul(w), w.Sum()
			w.Copy(w.MulScalar(0.5))
			return []*Tensor{y, s}
		},
		"the weight times itself": func(w, v, x *Tensor) []*Tensor {
			y := w.MatMul(w)
			w.Copy(x)
			return []*Tensor{y}
		},
		"a write from a product of the other weight": func(w, v, x *Tensor) []*Tensor {
			y := x.MatMul(w)
			v.Copy(x.MatMul(v))
			w.Copy(v)
			return []*Tensor{y}
		},
	}
	for _, asArgs := range []bool{false, true} {
		for _, dt := range []DType{Float32, Float64} {
			for name, prog := range named {
				checkProductProgram(t, fmt.Sprintf("%s, %v, arguments %v", name, dt, asArgs), prog, dt, 4, asArgs)
			}
		}
	}

	failures := 0
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 0x57a1e))
		steps := make([][3]int, 2+rng.IntN(6)) // what, which weight, which value
		for i := range steps {
			steps[i] = [3]int{rng.IntN(7), rng.IntN(2), rng.IntN(4)}
		}
		prog := func(w, v, x *Tensor) []*Tensor {
			ws := [2]*Tensor{w, v}
			var outs []*Tensor
			values := []*Tensor{x}
			for _, s := range steps {
				W, val := ws[s[1]], values[s[2]%len(values)]
				switch s[0] {
				case 0:
					values = append(values, val.MatMul(W))
				case 1:
					values = append(values, W.Transpose(0, 1).MatMul(val))
				case 2:
					W.Copy(W.MulScalar(0.5).Add(val.MulScalar(0.1)))
				case 3:
					W.Copy(val.MatMul(W).MulScalar(0.25))
				case 4:
					outs = append(outs, val.Tanh())
				case 5:
					W.Narrow(0, 1, 2).Copy(val.Narrow(0, 0, 2).AddScalar(1))
				case 6:
					values = append(values, val.MatMul(ws[1-s[1]]).Add(W))
				}
			}
			return append(outs, values[len(values)-1].AddScalar(0))
		}
		dt := []DType{Float32, Float64}[seed%2]
		n := 3 + int(seed%3)  // 3, 4, 5
		asArgs := seed%5 >= 2 // weights passed as arguments in three seeds of five
		if !checkProductProgram(t, fmt.Sprintf("seed %d (%v, %d×%d, arguments %v, steps %v)", seed, dt, n, n, asArgs, steps), prog, dt, n, asArgs) {
			if failures++; failures == 5 {
				t.Fatal("five programs differ")
			}
		}
	}
}
