package ir

import (
	"slices"
	"testing"
)

// The minimum cut saves a product's value and recomputes the pointwise
// chain after it in the backward (one saved value instead of two), and
// the halves compute what the joint graph did: the forward its result and
// the saved value, the backward the gradient from them, with no product
// of the forward's computed again.
func TestSplitJointSavesTheProduct(t *testing.T) {
	g := &Graph{}
	x := g.Input([]int{5, 4}, Float32, CPU, "")
	w := g.Const("w", []int{4, 3}, Float32, CPU, "")
	up := g.Input([]int{5, 3}, Float32, CPU, "")
	h := mustCall(t, g, OpMatMul, Attrs{}, "", x, w)
	a := mustCall(t, g, OpTanh, Attrs{}, "", h)
	b := mustCall(t, g, OpExp, Attrs{}, "", a)
	// The backward of b = exp(tanh(x·w)) for w: xᵀ·(up·b·(1 − a²)).
	ga := mustCall(t, g, OpMul, Attrs{}, "", up, b)
	sq := mustCall(t, g, OpMul, Attrs{}, "", a, a)
	one := mustCall(t, g, OpSub, Attrs{}, "", Scalar{Value: 1, DType: Float64}, sq)
	gh := mustCall(t, g, OpMul, Attrs{}, "", ga, one)
	xt := mustCall(t, g, OpTranspose, Attrs{Dim: 0, Dim2: 1}, "", x)
	gw := mustCall(t, g, OpMatMul, Attrs{}, "", xt, gh)
	g.Outputs = []*Node{b, gw}

	s, err := SplitJoint(g, up, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Saved) != 1 || s.Saved[0] != h {
		t.Errorf("saved %v, want the product's value %s", names(s.Saved), h.Name())
	}
	if !slices.Contains(s.Recomputed, a) || !slices.Contains(s.Recomputed, b) {
		t.Errorf("recomputed %v, want the tanh and the exp", names(s.Recomputed))
	}
	if s.SavedBytes() != 5*3*4 {
		t.Errorf("saved %d bytes, want %d", s.SavedBytes(), 5*3*4)
	}
	if n := len(s.Forward.Inputs); n != 1 {
		t.Errorf("the forward takes %d inputs, want 1 (x)", n)
	}
	if n := len(s.Backward.Inputs); n != 3 {
		t.Errorf("the backward takes %d inputs, want 3 (x, the upstream gradient, the saved value)", n)
	}
	if n := len(s.Forward.Outputs); n != 2 {
		t.Errorf("the forward returns %d values, want the result and the saved value", n)
	}
	products := 0
	for _, n := range s.Backward.Nodes {
		if n.Kind == CallNode && n.Op == OpMatMul {
			products++
			if n.Args[1].(*Node).Kind == ConstNode {
				t.Error("the backward computes the forward's product again")
			}
		}
	}
	if products != 1 {
		t.Errorf("%d products in the backward, want 1", products)
	}
	if _, err := SplitJoint(g, x, 1); err == nil {
		t.Error("a result that depends on the upstream input was split")
	}
}

func names(ns []*Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name())
	}
	return out
}
