// Command graphbreaks shows graph breaks in compiled functions, how
// tensor.Explain reports them (reason and file:line), and how to remove
// them:
//
//	(a) branching on a value read with Item → tensor.Cond;
//	(b) printing a traced tensor for debugging → print outside;
//	(c) tensor.FullGraph() turns a break into an error.
//
// It runs on the CPU, or on a GPU with -device cuda or
// GOCOMPILE_DEVICE=cuda.
//
//	go run ./examples/graphbreaks
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gocompile/tensor"
)

// (a) gate squashes x and keeps the positive part of h if its total is
// positive, else of -h. Item reads a value: tracing has to run the graph so
// far to know it, and the function compiles into two graphs.
func gate(x *tensor.Tensor) *tensor.Tensor {
	h := x.Tanh().MulScalar(2)
	if h.Sum().Item() > 0 { // graph break: Item
		return h.ReLU()
	}
	return h.Neg().ReLU()
}

// gateCond is gate with the branch in the graph: tensor.Cond records both
// branches and selects with Where.
func gateCond(x *tensor.Tensor) *tensor.Tensor {
	h := x.Tanh().MulScalar(2)
	return tensor.Cond(h.Sum().GtScalar(0),
		func(a ...*tensor.Tensor) *tensor.Tensor { return a[0].ReLU() },
		func(a ...*tensor.Tensor) *tensor.Tensor { return a[0].Neg().ReLU() },
		h)
}

// layer is a linear layer with a GELU; debugOut is where (b) prints.
type layer struct {
	w, b     *tensor.Tensor
	debugOut io.Writer
}

// (b) forwardDebug prints an intermediate tensor while it runs: printing
// needs its values, so the graph breaks there.
func (l *layer) forwardDebug(x *tensor.Tensor) *tensor.Tensor {
	h := x.Linear(l.w, l.b)
	fmt.Fprintf(l.debugOut, "    debug: h[0] = %v\n", h.Select(0, 0)) // graph break: String
	return h.GELU().Softmax(-1)
}

// forward returns the intermediate as a second result, and the caller
// prints it after the compiled call.
func (l *layer) forward(x *tensor.Tensor) (y, h *tensor.Tensor) {
	h = x.Linear(l.w, l.b)
	return h.GELU().Softmax(-1), h
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "graphbreaks:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("graphbreaks", flag.ContinueOnError)
	device := fs.String("device", "", "cpu, cuda or cuda:N (default: GOCOMPILE_DEVICE, else cpu)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := tensor.UseDevice(*device); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "device %v\n", tensor.DefaultDevice())
	g := tensor.NewGenerator(3)

	// (a) Item → Cond. One input whose gate is positive, one negative.
	x := g.Randn(tensor.Float32, 4, 8)
	inputs := []*tensor.Tensor{x.AddScalar(1), x.SubScalar(1)}
	fmt.Fprintln(stdout, "\n(a) branching on Item()")
	if err := explain(stdout, "gate (Item)", gate, inputs[0]); err != nil {
		return err
	}
	if err := explain(stdout, "gateCond (tensor.Cond)", gateCond, inputs[0]); err != nil {
		return err
	}
	var stBreak, stCond tensor.CompileStats
	fastGate := tensor.Compile(gate, tensor.WithStats(&stBreak))
	fastCond := tensor.Compile(gateCond, tensor.WithStats(&stCond))
	for i, in := range inputs {
		want := gate(in) // eager
		a, b := fastGate(in), fastCond(in)
		fmt.Fprintf(stdout, "  input %d (sum of h %+.2f): eager vs compiled gate: %s; eager vs compiled gateCond: %s\n",
			i, in.Tanh().MulScalar(2).Sum().Item(), agreement(want, a), agreement(want, b))
	}
	fmt.Fprintf(stdout, "  stats: gate compiles=%d breaks=%d; gateCond compiles=%d breaks=%d\n",
		stBreak.Compiles.Load(), stBreak.Breaks.Load(), stCond.Compiles.Load(), stCond.Breaks.Load())

	// (b) a debug print inside → print outside.
	fmt.Fprintln(stdout, "\n(b) printing a tensor for debugging")
	l := &layer{w: g.Randn(tensor.Float32, 6, 8).MulScalar(0.3), b: g.Randn(tensor.Float32, 6).MulScalar(0.1), debugOut: stdout}
	in := g.Randn(tensor.Float32, 4, 8)
	fmt.Fprintln(stdout, "  Explain traces forwardDebug, which prints:")
	if err := explain(stdout, "forwardDebug (prints inside)", l.forwardDebug, in); err != nil {
		return err
	}
	if err := explain(stdout, "forward (returns h; the caller prints)", l.forward, in); err != nil {
		return err
	}
	fastDebug, fast := tensor.Compile(l.forwardDebug), tensor.Compile(l.forward)
	fmt.Fprintln(stdout, "  compiled forwardDebug, first call (it traces and runs in one go):")
	fastDebug(in)
	fmt.Fprintln(stdout, "  compiled forwardDebug, second call (fn runs on every call, segment by segment):")
	y1 := fastDebug(in)
	y2, h := fast(in)
	fmt.Fprintf(stdout, "    after the call: h[0] = %v\n", h.Select(0, 0))
	fmt.Fprintf(stdout, "  forwardDebug vs forward, compiled: %s; forward compiled vs eager: %s\n",
		agreement(y1, y2), agreement(y2, l.forwardDebugQuiet(in)))

	// (c) FullGraph makes the break an error, which Try returns.
	fmt.Fprintln(stdout, "\n(c) FullGraph() turns a break into an error")
	strict := tensor.Compile(gate, tensor.FullGraph())
	err := tensor.Try(func() { strict(inputs[0]) })
	fmt.Fprintf(stdout, "  Compile(gate, FullGraph()): %v\n", err)
	strictCond := tensor.Compile(gateCond, tensor.FullGraph())
	err = tensor.Try(func() { strictCond(inputs[0]) })
	fmt.Fprintf(stdout, "  Compile(gateCond, FullGraph()): err = %v\n", err)
	return nil
}

// forwardDebugQuiet is forwardDebug without the print, run eagerly as the
// reference.
func (l *layer) forwardDebugQuiet(x *tensor.Tensor) *tensor.Tensor {
	return x.Linear(l.w, l.b).GELU().Softmax(-1)
}

// explain prints Explain's report of fn on args: graphs, breaks with their
// reasons and file:line, and the ops captured.
func explain(w io.Writer, name string, fn any, args ...any) error {
	ex, err := tensor.Explain(fn, args...)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  Explain %s: %d graph(s), %d break(s)\n", name, ex.Graphs, len(ex.Breaks))
	for _, b := range ex.Breaks {
		fmt.Fprintf(w, "    break: %s\n", b)
	}
	var ops []string
	for _, op := range sortedKeys(ex.OpCounts) {
		ops = append(ops, fmt.Sprintf("%s×%d", op, ex.OpCounts[op]))
	}
	fmt.Fprintf(w, "    ops: %s\n", strings.Join(ops, " "))
	return nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// agreement compares two results: fused compiled kernels may round
// differently from eager ones by a few ulps, so they agree within 1e-5.
func agreement(a, b *tensor.Tensor) string {
	d := a.Sub(b).Abs().Max().Item()
	if d <= 1e-5 {
		return fmt.Sprintf("agree (max diff %.1e)", d)
	}
	return fmt.Sprintf("DIFFER (max diff %g)", d)
}
