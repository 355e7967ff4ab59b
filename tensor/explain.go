package tensor

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"

	"gocompile/fuse"
	"gocompile/inductor/program"

	"gocompile/guard"
	"gocompile/ir"
	"gocompile/trace"
)

// CompileStats counts what a compiled function did. Pass one to
// WithStats; it is safe to read while the function runs.
type CompileStats struct {
	Calls      atomic.Int64 // calls of the compiled function
	Compiles   atomic.Int64 // guard entries compiled (the first compile included)
	Recompiles atomic.Int64 // compiles after the first
	Breaks     atomic.Int64 // graph breaks met while tracing
	EagerCalls atomic.Int64 // calls run eagerly after the recompile limit
}

// WithStats makes the compiled function count its calls, compiles and
// breaks into s.
func WithStats(s *CompileStats) Option { return func(o *options) { o.stats = s } }

// Explanation is what Explain found out about a function.
type Explanation struct {
	Graphs   int            // graphs the function compiles to (breaks+1)
	Breaks   []trace.Break  // every graph break, with its reason and file:line
	OpCounts map[string]int // ops in the captured graphs, by registry name
	Guards   string         // the guards installed for these arguments
	Graph    []string       // each graph, printed
	// Regions lists the fusion regions of every graph, each of which the
	// inductor backend runs as one kernel (views need none).
	Regions []string
	// PeakBytes is the most memory the compiled graphs hold at once for
	// their values (inputs excluded), by their buffer plans at these
	// shapes; EagerPeakBytes is the same running the ops one by one.
	PeakBytes, EagerPeakBytes int64
	// Gradients lists the leaves whose gradients a training step's graph
	// outputs (after its results), when the function calls Backward or
	// sets gradients: each added to what the leaf holds, or "(replaced)"
	// or "(cleared)" where the function set or cleared it (ZeroGrad).
	Gradients []string
	// For a function whose result requires gradients and whose Backward
	// is taken after the call: the joint graph split in two (see
	// ir.SplitJoint), the forward half (results, then saved values) and
	// the backward half (gradients from the saved values and the upstream
	// gradient), the saved values and those the backward recomputes
	// instead; Split says why not where there is none.
	Forward, Backward string
	Saved, Recomputed []string
	Split             string
}

