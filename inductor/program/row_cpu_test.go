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
		return mustCall(t, g, op, a, args...)
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
				// Rows shorter than cpuShortRow run a tile at a time
				// (tilesCPU), which keeps no values. Half-precision
				// values between ops are rounded through their
				// dtype, so exp's values are not a stage's own there.
				half := dt == ir.Float16 || dt == ir.BFloat16
				if want := c.kept && shape[len(shape)-1] >= cpuShortRow && !(half && c.name == "exp over its sum"); planned != want {
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

// Few long rows split across the cores (splitCPU) give the bits of the
// same rows folded one per core (rowsCPU), for every kind of row region,
// dtype and layout.
func TestCPURowSplitSameBits(t *testing.T) {
	cases := append(rowRegionCases(t), rowRegionCase{"sum", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
		return mustCall(t, g, ir.OpSum, ir.Attrs{Dims: []int{-1}}, x)
	}})
	rng := rand.New(rand.NewPCG(13, 14))
	for _, c := range cases {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.BFloat16} {
			for _, sz := range [][2]int{{1, 2*array.MinParallel + 3}, {3, 3*array.FoldPart + 7}} {
				for _, transposed := range []bool{false, true} {
					rows, r := sz[0], sz[1]
					name := fmt.Sprintf("%s/%v/%dx%d/transposed %v", c.name, dt, rows, r, transposed)
					row, args := firstRowRegion(t, name, c.f, rowInputs(rng, dt, rows, r, transposed, 0))
					if row == nil {
						t.Fatalf("%s: no row region", name)
					}
					full := []int{rows, r}
					shape := full
					if row.root == nil {
						shape = []int{rows}
					}
					split, whole := array.New(array.CPU, row.r.Root.DType, shape), array.New(array.CPU, row.r.Root.DType, shape)
					l := row.cpuRows(args, full)
					row.splitCPU(args, l, split)
					plan := &cpuPlan{stages: row.stages, root: row.root, keep: make([]int, len(row.stages))}
					for k := range plan.keep {
						plan.keep[k] = -1
					}
					row.rowsCPU(plan, args, l, whole)
					a, b := split.Float64s(), whole.Float64s()
					for i := range a {
						if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
							t.Fatalf("%s: element %d is %v split, %v whole", name, i, a[i], b[i])
						}
					}
				}
			}
		}
	}
}

// Short rows run a tile of rows to a program call (tilesCPU) and give the
// bits of the same rows run one by one (rowsCPU), for every kind of row
// region, dtype, row length under cpuShortRow and layout (a transposed
// input, a weight broadcast along the rows), with NaN and infinite
// values.
func TestCPURowTilesSameBits(t *testing.T) {
	cases := append(rowRegionCases(t), rowRegionCase{"x minus its row's argmax", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
		a := mustCall(t, g, ir.OpArgMax, ir.Attrs{Dims: []int{-1}, KeepDim: true}, x)
		return mustCall(t, g, ir.OpSub, ir.Attrs{}, x, mustCall(t, g, ir.OpCast, ir.Attrs{DType: x.DType}, a))
	}}, rowRegionCase{"sum (a lone reduction)", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
		return mustCall(t, g, ir.OpSum, ir.Attrs{Dims: []int{-1}}, x)
	}}, rowRegionCase{"argmin (a lone reduction)", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
		return mustCall(t, g, ir.OpArgMin, ir.Attrs{Dims: []int{-1}}, x)
	}})
	rng := rand.New(rand.NewPCG(21, 22))
	tested := 0
	for _, c := range cases {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16} {
			for _, sz := range [][2]int{{1, 1}, {3, 1}, {1000, 1}, {7, 2}, {1025, 3}, {4097, 9}, {3, 17}, {2049, 63}, {513, 100}, {2, 127}} {
				for _, transposed := range []bool{false, true} {
					rows, r := sz[0], sz[1]
					name := fmt.Sprintf("%s/%v/%dx%d/transposed %v", c.name, dt, rows, r, transposed)
					row, args := firstRowRegion(t, name, c.f, rowInputs(rng, dt, rows, r, transposed, 0.015))
					if row == nil || row.r.Row.Dims != nil {
						continue // no row region over the last dim
					}
					full, _ := broadcastArgs(row.r.Root.Op, args)
					shape := row.shape(full)
					tiled, whole := array.New(array.CPU, row.r.Root.DType, shape), array.New(array.CPU, row.r.Root.DType, shape)
					l := row.cpuRows(args, full)
					row.tilesCPU(args, full, l, tiled)
					plan := &cpuPlan{stages: row.stages, root: row.root, keep: make([]int, len(row.stages))}
					for k := range plan.keep {
						plan.keep[k] = -1
					}
					row.rowsCPU(plan, args, l, whole)
					a, b := tiled.Float64s(), whole.Float64s()
					for i := range a {
						if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
							t.Fatalf("%s: element %d is %v tiled, %v row by row", name, i, a[i], b[i])
						}
					}
					tested++
				}
			}
		}
	}
	if tested < len(cases)*4*10 {
		t.Errorf("%d layouts compared, want every case's", tested)
	}
}

