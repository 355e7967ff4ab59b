package fuse

import (
	"strings"
	"testing"

	"gocompile/ir"
)

func call(t *testing.T, g *ir.Graph, op *ir.Op, a ir.Attrs, args ...ir.Value) *ir.Node {
	t.Helper()
	n, err := g.Call(op, a, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func describe(rs []*Region) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, "; ")
}

func TestPartition(t *testing.T) {
	scalar := func(v float64) ir.Scalar { return ir.ScalarOf(v) }
	tests := []struct {
		name  string
		build func(g *ir.Graph) []*ir.Node // returns the outputs
		want  string
	}{
		{"chain fuses", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpMul, ir.Attrs{}, x, scalar(1.5))
			b := call(t, g, ir.OpGELU, ir.Attrs{}, a)
			s := call(t, g, ir.OpSigmoid, ir.Attrs{}, x)
			return []*ir.Node{call(t, g, ir.OpMul, ir.Attrs{}, b, s)}
		}, "fused mul+gelu+sigmoid+mul -> v4"},
		{"a reduction over the last dim joins its prologue and epilogue", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			s := call(t, g, ir.OpSum, ir.Attrs{Dims: []int{1}, KeepDim: true}, e)
			return []*ir.Node{call(t, g, ir.OpDiv, ir.Attrs{}, e, s)}
		}, "row exp+sum+div -> v3"},
		{"a value used outside stays a boundary", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			s := call(t, g, ir.OpSum, ir.Attrs{Dims: []int{1}, KeepDim: true}, e)
			return []*ir.Node{s, call(t, g, ir.OpDiv, ir.Attrs{}, e, s)}
		}, "fused exp -> v1; row sum -> v2; fused div -> v3"},
		{"a reduction over another dim joins its prologue and epilogue", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			s := call(t, g, ir.OpSum, ir.Attrs{Dims: []int{0}, KeepDim: true}, e)
			return []*ir.Node{call(t, g, ir.OpDiv, ir.Attrs{}, e, s)}
		}, "row exp+sum+div -> v3"},
		{"a reduction over every dim stays separate", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			s := call(t, g, ir.OpSum, ir.Attrs{Dims: []int{0, 1}, KeepDim: true}, e)
			return []*ir.Node{call(t, g, ir.OpDiv, ir.Attrs{}, e, s)}
		}, "fused exp -> v1; v2 (sum); fused div -> v3"},
		{"var over dims 0 and 2 is one region, its epilogue dropping the dims", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3, 4, 5}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpVar, ir.Attrs{Dims: []int{0, 2}, Scalars: []float64{1}}, x)}
		}, "row mean+sub+mul+sum+div -> v6"},
		{"softmax over dim 0 is one region", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{6, 5}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpSoftmax, ir.Attrs{Dim: 0}, x)}
		}, "row amax+sub+exp+sum+div -> v6"},
		{"a middle-dim sum of a prologue", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3, 4, 5}, ir.Float32, ir.CPU, "")
			m := call(t, g, ir.OpMean, ir.Attrs{Dims: []int{1}, KeepDim: true}, x)
			d := call(t, g, ir.OpSub, ir.Attrs{}, x, m)
			return []*ir.Node{call(t, g, ir.OpSum, ir.Attrs{Dims: []int{1}}, call(t, g, ir.OpMul, ir.Attrs{}, d, d))}
		}, "row mean+sub+mul+sum -> v4"},
		{"an input read at the dropped shape stays outside", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3, 4, 5}, ir.Float32, ir.CPU, "")
			y := g.Input([]int{4}, ir.Float32, ir.CPU, "")
			s := call(t, g, ir.OpSum, ir.Attrs{Dims: []int{0, 2}}, x)
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, s, y)}
		}, "row sum -> v2; fused add -> v3"},
		{"row sums with a prologue", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			sq := call(t, g, ir.OpMul, ir.Attrs{}, x, x)
			return []*ir.Node{call(t, g, ir.OpSum, ir.Attrs{Dims: []int{-1}}, sq)}
		}, "row mul+sum -> v2"},
		{"softmax", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpSoftmax, ir.Attrs{Dim: -1}, x)}
		}, "row amax+sub+exp+sum+div -> v6"},
		{"layer norm", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{2, 3, 8}, ir.Float32, ir.CPU, "")
			w := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			b := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpLayerNorm, ir.Attrs{Dims: []int{8}, Scalars: []float64{1e-5}}, x, w, b)}
		}, "row mean+sub+mul+mean+add+rsqrt+mul+mul+add -> v12"},
		{"rms norm", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			w := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpRMSNorm, ir.Attrs{Dims: []int{8}, Scalars: []float64{1e-6}}, x, w)}
		}, "row mul+mean+add+rsqrt+mul+mul -> v8"},
		{"bfloat16 softmax computes in float32 in one region", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.BFloat16, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpSoftmax, ir.Attrs{Dim: 1}, x)}
		}, "row cast+amax+sub+exp+sum+div+cast -> v8"},
		{"outputs are not inlined", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{a, call(t, g, ir.OpNeg, ir.Attrs{}, a)}
		}, "fused exp -> v1; fused neg -> v2"},
		{"float16 intermediates fuse on a GPU, rounded", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3}, ir.Float16, ir.Device{Type: ir.DeviceCUDA}, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, a)}
		}, "fused exp+neg -> v2"},
		{"bfloat16 intermediates fuse on the CPU too, rounded", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3}, ir.BFloat16, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, a)}
		}, "fused exp+neg -> v2"},
		{"int32 intermediates stay materialised", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3}, ir.Int32, ir.CPU, "")
			a := call(t, g, ir.OpAbs, ir.Attrs{}, x)
			return []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, a)}
		}, "fused abs -> v1; fused neg -> v2"},
		{"a broadcast producer stays separate", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			y := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, y)
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, x, e)}
		}, "fused exp -> v2; fused add -> v3"},
		{"a producer fuses through a transpose", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			tr := call(t, g, ir.OpTranspose, ir.Attrs{Dim: 0, Dim2: 1}, e)
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, tr, ir.ScalarOf(1))}
		}, "fused exp+transpose+add -> v3"},
		{"views in a row fuse", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			u := call(t, g, ir.OpUnsqueeze, ir.Attrs{Dim: 0}, e)
			p := call(t, g, ir.OpPermute, ir.Attrs{Dims: []int{2, 0, 1}}, u)
			return []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, p)}
		}, "fused exp+unsqueeze+permute+neg -> v4"},
		{"an expand stays a view: fusing it would recompute", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{1, 8}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			ex := call(t, g, ir.OpExpand, ir.Attrs{Dims: []int{4, 8}}, e)
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, ex, ir.ScalarOf(1))}
		}, "fused exp -> v1; v2 (expand); fused add -> v3"},
		{"a value read directly and through a view is materialised", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 4}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			tr := call(t, g, ir.OpTranspose, ir.Attrs{Dim: 0, Dim2: 1}, e)
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, tr, e)}
		}, "fused exp -> v1; v2 (transpose); fused add -> v3"},
		{"a shared producer joins when all users do", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{5}, ir.Float32, ir.CPU, "")
			e := call(t, g, ir.OpExp, ir.Attrs{}, x)
			a := call(t, g, ir.OpSin, ir.Attrs{}, e)
			b := call(t, g, ir.OpCos, ir.Attrs{}, e)
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, a, b)}
		}, "fused exp+sin+cos+add -> v4"},
	}
	for _, tc := range tests {
		g := &ir.Graph{}
		g.Outputs = tc.build(g)
		if _, err := ir.Decompose(g); err != nil {
			t.Fatal(err)
		}
		ir.DCE(g)
		rs, err := Partition(g)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := describe(rs); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A fused region's expression converts between kinds as a store and reload
// would: a comparison's bool result becomes 0/1 in the consumer's kind.
func TestRegionExprConverts(t *testing.T) {
	g := &ir.Graph{}
	x := g.Input([]int{3}, ir.Float64, ir.CPU, "")
	m := call(t, g, ir.OpGt, ir.Attrs{}, x, ir.ScalarOf(0))
	c := call(t, g, ir.OpCast, ir.Attrs{DType: ir.Float32}, m)
	g.Outputs = []*ir.Node{call(t, g, ir.OpMul, ir.Attrs{}, c, ir.ScalarOf(2.5))}
	rs, err := Partition(g)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%v %v", err, describe(rs))
	}
	blk, err := ir.CompileBlock(rs[0].Expr, []ir.Kind{rs[0].Inputs[0].Kind}, rs[0].Compute)
	if err != nil {
		t.Fatal(err)
	}
	f := blk.NewFrame(3, nil)
	f.SetArg(0, ir.Vec{F64: []float64{-1, 0.5, 3}})
	if got := f.Run(3, nil).F32; got[0] != 0 || got[1] != 2.5 || got[2] != 2.5 {
		t.Fatalf("fused (x > 0) * 2.5 = %v", got)
	}
}

