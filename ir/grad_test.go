package ir

import "testing"

// needBuilder records ops into a graph and wants the gradients of need.
type needBuilder struct {
	*GraphBuilder
	need map[Value]bool
}

func (b needBuilder) NeedsGrad(v Value) bool { return b.need[v] }

// A product's derivative computes only the gradients its builder needs:
// w's alone in x·w when x requires none, one product instead of two.
func TestMatMulVJPSkipsUnneededOperands(t *testing.T) {
	for _, tc := range []struct {
		name      string
		needX     bool
		products  int
		xGradNil  bool
		wantShape []int
	}{
		{"both", true, 2, false, []int{4, 3}},
		{"the weight alone", false, 1, true, []int{4, 3}},
	} {
		g := &Graph{}
		x := g.Input([]int{5, 4}, Float32, CPU, "")
		w := g.Input([]int{4, 3}, Float32, CPU, "")
		up := g.Input([]int{5, 3}, Float32, CPU, "")
		b := needBuilder{&GraphBuilder{G: g}, map[Value]bool{x: tc.needX, w: true}}
		out := mustCall(t, g, OpMatMul, Attrs{}, "", x, w)
		before := len(g.Nodes)
		gs, err := OpMatMul.VJP(b, Attrs{}, []Value{x, w}, out, up)
		if err != nil || b.Err != nil {
			t.Fatal(err, b.Err)
		}
		products := 0
		for _, n := range g.Nodes[before:] {
			if n.Op == OpMatMul {
				products++
			}
		}
		if products != tc.products || (gs[0] == nil) != tc.xGradNil || !SameShape(b.Shape(gs[1]), tc.wantShape) {
			t.Errorf("%s: %d products, x's gradient nil %v, w's shape %v", tc.name, products, gs[0] == nil, b.Shape(gs[1]))
		}
	}
}