// rowRegionCase builds a graph of x [rows, r] and w [r] with a row region
// over the last dim.
type rowRegionCase struct {
	name string
	f    func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node
}

// rowRegionCases are the kinds of row region: reductions kept per
// element, two-stage norms with a weight, a reduction of a product.
func rowRegionCases(t *testing.T) []rowRegionCase {
	call := func(g *ir.Graph, op *ir.Op, a ir.Attrs, args ...ir.Value) *ir.Node {
		return mustCall(t, g, op, a, args...)
	}
	return []rowRegionCase{
		{"softmax", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node { return call(g, ir.OpSoftmax, ir.Attrs{Dim: -1}, x) }},
		{"log_softmax", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
			return call(g, ir.OpLogSoftmax, ir.Attrs{Dim: -1}, x)
		}},
		{"layer_norm", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
			return call(g, ir.OpLayerNorm, ir.Attrs{Dims: []int{r}, Scalars: []float64{1e-5}}, x, w, w)
		}},
		{"rms_norm", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
			return call(g, ir.OpRMSNorm, ir.Attrs{Dims: []int{r}, Scalars: []float64{1e-6}}, x, w)
		}},
		{"var", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
			return call(g, ir.OpVar, ir.Attrs{Dims: []int{-1}, Scalars: []float64{1}}, x)
		}},
		{"max of x·w", func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node {
			return call(g, ir.OpAMax, ir.Attrs{Dims: []int{-1}}, call(g, ir.OpMul, ir.Attrs{}, x, w))
		}},
	}
}

// rowInputs draws x [rows, r] (transposed in memory, or not) and w [r] of
// dt, a share of x's values -Inf and a third of those NaN.
func rowInputs(rng *rand.Rand, dt ir.DType, rows, r int, transposed bool, special float64) [2]*array.Array {
	vals := make([]float64, rows*r)
	for i := range vals {
		switch u := rng.Float64(); {
		case u < special*2/3:
			vals[i] = math.Inf(-1)
		case u < special:
			vals[i] = math.NaN()
		default:
			vals[i] = rng.NormFloat64() * 2
		}
	}
	wv := make([]float64, r)
	for i := range wv {
		wv[i] = rng.NormFloat64()
	}
	x := array.FromFloat64s(vals, dt, rows, r)
	if transposed {
		x = array.FromFloat64s(vals, dt, r, rows).WithLayout(ir.Layout{Shape: []int{rows, r}, Strides: []int{1, rows}})
	}
	return [2]*array.Array{x, array.FromFloat64s(wv, dt, r)}
}

// firstRowRegion compiles f of inputs x and w, runs the steps before its
// first row region as Run runs them, and returns that region's step and
// its inputs (nil where there is none).
func firstRowRegion(t *testing.T, name string, f func(g *ir.Graph, x, w *ir.Node, r int) *ir.Node, in [2]*array.Array) (*rowStep, []*array.Array) {
	t.Helper()
	x, w := in[0], in[1]
	r := w.Shape()[0]
	g := &ir.Graph{}
	xn := g.Input(x.Shape(), x.DType(), ir.CPU, "x")
	wn := g.Input([]int{r}, w.DType(), ir.CPU, "w")
	g.Outputs = []*ir.Node{f(g, xn, wn, r)}
	ir.Decompose(g)
	p, err := Compile(g, Config{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ip := p.(*inductorProgram)
	live := array.BindLeaves(ip.g, []*array.Array{x, w})
	for i := range ip.steps {
		st := &ip.steps[i]
		switch {
		case st.row != nil:
			return st.row, st.argsIn(live)
		case st.group != nil:
			res := st.group.run(viewInputs(st.group.inputs, st.argsIn(live)), func(int, ir.Device, ir.DType, []int) *array.Array { return nil }, nil)
			for m, v := range res {
				live[st.roots[m]] = v
			}
		default:
			n := st.r.Root
			live[st.roots[0]] = array.RunNode(n, n.Attrs, array.NodeArgs(n, live, ip.index))
		}
	}
	return nil, nil
}

// mustCall adds op's node to g, failing the test on an error.
func mustCall(t *testing.T, g *ir.Graph, op *ir.Op, a ir.Attrs, args ...ir.Value) *ir.Node {
	t.Helper()
	n, err := g.Call(op, a, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