func (e *Explanation) String() string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "graphs: %d\ngraph breaks: %d\n", e.Graphs, len(e.Breaks))
	for _, br := range e.Breaks {
		fmt.Fprintf(&b, "  %s\n", br)
	}
	names := make([]string, 0, len(e.OpCounts))
	for n := range e.OpCounts {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString("ops:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-14s %d\n", n, e.OpCounts[n])
	}
	b.WriteString("fusion regions:\n")
	for _, r := range e.Regions {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	fmt.Fprintf(&b, "peak memory: %d bytes compiled, %d bytes eager\n", e.PeakBytes, e.EagerPeakBytes)
	if len(e.Gradients) > 0 {
		b.WriteString("gradients (forward and backward in one graph):\n")
		for _, g := range e.Gradients {
			fmt.Fprintf(&b, "  %s\n", g)
		}
	}
	if e.Forward != "" {
		fmt.Fprintf(&b, "backward after the call: the joint graph split in two\nforward graph:\n%s\nbackward graph:\n%s\n", e.Forward, e.Backward)
		b.WriteString("saved for the backward:\n")
		for _, v := range e.Saved {
			fmt.Fprintf(&b, "  %s\n", v)
		}
		b.WriteString("recomputed in the backward:\n")
		for _, v := range e.Recomputed {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	} else if e.Split != "" {
		fmt.Fprintf(&b, "backward after the call: not split (%s); it recomputes the forward\n", e.Split)
	}
	b.WriteString("guards:\n")
	for _, l := range strings.Split(strings.TrimSpace(e.Guards), "\n") {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// Explain traces fn on args, as its first compiled call would, and reports
// how many graphs it compiles to, every graph break with its reason and
// file:line, the ops captured, and the guards installed. args must match
// fn's parameters.
func Explain(fn any, args ...any) (*Explanation, error) {
	var ex *Explanation
	err := Try(func() {
		v := reflect.ValueOf(fn)
		if v.Kind() != reflect.Func || v.IsNil() {
			throw("Explain", nil, "pass a func", "%T is not a function", fn)
		}
		checkSignature("Explain", v.Type())
		in := explainArgs(v.Type(), args)
		c := newCompiled(v, nil)
		fa := c.flatten(in)
		// A training step (tensors that require gradients) is explained as
		// Compile traces it: forward and backward in one graph.
		c.isGrad = recording() && gradMask(fa.tensors) != ""
		var e *entry
		var ge *guard.Entry
		compile := func() {
			for {
				ge, _ = guard.NewCache(c.policy(fa), c.opts.limit).Plan(&fa.call)
				again := false
				if e, again = c.compileEntry(ge, fa, in); !again {
					return
				}
				fa = c.flatten(in) // with the held gradients it reads
			}
		}
		err := tryTrace(compile)
		if err != nil && !c.isGrad && errors.Is(err, errNeedGradTwin) {
			c.isGrad = true // it reads captured parameters that require gradients
			err = tryTrace(compile)
		}
		var gr *errGradResult
		if err != nil && errors.As(err, &gr) {
			// Backward is taken after the call: the forward compiles plainly.
			c.isGrad = false
			NoGrad(func() { err = tryTrace(compile) })
		}
		if err != nil {
			panic(err)
		}
		var split *partitioned
		var noSplit string
		if gr != nil {
			split, noSplit = c.explainSplit(in, e, gr.k)
		}
		ex = &Explanation{Graphs: len(e.graphs), Breaks: e.breaks, OpCounts: map[string]int{}, Guards: ge.String(), Split: noSplit}
		if split != nil {
			ex.Forward, ex.Backward = split.split.Forward.String(), split.split.Backward.String()
			for _, v := range split.split.Saved {
				ex.Saved = append(ex.Saved, fmt.Sprintf("%s (%s) %v %v, %d bytes", v.Name(), v.Op.Name, v.DType, ir.FormatShape(v.Shape), int64(ir.Numel(v.Shape))*int64(v.DType.Size())))
			}
			for _, v := range split.split.Recomputed {
				ex.Recomputed = append(ex.Recomputed, fmt.Sprintf("%s (%s)", v.Name(), v.Op.Name))
			}
		}
		for _, tg := range e.grads {
			leaf := tg.t
			what := "a captured tensor"
			if tg.arg >= 0 {
				leaf, what = fa.tensors[tg.arg], fmt.Sprintf("argument tensor %d", tg.arg)
			}
			how := "" // added to what the leaf holds
			switch {
			case tg.clear:
				how = " (cleared)"
			case tg.replace:
				how = " (replaced)"
			}
			ex.Gradients = append(ex.Gradients, fmt.Sprintf("%s %v %v%s", what, leaf.dtype(), ir.FormatShape(leaf.shape()), how))
		}

		for _, g := range e.graphs {
			ex.Graph = append(ex.Graph, g.String())
			if regions, err := fuse.Partition(g); err == nil {
				regions = fuse.Horizontal(regions)
				cats := program.InPlaceCats(g, regions)
				for _, r := range regions {
					if r.Root.Op.Kind != ir.View {
						ex.Regions = append(ex.Regions, catNote(r.String(), cats[r.Root]))
					}
				}
				plan := fuse.PlanBuffers(g, regions, program.Plannable)
				ex.PeakBytes = max(ex.PeakBytes, plan.PeakBytes)
				ex.EagerPeakBytes = max(ex.EagerPeakBytes, plan.EagerPeakBytes)
			}
			for _, n := range g.Nodes {
				if n.Kind == ir.CallNode {
					ex.OpCounts[n.Op.Name]++
				}
			}
		}
	})
	return ex, err
}

// catNote is a Cat's region, described as desc, with which of its parts
// the kernels computing them write in place (program.InPlaceCats): "v7
// (cat, in place)" where they all do, "v7 (cat, 1 of 2 parts in place)".
func catNote(desc string, parts []*fuse.CatPart) string {
	n := 0
	for _, p := range parts {
		if p != nil {
			n++
		}
	}
	note := ", in place"
	switch {
	case n == 0 || !strings.HasSuffix(desc, ")"):
		return desc
	case n < len(parts):
		note = fmt.Sprintf(", %d of %d parts in place", n, len(parts))
	}
	return strings.TrimSuffix(desc, ")") + note + ")"
}

// explainSplit splits the joint graph of a function whose result k
// requires gradients, as its first backward would, with a zero upstream
// gradient of the result's shape, and returns the halves or why not.
func (c *compiled) explainSplit(in []reflect.Value, e *entry, k int) (*partitioned, string) {
	var l trace.Leaves
	for _, r := range e.template {
		if err := trace.Flatten(r, tensorType, &l); err != nil {
			return nil, err.Error()
		}
	}
	if k >= len(l.Tensors) {
		return nil, "the result is not a tensor of the trace"
	}
	out := l.Tensors[k].Interface().(*Tensor)
	g := Zeros(out.dtype(), out.shape()...).ToDevice(out.Device())
	var p *partitioned
	why := ""
	err := tryTrace(func() { enableGrad(func() { p, why = c.split(in, g, k) }) })
	if err != nil {
		return nil, err.Error()
	}
	return p, why
}

// tryTrace is Try that also returns the errors a trace stops with to be
// served another way (errNeedGradTwin, errGradResult, errGradEager), which
// a compiled call recovers in recoverGrad.
func tryTrace(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			re, _ := r.(error)
			var gr *errGradResult
			var ge *errGradEager
			if re != nil && (errors.Is(re, errNeedGradTwin) || errors.As(re, &gr) || errors.As(re, &ge)) {
				err = re
				return
			}
			panic(r)
		}
	}()
	return Try(f)
}

// explainArgs converts Explain's arguments to fn's parameters as a
// compiled function receives them: for a variadic fn, the trailing
// arguments are gathered into the variadic slice.
func explainArgs(ft reflect.Type, args []any) []reflect.Value {
	n := ft.NumIn()
	fixed := n
	if ft.IsVariadic() {
		fixed = n - 1
	}
	if len(args) < fixed || (!ft.IsVariadic() && len(args) != n) {
		throw("Explain", nil, "pass one argument per parameter", "%d arguments for %d parameters", len(args), n)
	}
	arg := func(i int, a any, t reflect.Type) reflect.Value {
		if a == nil {
			switch t.Kind() {
			case reflect.Pointer, reflect.Slice:
				return reflect.Zero(t)
			}
			throw("Explain", nil, "pass a value for every parameter", "argument %d is nil, but the parameter is a %v", i, t)
		}
		v := reflect.ValueOf(a)
		if !v.Type().AssignableTo(t) {
			throw("Explain", nil, "pass arguments of the parameters' types", "argument %d is a %v, the parameter a %v", i, v.Type(), t)
		}
		return v
	}
	in := make([]reflect.Value, n)
	for i := range fixed {
		in[i] = arg(i, args[i], ft.In(i))
	}
	if ft.IsVariadic() {
		st := ft.In(n - 1)
		rest := reflect.MakeSlice(st, len(args)-fixed, len(args)-fixed)
		for i, a := range args[fixed:] {
			rest.Index(i).Set(arg(fixed+i, a, st.Elem()))
		}
		in[n-1] = rest
	}
	return in
}
