package tensor

import (
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
}

func (e *Explanation) String() string {
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
		if v.Kind() != reflect.Func {
			throw("Explain", nil, "pass a func", "%T is not a function", fn)
		}
		ft := v.Type()
		if len(args) != ft.NumIn() {
			throw("Explain", nil, "pass one argument per parameter", "%d arguments for %d parameters", len(args), ft.NumIn())
		}
		in := make([]reflect.Value, len(args))
		for i, a := range args {
			if a == nil {
				in[i] = reflect.Zero(ft.In(i))
			} else {
				in[i] = reflect.ValueOf(a)
			}
		}
		c := newCompiled(v, nil)
		fa := c.flatten(in)
		ge, _ := guard.NewCache(c.policy(fa), c.opts.limit).Plan(&fa.call)
		e := c.compileEntry(ge, fa, in)
		ex = &Explanation{Graphs: len(e.graphs), Breaks: e.breaks, OpCounts: map[string]int{}, Guards: ge.String()}

		for _, g := range e.graphs {
			ex.Graph = append(ex.Graph, g.String())
			if regions, err := fuse.Partition(g); err == nil {
				regions = fuse.Horizontal(regions)
				for _, r := range regions {
					if r.Root.Op.Kind != ir.View {
						ex.Regions = append(ex.Regions, r.String())
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
