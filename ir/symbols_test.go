package ir

import (
	"strings"
	"testing"
)

func TestInferSymbols(t *testing.T) {
	g := &Graph{}
	x := g.Input([]int{4, 16}, Float32, CPU, "")
	w := g.Input([]int{16, 8}, Float32, CPU, "")
	mm, _ := g.Call(OpMatMul, Attrs{}, "", x, w)
	sm, _ := g.Call(OpSum, Attrs{Dims: []int{1}, KeepDim: true}, "", mm)
	flat, _ := g.Call(OpReshape, Attrs{Dims: []int{-1}}, "", mm)  // 4*8: derived
	fixed, _ := g.Call(OpReshape, Attrs{Dims: []int{32}}, "", mm) // cannot follow the symbol
	g.Outputs = []*Node{sm, flat, fixed}
	g.InferSymbols([][]int{{1, 0}, {0, 0}})
	for _, tc := range []struct {
		n    *Node
		want string
	}{
		{x, "float32[s0, 16]"}, {w, "float32[16, 8]"}, {mm, "float32[s0, 8]"},
		{sm, "float32[s0, 1]"}, {flat, "float32[?]"}, {fixed, "float32[?]"},
	} {
		if got := tc.n.TypeString(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.n.Name(), got, tc.want)
		}
	}
	if !strings.Contains(g.String(), "func graph(x0 float32[s0, 16], x1 float32[16, 8])") {
		t.Errorf("printed graph lacks symbols:\n%s", g)
	}
}

// Symbols are probed with sizes near 10^5: four of them multiply past an
// int. The shape rules must still follow them, not report an overflow.
func TestInferSymbolsManyDims(t *testing.T) {
	g := &Graph{}
	x := g.Input([]int{2, 3, 4, 5}, Float32, CPU, "")
	y := g.Input([]int{1, 3, 1, 5}, Float32, CPU, "")
	sum, _ := g.Call(OpAdd, Attrs{}, "", x, y) // broadcast
	tr, _ := g.Call(OpTranspose, Attrs{Dim: 0, Dim2: 3}, "", sum)
	ex, _ := g.Call(OpExpand, Attrs{Dims: []int{7, -1, -1, -1, -1}}, "", tr)
	red, _ := g.Call(OpSum, Attrs{Dims: []int{1}}, "", ex)
	g.Outputs = []*Node{red}
	g.InferSymbols([][]int{{1, 2, 3, 4}, {0, 2, 0, 4}})
	for _, tc := range []struct {
		n    *Node
		want string
	}{
		{sum, "float32[s0, s1, s2, s3]"}, {tr, "float32[s3, s1, s2, s0]"},
		{ex, "float32[7, s3, s1, s2, s0]"}, {red, "float32[7, s1, s2, s0]"},
	} {
		if got := tc.n.TypeString(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.n.Name(), got, tc.want)
		}
	}
}