// Independent pointwise regions over one iteration space run as one
// group, and flat ones of other shapes as one combo, placed where
// everything they read is ready; an in-place write moves up to just after
// what it reads.
func TestHorizontal(t *testing.T) {
	tests := []struct {
		name  string
		build func(g *ir.Graph) []*ir.Node
		want  string
	}{
		{"siblings over one input", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			b := call(t, g, ir.OpSin, ir.Attrs{}, x)
			c := call(t, g, ir.OpMul, ir.Attrs{}, x, ir.ScalarOf(3))
			return []*ir.Node{a, b, c}
		}, "horizontal [fused exp -> v1 | fused sin -> v2 | fused mul -> v3]"},
		{"flat regions of other shapes share a combo", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			y := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpExp, ir.Attrs{}, x), call(t, g, ir.OpExp, ir.Attrs{}, y)}
		}, "combo [fused exp -> v2 || fused exp -> v3]"},
		{"a large region stays apart from other shapes", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{2048, 1024}, ir.Float32, ir.CPU, "")
			y := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpExp, ir.Attrs{}, x), call(t, g, ir.OpExp, ir.Attrs{}, y)}
		}, "fused exp -> v2; fused exp -> v3"},
		{"a broadcasting region shares a combo with other shapes", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			y := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			z := g.Input([]int{3, 8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpExp, ir.Attrs{}, x), call(t, g, ir.OpAdd, ir.Attrs{}, z, y)}
		}, "combo [fused exp -> v3 || fused add -> v4]"},
		{"broadcasting regions of one shape are a group, not a combo", func(g *ir.Graph) []*ir.Node {
			a := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			b := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			c := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			d := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpAdd, ir.Attrs{}, a, b), call(t, g, ir.OpMul, ir.Attrs{}, c, d)}
		}, "horizontal [fused add -> v4 | fused mul -> v5]"},
		{"regions reading views of one value at other shapes share a combo", func(g *ir.Graph) []*ir.Node {
			// A decode step's rotations of its queries and keys: slices
			// of one projection, by one broadcast angle.
			x := g.Input([]int{1, 40, 64}, ir.Float32, ir.CPU, "")
			c := g.Input([]int{1, 1, 64}, ir.Float32, ir.CPU, "")
			q := call(t, g, ir.OpSlice, ir.Attrs{Dim: 1, Start: 0, Stop: 32, Step: 1}, x)
			k := call(t, g, ir.OpSlice, ir.Attrs{Dim: 1, Start: 32, Stop: 36, Step: 1}, x)
			return []*ir.Node{call(t, g, ir.OpMul, ir.Attrs{}, q, c), call(t, g, ir.OpMul, ir.Attrs{}, k, c)}
		}, "v2 (slice); v3 (slice); combo [fused mul -> v4 || fused mul -> v5]"},
		{"an in-place write moves up after its source", func(g *ir.Graph) []*ir.Node {
			m := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			src := call(t, g, ir.OpMul, ir.Attrs{}, m, ir.ScalarOf(2))
			s := call(t, g, ir.OpSum, ir.Attrs{}, x) // a separate region
			w := call(t, g, ir.OpAsStridedScatter, ir.StridedLayout(ir.Layout{Shape: []int{8}, Strides: []int{1}}), m, src)
			w.Attrs.KeepDim = true
			a := call(t, g, ir.OpAdd, ir.Attrs{}, w, ir.ScalarOf(1))
			b := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{s, a, b}
		}, "combo [fused mul -> v2 || fused exp -> v6]; v4 (as_strided_scatter); v3 (sum); fused add -> v5"},
		{"a reader of a group's value joins it", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{a, call(t, g, ir.OpMul, ir.Attrs{}, a, ir.ScalarOf(2))}
		}, "horizontal [fused exp -> v1 | fused mul -> v2]"},
		{"a reader of the value and a view of it stays apart", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{8, 8}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			at := call(t, g, ir.OpTranspose, ir.Attrs{Dim: 0, Dim2: 1}, a)
			return []*ir.Node{a, call(t, g, ir.OpAdd, ir.Attrs{}, a, at)}
		}, "fused exp -> v1; v2 (transpose); fused add -> v3"},
		{"a reader at another shape stays apart", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{8}, ir.Float32, ir.CPU, "")
			y := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{a, call(t, g, ir.OpAdd, ir.Attrs{}, y, a)}
		}, "fused exp -> v2; fused add -> v3"},
		{"a 16-bit value on the CPU is kept in registers, rounded", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{8}, ir.Float16, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			return []*ir.Node{a, call(t, g, ir.OpMul, ir.Attrs{}, a, ir.ScalarOf(2))}
		}, "horizontal [fused exp -> v1 | fused mul -> v2]"},
		{"each parameter's moment and update are a unit of one combo", func(g *ir.Graph) []*ir.Node {
			return momentUpdates(t, g, []int{8}, []int{3, 4})
		}, "combo [fused mul+add -> v4 | fused sub -> v5 || fused mul+add -> v10 | fused sub -> v11]"},
		{"a region joins only after what it reads", func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			a := call(t, g, ir.OpExp, ir.Attrs{}, x)
			s := call(t, g, ir.OpSum, ir.Attrs{KeepDim: true}, a) // a separate region
			b := call(t, g, ir.OpMul, ir.Attrs{}, x, s)
			c := call(t, g, ir.OpCos, ir.Attrs{}, x)
			return []*ir.Node{a, b, c}
		}, "horizontal [fused exp -> v1 | fused cos -> v4]; v2 (sum); fused mul -> v3"},
	}
	for _, tc := range tests {
		g := &ir.Graph{}
		g.Outputs = tc.build(g)
		rs, err := Partition(g)
		if err != nil {
			t.Fatal(err)
		}
		if got := describe(Horizontal(rs)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		p := PlanBuffers(g, Horizontal(rs), func(*Region) bool { return true })
		for _, o := range g.Outputs {
			if _, ok := p.Slot[o]; ok {
				t.Errorf("%s: output %s was planned into a reused buffer", tc.name, o.Name())
			}
		}
	}
}

