package ir

import (
	"strconv"
	"strings"
	"testing"
)

// call records op into g, failing the test on error.
func mustCall(t *testing.T, g *Graph, op *Op, a Attrs, loc string, args ...Value) *Node {
	t.Helper()
	n, err := g.Call(op, a, loc, args...)
	if err != nil {
		t.Fatalf("%s: %v", op.Name, err)
	}
	return n
}

func shp(shape ...int) []int { return shape }

// modelGraph is the small graph of the printing examples.
func modelGraph(t *testing.T) *Graph {
	g := &Graph{}
	x0 := g.Input(shp(32, 1024), Float32, CPU, "model.go:10")
	x1 := g.Input(shp(1024, 1024), Float32, CPU, "model.go:10")
	c := g.Const("bias", shp(1024), Float32, CPU, "model.go:12")
	v3 := mustCall(t, g, OpMatMul, Attrs{}, "model.go:20", x0, x1)
	v4 := mustCall(t, g, OpAdd, Attrs{}, "model.go:20", v3, c)
	v5 := mustCall(t, g, OpSum, Attrs{Dims: []int{1}, KeepDim: true}, "model.go:21", v4)
	v6 := mustCall(t, g, OpMul, Attrs{}, "model.go:22", v5, Scalar{Value: 0.5, DType: Float64})
	v7 := mustCall(t, g, OpClamp, Attrs{Scalars: []float64{0, 6}}, "", v6)
	v8 := mustCall(t, g, OpCast, Attrs{DType: Float16}, "model.go:23", v7)
	g.Outputs = []*Node{v8, v5}
	return g
}

func TestGraphStringGolden(t *testing.T) {
	want := `func graph(x0 float32[32, 1024], x1 float32[1024, 1024]) (float16[32, 1], float32[32, 1]) {
    c2 := const float32[1024]             // model.go:12
    v3 := x0.MatMul(x1)                   // float32[32, 1024]  model.go:20
    v4 := v3.Add(c2)                      // float32[32, 1024]  model.go:20
    v5 := v4.Sum(dims=[1], keepdim=true)  // float32[32, 1]     model.go:21
    v6 := v5.Mul(0.5)                     // float32[32, 1]     model.go:22
    v7 := v6.Clamp(0, 6)                  // float32[32, 1]
    v8 := v7.To(float16)                  // float16[32, 1]     model.go:23
    return v8, v5
}
`
	if got := modelGraph(t).String(); got != want {
		t.Errorf("String:\n%s\nwant:\n%s", got, want)
	}
}

func TestGraphStringAttrs(t *testing.T) {
	g := &Graph{}
	dev := CUDA(0)
	x := g.Input(shp(2, 3, 8), Float32, dev, "")
	i := g.Input(shp(4), Int64, dev, "")
	v2 := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", x)
	v3 := mustCall(t, g, OpPermute, Attrs{Dims: []int{2, 0, 1}}, "", v2)
	v4 := mustCall(t, g, OpReshape, Attrs{Dims: []int{8, -1}}, "", v3)
	v5 := mustCall(t, g, OpSlice, Attrs{Dim: 1, Start: 0, Stop: 6, Step: 2}, "", v4)
	v6 := mustCall(t, g, OpUnsqueeze, Attrs{Dim: 0}, "", v5)
	v7 := mustCall(t, g, OpSoftmax, Attrs{Dim: -1}, "", v6)
	v8 := mustCall(t, g, OpLayerNorm, Attrs{Dims: []int{8}, Scalars: []float64{1e-5}}, "", x, nil, nil)
	v9 := mustCall(t, g, OpSub, Attrs{}, "", Scalar{Value: 2, DType: Float64}, v8)
	v10 := mustCall(t, g, OpMul, Attrs{}, "", i, Scalar{Value: 1, DType: Bool})
	v11 := mustCall(t, g, OpAMax, Attrs{}, "", v9)
	g.Outputs = []*Node{v7, v10, v11}
	want := `func graph(x0 float32[2, 3, 8]@cuda:0, x1 int64[4]@cuda:0) (float32[1, 8, 3]@cuda:0, int64[4]@cuda:0, float32[]@cuda:0) {
    v2 := x0.Transpose(0, 1)                            // float32[3, 2, 8]@cuda:0
    v3 := v2.Permute(dims=[2, 0, 1])                    // float32[8, 3, 2]@cuda:0
    v4 := v3.Reshape(shape=[8, -1])                     // float32[8, 6]@cuda:0
    v5 := v4.Slice(dim=1, start=0, stop=6, step=2)      // float32[8, 3]@cuda:0
    v6 := v5.Unsqueeze(dim=0)                           // float32[1, 8, 3]@cuda:0
    v7 := v6.Softmax(dim=-1)                            // float32[1, 8, 3]@cuda:0
    v8 := x0.LayerNorm(nil, nil, shape=[8], eps=1e-05)  // float32[2, 3, 8]@cuda:0
    v9 := Sub(2.0, v8)                                  // float32[2, 3, 8]@cuda:0
    v10 := x1.Mul(true)                                 // int64[4]@cuda:0
    v11 := v9.Max()                                     // float32[]@cuda:0
    return v7, v10, v11
}
`
	if got := g.String(); got != want {
		t.Errorf("String:\n%s\nwant:\n%s", got, want)
	}
}

