// Command dynamic shows how tensor.Compile handles inputs whose batch size
// changes from call to call, as a server's batches do:
//
//   - static (tensor.Dynamic(false)): every new size compiles a new graph,
//     until RecompileLimit is reached and the function runs eagerly;
//   - automatic (the default): the second size recompiles once with the
//     batch dim dynamic, and that graph serves every later size;
//   - dynamic up front (tensor.Dynamic(true) or tensor.MarkDynamic): one
//     compile, no recompiles.
//
// It also shows tensor.DynamicScalars: a scale argument that changes on
// every call without recompiling. It runs on the CPU, or on a GPU with
// -device cuda or GOCOMPILE_DEVICE=cuda.
//
//	go run ./examples/dynamic
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"gocompile/tensor"
)

// batches is the sequence of batch sizes the examples are called with.
var batches = []int{8, 16, 3, 32, 64, 7}

const features, hidden = 32, 16

// head is a small scoring head: a linear layer, GELU, and a softmax over
// the hidden units, then the row sums of the squares. It never reads a
// size, so nothing in it ties the graph to a batch size.
func head(x, w, b *tensor.Tensor) *tensor.Tensor {
	h := x.Linear(w, b).GELU().Softmax(-1)
	return h.Mul(h).Sum(-1)
}

// scaled is a softmax with a temperature: scale is a number argument.
func scaled(x *tensor.Tensor, scale float64) *tensor.Tensor {
	return x.MulScalar(scale).Softmax(-1)
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dynamic:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dynamic", flag.ContinueOnError)
	device := fs.String("device", "", "cpu, cuda or cuda:N (default: GOCOMPILE_DEVICE, else cpu)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := tensor.UseDevice(*device); err != nil {
		return err
	}
	// Compile's warnings (the recompile limit) go through log/slog; show
	// them with the rest of the output.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // stable output
			}
			return a
		},
	})))
	defer slog.SetDefault(prev)

	g := tensor.NewGenerator(1)
	w := g.Randn(tensor.Float32, hidden, features).MulScalar(0.2)
	b := g.Randn(tensor.Float32, hidden).MulScalar(0.1)
	inputs := make([]*tensor.Tensor, len(batches))
	for i, n := range batches {
		inputs[i] = g.Randn(tensor.Float32, n, features)
	}
	fmt.Fprintf(stdout, "device %v; batch sizes %v; x is [batch, %d]\n\n", tensor.DefaultDevice(), batches, features)

	strategies := []struct {
		name string
		opts []tensor.Option
		mark bool
	}{
		{"static      Dynamic(false), RecompileLimit(4)", []tensor.Option{tensor.Dynamic(false), tensor.RecompileLimit(4)}, false},
		{"automatic   (default)", nil, false},
		{"dynamic     Dynamic(true)", []tensor.Option{tensor.Dynamic(true)}, false},
		{"marked      MarkDynamic(x, 0)", nil, true},
	}
	for _, s := range strategies {
		var st tensor.CompileStats
		fn := tensor.Compile(head, append(s.opts, tensor.WithStats(&st))...)
		fmt.Fprintf(stdout, "%s\n", s.name)
		var line strings.Builder
		for i, x := range inputs {
			if s.mark {
				x = tensor.MarkDynamic(x, 0)
			}
			before, eagerBefore := st.Compiles.Load(), st.EagerCalls.Load()
			y := fn(x, w, b)
			if d := maxDiff(y, head(x, w, b)); d > 1e-5 {
				return fmt.Errorf("%s: batch %d differs from eager by %g", s.name, batches[i], d)
			}
			what := "cached"
			switch {
			case st.Compiles.Load() > before && before == 0:
				what = "compile"
			case st.Compiles.Load() > before:
				what = "recompile"
			case st.EagerCalls.Load() > eagerBefore:
				what = "eager"
			}
			fmt.Fprintf(&line, " %d:%s", batches[i], what)
		}
		fmt.Fprintf(stdout, "  calls:%s\n", line.String())
		fmt.Fprintf(stdout, "  stats: calls=%d compiles=%d recompiles=%d eager=%d\n\n",
			st.Calls.Load(), st.Compiles.Load(), st.Recompiles.Load(), st.EagerCalls.Load())
	}

	// The guards show the difference: a static entry pins the batch size,
	// a marked dim is a symbol.
	for _, c := range []struct {
		name string
		x    *tensor.Tensor
	}{
		{"static", g.Randn(tensor.Float32, 8, features)},
		{"MarkDynamic(x, 0)", tensor.MarkDynamic(g.Randn(tensor.Float32, 8, features), 0)},
	} {
		ex, err := tensor.Explain(head, c.x, w, b)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "guards (%s), from Explain:\n", c.name)
		for _, l := range strings.Split(strings.TrimSpace(ex.Guards), "\n") {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
	}
	fmt.Fprintln(stdout)

	// Numbers are guarded by value: each new scale recompiles, unless
	// DynamicScalars passes the scale to the graph on every call.
	x := g.Randn(tensor.Float32, 8, features)
	scales := []float64{0.5, 0.25, 1.5, 3.5, 0.75}
	for _, c := range []struct {
		name string
		opts []tensor.Option
	}{
		{"scale guarded by value", nil},
		{"DynamicScalars(1)", []tensor.Option{tensor.DynamicScalars(1)}},
	} {
		var st tensor.CompileStats
		fn := tensor.Compile(scaled, append(c.opts, tensor.WithStats(&st))...)
		worst := 0.0
		for _, s := range scales {
			worst = max(worst, maxDiff(fn(x, s), scaled(x, s)))
		}
		fmt.Fprintf(stdout, "%-23s scales %v: compiles=%d recompiles=%d, max diff vs eager %.3g\n",
			c.name+":", scales, st.Compiles.Load(), st.Recompiles.Load(), worst)
	}
	return nil
}

func maxDiff(a, b *tensor.Tensor) float64 { return a.Sub(b).Abs().Max().Item() }
