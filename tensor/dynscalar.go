package tensor

import (
	"fmt"
	"math"
	"reflect"

	"gocompile/array"
	"gocompile/ir"
	"gocompile/trace"
)

// Dynamic scalars (DynamicScalars) reach a compiled graph as inputs. Go
// arithmetic on them is invisible to the tracer, so Compile traces fn at
// two values of every dynamic scalar and compares the graphs: where they
// differ only in numbers that equal the scalars, those places become slots
// the program fills on each call; any other difference means fn computed
// with the number, and it is guarded by value instead.

// perturb is the second value dynamic scalar i is traced at: different for
// every scalar, integral exactly when v is.
func perturb(i int, v float64) float64 {
	if v == math.Trunc(v) {
		return v + float64(7*(i+1))
	}
	return v*1.3125 + 0.0625*float64(i+1)
}

// compileDynamic traces fn twice and compiles a program with scalar slots,
// or returns nil and why it cannot.
func (c *compiled) compileDynamic(fa *flatArgs, args []reflect.Value) (*entry, string) {
	// Scalar slots live in eager programs: with the default backend, such
	// entries run op by op rather than recompiling for every value.
	if c.opts.backend != "eager" && c.opts.backend != defaultBackend {
		return nil, fmt.Sprintf("backend %q takes no scalar inputs", c.opts.backend)
	}
	trace1 := func(args []reflect.Value) (*ir.Graph, []reflect.Value, *tracer) {
		tr := c.compileTracer()
		defer tr.release() // also when fn panics
		res := c.traceRun(tr, fa, args)
		if len(tr.breaks) > 0 {
			return nil, res, tr
		}
		g := tr.g
		g.Outputs = resultNodes(tr, resultTensors(res))
		ir.Decompose(g) // the passes that cannot depend on a scalar's value
		ir.CSE(g)
		ir.DCE(g)
		return g, res, tr
	}
	g1, res, tr1 := trace1(args)
	if len(tr1.breaks) > 0 {
		// fn has run up to its last segment, writes included: finish this
		// call here, as compileEntry does, rather than run fn again. A
		// function with breaks runs fn on every call, with its scalars.
		e := &entry{breaks: tr1.breaks, ninputs: len(fa.tensors), written: tr1.writtenKeys()}
		e.firstResults = c.finish(tr1, res)
		e.graphs = tr1.segments
		return e, ""
	}
	if len(tr1.mut.known) > 0 || len(tr1.argWrites) > 0 {
		return nil, "fn writes tensors"
	}
	if len(tr1.leafGrads) > 0 {
		return nil, "fn uses gradients"
	}
	k := 0
	shifted := func(v float64) float64 { k++; return perturb(k-1, v) }
	args2 := make([]reflect.Value, len(args))
	for i, a := range args {
		var l trace.Leaves
		trace.Flatten(a, tensorType, &l)
		j := 0
		same := func() reflect.Value { j++; return l.Tensors[j-1] }
		if c.opts.dynScalars[i] {
			args2[i] = trace.RebuildScalars(a, tensorType, same, shifted)
		} else {
			args2[i] = a
		}
	}
	g2, _, tr2 := trace1(args2)
	if len(tr2.breaks) > 0 {
		return nil, "fn breaks the graph at other values"
	}
	slots, why := diffGraphs(g1, g2, fa.dyn)
	if why != "" {
		return nil, why
	}
	p := arrayProgram{array.NewEagerProgram(g1, slots)}
	return &entry{prog: p, template: res, graphs: []*ir.Graph{g1}, ninputs: len(fa.tensors), sources: c.resultSources(g1), checks: tr1.checks}, ""
}

// diffGraphs finds where two traces differ: only in scalar numbers that
// are the dynamic scalars (at their first and perturbed values), or it
// says what else differs.
func diffGraphs(g1, g2 *ir.Graph, dyn []float64) ([]array.ScalarSlot, string) {
	if len(g1.Nodes) != len(g2.Nodes) || len(g1.Outputs) != len(g2.Outputs) {
		return nil, "the graph's structure depends on the scalar's value"
	}
	idx1, idx2 := map[*ir.Node]int{}, map[*ir.Node]int{}
	for i := range g1.Nodes {
		idx1[g1.Nodes[i]], idx2[g2.Nodes[i]] = i, i
	}
	for i := range g1.Outputs {
		if idx1[g1.Outputs[i]] != idx2[g2.Outputs[i]] {
			return nil, "the graph's outputs depend on the scalar's value"
		}
	}
	which := func(v1, v2 float64) int {
		for s, v := range dyn {
			if v1 == v && v2 == perturb(s, v) {
				return s
			}
		}
		return -1
	}
	var slots []array.ScalarSlot
	for i := range g1.Nodes {
		a, b := g1.Nodes[i], g2.Nodes[i]
		aa, ba := a.Attrs, b.Attrs
		aa.Scalars, ba.Scalars = nil, nil
		if a.Kind != b.Kind || a.Op != b.Op || len(a.Args) != len(b.Args) || !ir.AttrsEqual(aa, ba) ||
			len(a.Attrs.Scalars) != len(b.Attrs.Scalars) || a.DType != b.DType || !ir.SameShape(a.Shape, b.Shape) {
			return nil, fmt.Sprintf("node %s (%s) depends on the scalar's value", a.Name(), a.Loc)
		}
		for j := range a.Args {
			switch x := a.Args[j].(type) {
			case *ir.Node:
				y, ok := b.Args[j].(*ir.Node)
				if !ok || idx1[x] != idx2[y] {
					return nil, fmt.Sprintf("node %s (%s) depends on the scalar's value", a.Name(), a.Loc)
				}
			case ir.Scalar:
				y, ok := b.Args[j].(ir.Scalar)
				if !ok || x.DType != y.DType {
					return nil, fmt.Sprintf("node %s (%s) changes type with the scalar", a.Name(), a.Loc)
				}
				if x.Value != y.Value {
					s := which(x.Value, y.Value)
					if s < 0 {
						return nil, fmt.Sprintf("node %s (%s) uses a number computed from the scalar; pass it as a 0-d tensor", a.Name(), a.Loc)
					}
					slots = append(slots, array.ScalarSlot{Node: i, Arg: j, Scalar: s})
				}
			default:
				if b.Args[j] != nil || x != nil {
					return nil, fmt.Sprintf("node %s (%s) has an unexpected operand", a.Name(), a.Loc)
				}
			}
		}
		for k := range a.Attrs.Scalars {
			if v1, v2 := a.Attrs.Scalars[k], b.Attrs.Scalars[k]; v1 != v2 {
				s := which(v1, v2)
				if s < 0 {
					return nil, fmt.Sprintf("node %s (%s) uses a number computed from the scalar; pass it as a 0-d tensor", a.Name(), a.Loc)
				}
				slots = append(slots, array.ScalarSlot{Node: i, Arg: -1, Attr: k, Scalar: s})
			}
		}
	}
	return slots, ""
}
