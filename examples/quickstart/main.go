// Command quickstart shows gocompile's tensor API: creating tensors,
// broadcasting arithmetic, views that share storage, reductions, a small
// MLP run eagerly and compiled with tensor.Compile, and turning a bad
// shape into an error. It runs on the CPU, or on a GPU with -device cuda
// or GOCOMPILE_DEVICE=cuda.
//
//	go run ./examples/quickstart [-device cuda]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"gocompile/tensor"
)

// mlp is a two-layer perceptron in the layout torch.nn.Linear uses.
type mlp struct {
	w1, b1, w2, b2 *tensor.Tensor
}

func newMLP(in, hidden, out int) *mlp {
	g := tensor.NewGenerator(42)
	return &mlp{
		w1: g.Randn(tensor.Float32, hidden, in).MulScalar(0.1),
		b1: tensor.Zeros(tensor.Float32, hidden),
		w2: g.Randn(tensor.Float32, out, hidden).MulScalar(0.1),
		b2: tensor.Zeros(tensor.Float32, out),
	}
}

func (m *mlp) forward(x *tensor.Tensor) *tensor.Tensor {
	return x.Linear(m.w1, m.b1).GELU().Linear(m.w2, m.b2).Softmax(-1)
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run is the example, with its command-line arguments, writing to w.
func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	device := fs.String("device", "", "cpu, cuda or cuda:N (default: GOCOMPILE_DEVICE, else cpu)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := tensor.UseDevice(*device); err != nil {
		return err
	}
	fmt.Fprintln(w, "device:", tensor.DefaultDevice())

	x := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	bias := tensor.FromSlice([]float32{0.5, -1, 2}, 3)
	fmt.Fprintln(w, "x + bias =", x.Add(bias)) // bias broadcasts over rows
	fmt.Fprintln(w, "row sums =", x.Sum(1))
	fmt.Fprintln(w, "softmax  =", x.Softmax(-1))

	// Views share storage: writing through the transpose changes x.
	xt := x.T()
	xt.Set(100, 2, 1)
	fmt.Fprintln(w, "after xt[2,1] = 100, x =", x)

	// A small MLP, run eagerly on a batch of 64.
	model := newMLP(256, 512, 10)
	batch := tensor.Randn(7, tensor.Float32, 64, 256)
	start := time.Now()
	probs := model.forward(batch)
	fmt.Fprintf(w, "mlp: %v -> %v in %v; first row sums to %.4f\n",
		batch.Shape(), probs.Shape(), time.Since(start).Round(time.Microsecond), probs.Select(0, 0).Sum().Item())

	// Compile the same forward pass: the first call traces it into a graph
	// and compiles it; later calls replay the graph without running forward.
	var stats tensor.CompileStats
	fast := tensor.Compile(model.forward, tensor.WithStats(&stats))
	start = time.Now()
	fast(batch)
	compileTime := time.Since(start)
	// With GOCOMPILE_DISABLE=1, Compile hands back forward itself, which
	// counts nothing.
	compiled := stats.Calls.Load() > 0
	const calls = 20
	timeIt := func(f func(*tensor.Tensor) *tensor.Tensor) time.Duration {
		start := time.Now()
		for range calls {
			f(batch)
		}
		return time.Since(start) / calls
	}
	eagerTime, compiledTime := timeIt(model.forward), timeIt(fast)
	// Fused kernels may round differently from eager ones by a few ulps.
	diff := fast(batch).Sub(probs).Abs().Max().Item()
	first := "first call (trace + compile)"
	if !compiled {
		first = "compilation disabled by GOCOMPILE_DISABLE=1, so every call runs eagerly; first call"
	}
	fmt.Fprintf(w, "compiled: %s %v; per call %v compiled vs %v eager (%.2fx); matches eager: %v (max difference %.1e)\n",
		first, compileTime.Round(time.Microsecond), compiledTime.Round(time.Microsecond), eagerTime.Round(time.Microsecond),
		float64(eagerTime)/float64(compiledTime), diff <= 1e-5, diff)

	// Explain shows what Compile captured.
	ex, err := tensor.Explain(model.forward, batch)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "explain: %d graph, %d breaks, %d ops\n", ex.Graphs, len(ex.Breaks), countOps(ex.OpCounts))

	// Misuse panics with a *tensor.Error; Try turns it into an error.
	err = tensor.Try(func() { model.forward(tensor.Zeros(tensor.Float32, 64, 100)) })
	fmt.Fprintln(w, "bad input:", err)
	return nil
}

func countOps(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
