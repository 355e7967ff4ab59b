package fuse

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gocompile/ir"
)

// layoutGraphs are graphs with every kind of region.
func layoutGraphs(t *testing.T) map[string]*ir.Graph {
	out := map[string]*ir.Graph{}
	for name, build := range map[string]func(g *ir.Graph) []*ir.Node{
		"softmax and siblings": func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			s := call(t, g, ir.OpSoftmax, ir.Attrs{Dim: -1}, x)
			return []*ir.Node{s, call(t, g, ir.OpExp, ir.Attrs{}, x), call(t, g, ir.OpSin, ir.Attrs{}, x)}
		},
		"layer norm after a matmul": func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{4, 8}, ir.Float32, ir.CPU, "")
			w := g.Input([]int{8, 8}, ir.Float32, ir.CPU, "")
			m := call(t, g, ir.OpMatMul, ir.Attrs{}, x, w)
			return []*ir.Node{call(t, g, ir.OpLayerNorm, ir.Attrs{Dims: []int{8}, Scalars: []float64{1e-5}}, m, nil, nil)}
		},
		"intermediates in buffers": func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{6, 5}, ir.Float32, ir.CPU, "")
			v := call(t, g, ir.OpExp, ir.Attrs{}, x)
			for range 3 {
				v = call(t, g, ir.OpDiv, ir.Attrs{}, v, call(t, g, ir.OpSum, ir.Attrs{Dims: []int{0}, KeepDim: true}, v))
			}
			return []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, v)}
		},
		"a combo of units that read their own members": func(g *ir.Graph) []*ir.Node {
			return momentUpdates(t, g, []int{8}, []int{3, 4}, []int{5})
		},
		"variance over dims 0 and 2": func(g *ir.Graph) []*ir.Node {
			x := g.Input([]int{3, 4, 5}, ir.Float32, ir.CPU, "")
			return []*ir.Node{call(t, g, ir.OpVar, ir.Attrs{Dims: []int{0, 2}, Scalars: []float64{1}}, x)}
		},
	} {
		g := &ir.Graph{}
		g.Outputs = build(g)
		if _, err := ir.Decompose(g); err != nil {
			t.Fatal(err)
		}
		ir.DCE(g)
		out[name] = g
	}
	return out
}

func planned(rs []*Region, p *Plan) string {
	s := describe(rs)
	for _, r := range rs {
		for _, m := range r.Members() {
			if slot, ok := p.Slot[m.Root]; ok {
				s += fmt.Sprintf(" %s@%d", m.Root.Name(), slot)
			}
		}
	}
	return s + fmt.Sprint(p.SlotBytes, p.PeakBytes, p.EagerPeakBytes)
}

// A layout encodes, decodes and rebuilds the same regions, expressions and
// plan as partitioning gives.
func TestLayoutRoundTrip(t *testing.T) {
	for name, g := range layoutGraphs(t) {
		rs, err := Partition(g)
		if err != nil {
			t.Fatal(err)
		}
		rs = Horizontal(rs)
		p := PlanBuffers(g, rs, func(*Region) bool { return true })
		b, err := NewLayout(g, rs).MarshalMsg(nil)
		if err != nil {
			t.Fatal(err)
		}
		var l Layout
		if _, err := l.UnmarshalMsg(b); err != nil {
			t.Fatal(err)
		}
		got, err := l.Rebuild(g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gp := PlanBuffers(g, got, func(*Region) bool { return true })
		if planned(got, gp) != planned(rs, p) {
			t.Errorf("%s: rebuilt %s, partitioned %s", name, planned(got, gp), planned(rs, p))
		}
		for i := range rs {
			for j, m := range rs[i].Members() {
				gm := got[i].Members()[j]
				if fmt.Sprint(m.Expr) != fmt.Sprint(gm.Expr) || len(m.Inputs) != len(gm.Inputs) {
					t.Errorf("%s: region %v rebuilt with expression %v, want %v", name, m, gm.Expr, m.Expr)
				}
				if m.Row != nil && fmt.Sprint(m.Row.Full, m.Row.Dims, len(m.Row.Stages)) != fmt.Sprint(gm.Row.Full, gm.Row.Dims, len(gm.Row.Stages)) {
					t.Errorf("%s: row region %v rebuilt over %v dims %v, want %v dims %v", name, m, gm.Row.Full, gm.Row.Dims, m.Row.Full, m.Row.Dims)
				}
			}
		}
	}
}

// A layout that does not fit the graph is an error, never a panic or a
// wrong program: positions out of range, nodes twice or left out, regions
// of the wrong kind, readers before writers.
func TestLayoutRebuildRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, g := range layoutGraphs(t) {
		rs, err := Partition(g)
		if err != nil {
			t.Fatal(err)
		}
		rs = Horizontal(rs)
		good := NewLayout(g, rs)
		for i := range 500 {
			b, _ := good.MarshalMsg(nil)
			var l Layout
			l.UnmarshalMsg(b)
			mutate(rng, &l, len(g.Nodes))
			func() {
				defer func() {
					if e := recover(); e != nil {
						t.Fatalf("%s mutation %d: Rebuild panicked: %v", name, i, e)
					}
				}()
				if rebuilt, err := l.Rebuild(g); err == nil && describe(rebuilt) != describe(rs) {
					// A mutation may still describe a valid partition (a
					// region split in two); it must then cover every node.
					n := 0
					for _, r := range rebuilt {
						for _, m := range r.Members() {
							n += len(m.Nodes)
						}
					}
					calls := 0
					for _, nd := range g.Nodes {
						if nd.Kind == ir.CallNode {
							calls++
						}
					}
					if n != calls {
						t.Fatalf("%s mutation %d: rebuilt %d nodes of %d", name, i, n, calls)
					}
				}
			}()
		}
	}
}

func mutate(rng *rand.Rand, l *Layout, nodes int) {
	if len(l.Regions) == 0 {
		return
	}
	r := &l.Regions[rng.IntN(len(l.Regions))]
	switch rng.IntN(8) {
	case 0:
		r.Kind = uint8(rng.IntN(5))
	case 1:
		if len(r.Nodes) > 0 {
			r.Nodes[rng.IntN(len(r.Nodes))] = int32(rng.IntN(nodes+4) - 2)
		}
	case 2:
		r.Nodes = append(r.Nodes, int32(rng.IntN(nodes)))
	case 3:
		i, j := rng.IntN(len(l.Regions)), rng.IntN(len(l.Regions))
		l.Regions[i], l.Regions[j] = l.Regions[j], l.Regions[i]
	case 4:
		l.Nodes += int32(rng.IntN(3) - 1)
	case 5:
		r.Full = append(r.Full[:0:0], int64(rng.IntN(9)))
	case 6:
		if len(r.Units) > 0 {
			r.Units[rng.IntN(len(r.Units))] += int32(rng.IntN(5) - 2)
		}
	case 7:
		if len(r.Members) > 1 { // a member moved before what it reads
			i, j := rng.IntN(len(r.Members)), rng.IntN(len(r.Members))
			r.Members[i], r.Members[j] = r.Members[j], r.Members[i]
		}
	}
}
