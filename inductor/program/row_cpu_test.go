package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gocompile/array"
	"gocompile/ir"
)

// A row region that keeps a stage's values (softmax's exp(x - max)) gives
// the same bits as computing them again, on every floating dtype, with
// masked (-Inf) and NaN inputs and odd row lengths.
func TestCPURowKeptValuesSameBits(t *testing.T) {
	type build func(g *ir.Graph, x *ir.Node) *ir.Node
	call := func(g *ir.Graph, op *ir.Op, a ir.Attrs, args ...ir.Value) *ir.Node {
		n, err := g.Call(op, a, "", args...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	cases := []struct {
		name string
		kept bool // whether a stage's values are kept
		f    build
	}{
		{"softmax", true, func(g *ir.Graph, x *ir.Node) *ir.Node { return call(g, ir.OpSoftmax, ir.Attrs{Dim: -1}, x) }},
		{"log_softmax", false, func(g *ir.Graph, x *ir.Node) *ir.Node { return call(g, ir.OpLogSoftmax, ir.Attrs{Dim: -1}, x) }},
		{"exp over its sum", true, func(g *ir.Graph, x *ir.Node) *ir.Node {
			e := call(g, ir.OpExp, ir.Attrs{}, call(g, ir.OpMul, ir.Attrs{}, x, ir.ScalarOf(0.5)))
			s := call(g, ir.OpSum, ir.Attrs{Dims: []int{-1}, KeepDim: true}, e)
			return call(g, ir.OpMul, ir.Attrs{}, call(g, ir.OpDiv, ir.Attrs{}, e, s), e)
		}},
		{"bf16 softmax in float32", true, func(g *ir.Graph, x *ir.Node) *ir.Node {
			y := call(g, ir.OpSoftmax, ir.Attrs{Dim: -1}, call(g, ir.OpCast, ir.Attrs{DType: ir.Float32}, x))
			return call(g, ir.OpCast, ir.Attrs{DType: ir.BFloat16}, y)
		}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range cases {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16} {
			for _, shape := range [][]int{{1, 3}, {7, 1023}, {3, 4097}, {2, 5, 33}, {64, 1}} {
				name := fmt.Sprintf("%s/%v/%v", c.name, dt, shape)
				vals := make([]float64, ir.Numel(shape))
				for i := range vals {
					switch r := rng.Float64(); {
					case r < 0.02:
						vals[i] = math.Inf(-1)
					case r < 0.025:
						vals[i] = math.NaN()
					default:
						vals[i] = rng.NormFloat64() * 3
					}
				}
				in := array.FromFloat64s(vals, dt, shape...)
				g := &ir.Graph{}
				x := g.Input(shape, dt, ir.CPU, "x")
				g.Outputs = []*ir.Node{c.f(g, x)}
				ir.Decompose(g)
				p, err := Compile(g, Config{})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				cpuPlans.Clear()
				kept := p.Run([]*array.Array{in})[0].Float64s()
				planned := false
				cpuPlans.Range(func(_, p any) bool {
					planned = planned || p.(*cpuPlan) != nil
					return true
				})
				// Half-precision values between ops are rounded through their
				// dtype, so exp's values are not a stage's own there.
				half := dt == ir.Float16 || dt == ir.BFloat16
				if want := c.kept && shape[len(shape)-1] > 1 && !(half && c.name == "exp over its sum"); planned != want {
					t.Fatalf("%s: kept values planned: %v", name, planned)
				}
				keepValues = false
				again := p.Run([]*array.Array{in})[0].Float64s()
				keepValues = true
				for i := range kept {
					if math.Float64bits(kept[i]) != math.Float64bits(again[i]) && !(math.IsNaN(kept[i]) && math.IsNaN(again[i])) {
						t.Fatalf("%s: element %d is %v kept, %v computed again", name, i, kept[i], again[i])
					}
				}
			}
		}
	}
}
