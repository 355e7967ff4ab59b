package fuse

import (
	"testing"

	"gocompile/ir"
)

// Intermediates that die early lend their buffers to later ones, and the
// plan never lets two live values share one.
func TestPlanBuffersReuse(t *testing.T) {
	g := &ir.Graph{}
	x := g.Input([]int{64, 32}, ir.Float32, ir.CPU, "")
	col := ir.Attrs{KeepDim: true} // reductions over every dim stay unfused
	v := call(t, g, ir.OpExp, ir.Attrs{}, x)
	for range 4 {
		s := call(t, g, ir.OpSum, col, v)
		v = call(t, g, ir.OpDiv, ir.Attrs{}, v, s)
	}
	g.Outputs = []*ir.Node{call(t, g, ir.OpNeg, ir.Attrs{}, v)}
	rs, err := Partition(g)
	if err != nil {
		t.Fatal(err)
	}
	p := PlanBuffers(g, rs, func(*Region) bool { return true })
	planned := 0
	slot := make([]int, len(rs))
	for i, r := range rs {
		s, ok := p.Slot[r.Root]
		slot[i] = -1
		if ok {
			slot[i] = s
			planned++
			if p.SlotBytes[s] < Bytes(r.Root) {
				t.Errorf("%v: buffer %d holds %d bytes, value needs %d", r, s, p.SlotBytes[s], Bytes(r.Root))
			}
		}
	}
	if planned != len(rs)-1 {
		t.Errorf("%d of %d regions planned; all but the output should be", planned, len(rs))
	}
	if len(p.SlotBytes) >= planned || len(p.SlotBytes) > 4 {
		t.Errorf("%d buffers for %d values: no reuse (%v)", len(p.SlotBytes), planned, p)
	}
	// No two values live at once share a buffer: replay the lifetimes.
	last := map[int]int{} // region -> its value's last reader
	for i, r := range rs {
		for _, in := range r.Inputs {
			for j, q := range rs {
				if q.Root == in.Node {
					last[j] = i
				}
			}
		}
		if r.Expr == nil {
			for _, a := range nodeArgs(r.Root) {
				for j, q := range rs {
					if q.Root == a {
						last[j] = i
					}
				}
			}
		}
	}
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if slot[i] >= 0 && slot[i] == slot[j] && last[i] >= j {
				t.Errorf("regions %d and %d share buffer %d while both live", i, j, slot[i])
			}
		}
	}
	if p.PeakBytes > p.EagerPeakBytes {
		t.Errorf("plan peak %d above eager's %d", p.PeakBytes, p.EagerPeakBytes)
	}
}

// Fusion keeps intermediates out of memory: the pointwise chain and
// softmax peak at their output alone, below eager's peak.
func TestPlanPeakBelowEager(t *testing.T) {
	for name, build := range map[string]func(g *ir.Graph, x *ir.Node) *ir.Node{
		"chain": func(g *ir.Graph, x *ir.Node) *ir.Node {
			a := call(t, g, ir.OpAdd, ir.Attrs{}, call(t, g, ir.OpMul, ir.Attrs{}, x, ir.ScalarOf(1.5)), ir.ScalarOf(0.5))
			return call(t, g, ir.OpMul, ir.Attrs{}, call(t, g, ir.OpGELU, ir.Attrs{}, a), call(t, g, ir.OpSigmoid, ir.Attrs{}, x))
		},
		"softmax": func(g *ir.Graph, x *ir.Node) *ir.Node { return call(t, g, ir.OpSoftmax, ir.Attrs{Dim: -1}, x) },
	} {
		g := &ir.Graph{}
		x := g.Input([]int{1024, 4096}, ir.Float32, ir.CPU, "")
		g.Outputs = []*ir.Node{build(g, x)}
		if _, err := ir.Decompose(g); err != nil {
			t.Fatal(err)
		}
		ir.DCE(g)
		rs, err := Partition(g)
		if err != nil {
			t.Fatal(err)
		}
		p := PlanBuffers(g, rs, func(*Region) bool { return true })
		out := Bytes(g.Outputs[0])
		if p.PeakBytes != out || p.EagerPeakBytes <= p.PeakBytes {
			t.Errorf("%s: peak %d bytes, eager %d, output %d: want the output alone, below eager", name, p.PeakBytes, p.EagerPeakBytes, out)
		}
		t.Logf("%s 1024x4096 float32: %v", name, p)
	}
}
