package program

import (
	"math"
	"testing"

	"gocompile/array"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// A fused kernel whose value overwrites a storage whole stores into it
// directly, and the write copies nothing: where the kernel reads that
// storage only element for element in the member that writes it. Where
// another layout or another member reads it, the kernel writes a buffer
// and the write copies it in. Either way the storage ends with the
// written value and the other results see the old one.
func TestDirectStores(t *testing.T) {
	const n = 5
	for _, c := range []struct {
		name string
		// src builds the written value from the storage's old contents
		// and g, and maybe a second result; want gives the written value
		// and that result at (i, j) from the old contents.
		src    func(g *ir.Graph, base, grad *ir.Node) (*ir.Node, *ir.Node)
		want   func(old []float64, i, j int) (float64, float64)
		direct bool
	}{
		{"m·0.9 + g", func(g *ir.Graph, base, grad *ir.Node) (*ir.Node, *ir.Node) {
			return mustCall(t, g, ir.OpAdd, ir.Attrs{}, mustCall(t, g, ir.OpMul, ir.Attrs{}, base, ir.Scalar{Value: 0.9, DType: ir.Float64}), grad), nil
		}, func(old []float64, i, j int) (float64, float64) {
			return old[i*n+j]*0.9 + grad(i, j), 0
		}, true},
		{"the transposed storage + g", func(g *ir.Graph, base, grad *ir.Node) (*ir.Node, *ir.Node) {
			return mustCall(t, g, ir.OpAdd, ir.Attrs{}, mustCall(t, g, ir.OpTranspose, ir.Attrs{Dim: 0, Dim2: 1}, base), grad), nil
		}, func(old []float64, i, j int) (float64, float64) {
			return old[j*n+i] + grad(i, j), 0
		}, false},
		{"another result reads the storage", func(g *ir.Graph, base, grad *ir.Node) (*ir.Node, *ir.Node) {
			return mustCall(t, g, ir.OpMul, ir.Attrs{}, base, grad), mustCall(t, g, ir.OpExp, ir.Attrs{}, base)
		}, func(old []float64, i, j int) (float64, float64) {
			return old[i*n+j] * grad(i, j), math.Exp(old[i*n+j])
		}, false},
	} {
		old := make([]float64, n*n)
		for i := range old {
			old[i] = float64(i%7) - 2.5
		}
		store := array.FromFloat64s(old, ir.Float32, n*n)
		g := &ir.Graph{}
		base := g.Const(store, []int{n * n}, ir.Float32, ir.CPU, "m")
		gn := g.Input([]int{n, n}, ir.Float32, ir.CPU, "g")
		src, other := c.src(g, mustCall(t, g, ir.OpReshape, ir.Attrs{Dims: []int{n, n}}, base), gn)
		whole := ir.StridedLayout(ir.Layout{Shape: []int{n, n}, Strides: []int{n, 1}})
		w := mustCall(t, g, ir.OpAsStridedScatter, whole, base, src)
		w.Attrs.KeepDim = true // in place, as markInPlace decides for these graphs
		g.Outputs = []*ir.Node{w}
		if other != nil {
			g.Outputs = append(g.Outputs, other)
		}
		p, err := newInductorProgramWith(g, Config{})
		if err != nil {
			t.Fatal(err)
		}
		grads := make([]float64, n*n)
		for i := range n {
			for j := range n {
				grads[i*n+j] = grad(i, j)
			}
		}
		in := []*array.Array{array.FromFloat64s(grads, ir.Float32, n, n)}
		for run := range 2 {
			// The first run builds the kernels: its write copies, and the
			// caller writes the storage back, as package tensor does.
			before := stats.DirectStores.Load()
			outs := p.Run(in)
			if run == 0 {
				if outs[0].SharesStorage(store) {
					t.Errorf("%s: the first run wrote the storage in place", c.name)
				}
				checkStore(t, c.name+", first run", outs[0].Float64s(), outs, other != nil, old, c.want)
				array.CopyInto(store, outs[0])
				old = store.Float64s()
				continue
			}
			if !outs[0].SharesStorage(store) {
				t.Errorf("%s: the write's result is not the storage", c.name)
			}
			if direct := stats.DirectStores.Load() > before; direct != c.direct {
				t.Errorf("%s: stored directly %v, want %v", c.name, direct, c.direct)
			}
			checkStore(t, c.name, store.Float64s(), outs, other != nil, old, c.want)
		}
	}
}

// checkStore checks the written value got, and the other result where
// there is one, against want of the storage's old contents.
func checkStore(t *testing.T, name string, got []float64, outs []*array.Array, other bool, old []float64, want func(old []float64, i, j int) (float64, float64)) {
	t.Helper()
	const n = 5
	var res []float64
	if other {
		res = outs[1].Float64s()
	}
	for i := range n {
		for j := range n {
			wv, wr := want(old, i, j)
			if math.Abs(got[i*n+j]-wv) > 1e-5 {
				t.Fatalf("%s: storage (%d, %d) = %v, want %v", name, i, j, got[i*n+j], wv)
			}
			if res != nil && math.Abs(res[i*n+j]-wr) > 1e-4*math.Abs(wr) {
				t.Fatalf("%s: other result (%d, %d) = %v, want %v", name, i, j, res[i*n+j], wr)
			}
		}
	}
}

func grad(i, j int) float64 { return float64(i) - 0.5*float64(j) }