// momentUpdates builds, per shape, an optimizer-like update: a moment
// m·0.9 + d and the parameter p − m, which reads it; both are results.
func momentUpdates(t *testing.T, g *ir.Graph, shapes ...[]int) []*ir.Node {
	var outs []*ir.Node
	for _, shape := range shapes {
		p := g.Input(shape, ir.Float32, ir.CPU, "")
		m := g.Input(shape, ir.Float32, ir.CPU, "")
		d := g.Input(shape, ir.Float32, ir.CPU, "")
		m2 := call(t, g, ir.OpAdd, ir.Attrs{}, call(t, g, ir.OpMul, ir.Attrs{}, m, ir.ScalarOf(0.9)), d)
		outs = append(outs, m2, call(t, g, ir.OpSub, ir.Attrs{}, p, m2))
	}
	return outs
}

// On a GPU a fused float16 or bfloat16 intermediate is read through a
// cast that rounds it as its store would.
func TestHalfIntermediatesRounded(t *testing.T) {
	for _, dt := range []ir.DType{ir.Float16, ir.BFloat16} {
		g := &ir.Graph{}
		x := g.Input([]int{3}, dt, ir.Device{Type: ir.DeviceCUDA}, "")
		a := call(t, g, ir.OpExp, ir.Attrs{}, x)
		g.Outputs = []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, a)}
		regions, err := Partition(g)
		if err != nil {
			t.Fatal(err)
		}
		if len(regions) != 1 {
			t.Fatalf("%v: regions %v, want one", dt, regions)
		}
		if e := regions[0].Expr.String(); !strings.Contains(e, "_via_"+dt.String()) {
			t.Fatalf("%v: expression %s does not round through %v", dt, e, dt)
		}
	}
}

// Twelve independent regions of one shape make groups of at most
// MaxGroup: a combo forms only across shapes.
func TestHorizontalGroupSize(t *testing.T) {
	g := &ir.Graph{}
	var outs []*ir.Node
	for range 12 {
		x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
		outs = append(outs, call(t, g, ir.OpMul, ir.Attrs{}, call(t, g, ir.OpExp, ir.Attrs{}, x), ir.ScalarOf(2)))
	}
	g.Outputs = outs
	rs, err := Partition(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Horizontal(rs) {
		if n := len(r.Members()); n > MaxGroup && !r.Combo() {
			t.Errorf("a group of %d members over one iteration space, above MaxGroup %d", n, MaxGroup)
		}
	}
}