func TestNodeName(t *testing.T) {
	g := &Graph{}
	x := g.Input(shp(2), Float32, CPU, "")
	y := g.Input(shp(2), Float32, CPU, "")
	c := g.Const(nil, shp(2), Float32, CPU, "")
	v := mustCall(t, g, OpAdd, Attrs{}, "", y, c)
	for _, tc := range []struct {
		n    *Node
		want string
	}{{x, "x0"}, {y, "x1"}, {c, "c2"}, {v, "v3"}, {nil, "nil"}} {
		if got := tc.n.Name(); got != tc.want {
			t.Errorf("Name() = %q, want %q", got, tc.want)
		}
	}
}

func TestGraphDOT(t *testing.T) {
	g := modelGraph(t)
	// a repeated operand gives one edge per argument
	sq := mustCall(t, g, OpMul, Attrs{}, "", g.Outputs[1], g.Outputs[1])
	g.Outputs = append(g.Outputs, sq)
	dot := g.DOT()
	if !strings.HasPrefix(dot, "digraph G {\n") || !strings.HasSuffix(dot, "}\n") {
		t.Fatalf("not a digraph:\n%s", dot)
	}
	depth := 0
	inQuote := false
	for i := 0; i < len(dot); i++ {
		switch c := dot[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '{':
			depth++
		case !inQuote && c == '}':
			depth--
			if depth < 0 {
				t.Fatal("unbalanced braces")
			}
		}
	}
	if depth != 0 || inQuote {
		t.Fatalf("unbalanced braces or quotes: depth %d, in quote %v", depth, inQuote)
	}
	tensorArgs := 0
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil {
				tensorArgs++
			}
		}
	}
	if edges := strings.Count(dot, " -> "); edges != tensorArgs {
		t.Errorf("%d edges, want one per tensor argument: %d", edges, tensorArgs)
	}
	for _, n := range g.Nodes {
		if !strings.Contains(dot, "  n"+strconv.Itoa(n.ID)+" [label=") {
			t.Errorf("no DOT node for %s", n.Name())
		}
	}
	if got := strings.Count(dot, "shape=ellipse"); got != len(g.Inputs) {
		t.Errorf("%d input-styled nodes, want %d", got, len(g.Inputs))
	}
	if got := strings.Count(dot, "peripheries=2"); got != len(g.Outputs) {
		t.Errorf("%d output-styled nodes, want %d", got, len(g.Outputs))
	}
	if !strings.Contains(dot, `label="v5 = v4.Sum(dims=[1], keepdim=true)\nfloat32[32, 1]\noutput 1"`) {
		t.Errorf("missing labelled reduction node:\n%s", dot)
	}
}

func TestValidate(t *testing.T) {
	if err := modelGraph(t).Validate(); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	foreign := (&Graph{}).Input(shp(32, 1), Float32, CPU, "")
	for _, tc := range []struct {
		name   string
		mutate func(g *Graph)
		want   string
	}{
		{"swapped order", func(g *Graph) { g.Nodes[3], g.Nodes[4] = g.Nodes[4], g.Nodes[3] }, "topological"},
		{"foreign argument", func(g *Graph) { g.Nodes[6].Args[0] = foreign }, "not a node of the graph"},
		{"wrong shape", func(g *Graph) { g.Nodes[4].Shape = shp(32, 1023) }, "infers"},
		{"wrong dtype", func(g *Graph) { g.Nodes[5].DType = Float64 }, "infers"},
		{"wrong device", func(g *Graph) { g.Nodes[5].Device = CUDA(1) }, "infers"},
		{"foreign output", func(g *Graph) { g.Outputs[0] = foreign }, "not a node"},
		{"nil output", func(g *Graph) { g.Outputs[1] = nil }, "nil"},
		{"dropped input", func(g *Graph) { g.Inputs = g.Inputs[:1] }, "input"},
		{"duplicate node", func(g *Graph) { g.Nodes = append(g.Nodes, g.Nodes[5]) }, "twice"},
		{"duplicate ID", func(g *Graph) { g.Nodes[5].ID = g.Nodes[4].ID }, "share ID"},
		{"arity", func(g *Graph) { g.Nodes[4].Args = g.Nodes[4].Args[:1] }, "operands"},
		{"bad argument", func(g *Graph) { g.Nodes[4].Args[1] = "bias" }, "type string"},
		{"bad attrs", func(g *Graph) { g.Nodes[5].Attrs.Dims = []int{5} }, "out of range"},
		{"no op", func(g *Graph) { g.Nodes[5].Op = nil }, "no op"},
		{"invalid dtype", func(g *Graph) { g.Nodes[2].DType = Invalid }, "dtype"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := modelGraph(t)
			tc.mutate(g)
			err := g.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestClone(t *testing.T) {
	g := modelGraph(t)
	c := g.Clone()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.String() != g.String() || c.Key() != g.Key() {
		t.Fatal("clone prints differently")
	}
	for i, n := range c.Nodes {
		if n == g.Nodes[i] {
			t.Fatalf("node %d shared", i)
		}
		for _, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil && an == g.Nodes[an.ID] {
				t.Fatalf("%s points into the original", n.Name())
			}
		}
	}
	// mutating the clone leaves the original alone
	c.Nodes[5].Attrs.Dims[0] = 0
	DCE(c)
	c.Outputs[0] = c.Inputs[0]
	if err := g.Validate(); err != nil || g.Nodes[5].Attrs.Dims[0] != 1 || g.Outputs[0].Kind != CallNode {
		t.Fatalf("original changed: %v", err)
	}
	// new nodes in the clone do not reuse IDs
	n := mustCall(t, c, OpNeg, Attrs{}, "", c.Inputs[0])
	if n.ID != len(g.Nodes) {
		t.Errorf("new node ID %d, want %d", n.ID, len(g.Nodes))
	}
}

// keyGraph builds a small graph whose details the Key tests vary.
type keyOpts struct {
	shift      int // offset node IDs
	constFirst bool
	loc        string
	value      any
	scalar     float64
	scalarDT   DType
	dims       []int
	inShape    []int
	inDType    DType
	constDType DType
	constShape []int
	dev        Device
	op         *Op
	swapArgs   bool
	extraOut   bool
}

func keyGraph(t *testing.T, o keyOpts) *Graph {
	g := &Graph{nextID: o.shift}
	var c *Node
	if o.constFirst {
		c = g.Const(o.value, o.constShape, o.constDType, o.dev, o.loc)
	}
	x := g.Input(o.inShape, o.inDType, o.dev, o.loc)
	if !o.constFirst {
		c = g.Const(o.value, o.constShape, o.constDType, o.dev, o.loc)
	}
	a, b := x, c
	if o.swapArgs {
		a, b = c, x
	}
	v := mustCall(t, g, o.op, Attrs{}, o.loc, a, b)
	w := mustCall(t, g, OpMul, Attrs{}, o.loc, v, Scalar{Value: o.scalar, DType: o.scalarDT})
	s := mustCall(t, g, OpSum, Attrs{Dims: o.dims}, o.loc, w)
	g.Outputs = []*Node{s}
	if o.extraOut {
		g.Outputs = append(g.Outputs, v)
	}
	return g
}

func TestKey(t *testing.T) {
	base := keyOpts{loc: "a.go:1", value: "w1", scalar: 2, scalarDT: Int64, dims: []int{1},
		inShape: shp(4, 8), inDType: Float32, constDType: Float32, constShape: shp(8), dev: CPU, op: OpAdd}
	ref := keyGraph(t, base).Key()
	for _, tc := range []struct {
		name  string
		edit  func(o *keyOpts)
		equal bool
	}{
		{"identical", func(o *keyOpts) {}, true},
		{"shifted IDs", func(o *keyOpts) { o.shift = 100 }, true},
		{"other locations", func(o *keyOpts) { o.loc = "b.go:7" }, true},
		{"other constant value", func(o *keyOpts) { o.value = "w2" }, true},
		{"constant created first", func(o *keyOpts) { o.constFirst = true }, true},
		{"scalar value", func(o *keyOpts) { o.scalar = 3 }, false},
		{"scalar category", func(o *keyOpts) { o.scalarDT = Float64 }, false},
		{"reduced dims", func(o *keyOpts) { o.dims = []int{0} }, false},
		{"input shape", func(o *keyOpts) { o.inShape = shp(2, 8) }, false},
		{"input dtype", func(o *keyOpts) { o.inDType = Float64 }, false},
		{"constant dtype", func(o *keyOpts) { o.constDType = Float16 }, false},
		{"constant shape", func(o *keyOpts) { o.constShape = shp(1, 8) }, false},
		{"device", func(o *keyOpts) { o.dev = CUDA(0) }, false},
		{"op", func(o *keyOpts) { o.op = OpSub }, false},
		{"argument order", func(o *keyOpts) { o.swapArgs = true }, false},
		{"outputs", func(o *keyOpts) { o.extraOut = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			got := keyGraph(t, o).Key()
			if (got == ref) != tc.equal {
				t.Errorf("equal keys = %v, want %v:\n%s\nvs\n%s", got == ref, tc.equal, got, ref)
			}
		})
	}
}

func TestAttrsEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b  Attrs
		equal bool
	}{
		{Attrs{}, Attrs{Dims: []int{}}, true},
		{Attrs{Dims: []int{1}}, Attrs{Dims: []int{1}}, true},
		{Attrs{Dims: []int{1}}, Attrs{Dims: []int{1, 0}}, false},
		{Attrs{KeepDim: true}, Attrs{}, false},
		{Attrs{Scalars: []float64{0}}, Attrs{Scalars: []float64{negZero()}}, false},
		{Attrs{Scalars: []float64{1e-5}}, Attrs{Scalars: []float64{1e-5}}, true},
		{Attrs{DType: Float16}, Attrs{DType: BFloat16}, false},
		{Attrs{Start: 1, Stop: 2, Step: 1}, Attrs{Start: 1, Stop: 2, Step: 1}, true},
		{Attrs{Dim: 1}, Attrs{Dim2: 1}, false},
	} {
		if got := AttrsEqual(tc.a, tc.b); got != tc.equal {
			t.Errorf("AttrsEqual(%+v, %+v) = %v", tc.a, tc.b, got)
		}
	}
}

func negZero() float64 {
	z := 0.0
	return -z
}
