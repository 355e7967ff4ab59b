// Command transformer runs a GPT-style transformer block — token and
// positional embeddings, causal multi-head self-attention, an MLP with
// GELU, layer norms, residuals and tied output logits — eagerly and
// compiled with tensor.Compile, with its weights in a safetensors file.
//
// If the weights file does not exist, the example writes it first
// (deterministic values from tensor.NewGenerator); -write rewrites it.
// It runs on the CPU, or on a GPU with -device cuda or
// GOCOMPILE_DEVICE=cuda.
//
//	go run ./examples/transformer
//	go run ./examples/transformer -weights /tmp/gpt.safetensors -batch 8
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocompile/tensor"
)

// Config is the model's size.
type Config struct {
	Vocab, D, Heads, Seq int // Seq: the positional table's length
}

// GPT is one transformer block with embeddings and tied logits, in the
// layout of GPT-2's PyTorch modules: Linear weights are [out, in]. Every
// field is a tensor or a number, so a *GPT can be passed to a compiled
// function: Compile flattens it into its tensor inputs (and guards Heads
// by value).
type GPT struct {
	Heads      int
	Wte, Wpe   *tensor.Tensor // [vocab, d], [seq, d]
	Ln1W, Ln1B *tensor.Tensor // [d]
	Wq, Bq     *tensor.Tensor // [d, d], [d]
	Wk, Bk     *tensor.Tensor
	Wv, Bv     *tensor.Tensor
	Wo, Bo     *tensor.Tensor
	Ln2W, Ln2B *tensor.Tensor
	W1, B1     *tensor.Tensor // [4d, d], [4d]
	W2, B2     *tensor.Tensor // [d, 4d], [d]
	LnfW, LnfB *tensor.Tensor
}

// params names every tensor of m as it is stored in the safetensors file.
func (m *GPT) params() map[string]**tensor.Tensor {
	return map[string]**tensor.Tensor{
		"wte.weight": &m.Wte, "wpe.weight": &m.Wpe,
		"h.0.ln_1.weight": &m.Ln1W, "h.0.ln_1.bias": &m.Ln1B,
		"h.0.attn.q_proj.weight": &m.Wq, "h.0.attn.q_proj.bias": &m.Bq,
		"h.0.attn.k_proj.weight": &m.Wk, "h.0.attn.k_proj.bias": &m.Bk,
		"h.0.attn.v_proj.weight": &m.Wv, "h.0.attn.v_proj.bias": &m.Bv,
		"h.0.attn.c_proj.weight": &m.Wo, "h.0.attn.c_proj.bias": &m.Bo,
		"h.0.ln_2.weight": &m.Ln2W, "h.0.ln_2.bias": &m.Ln2B,
		"h.0.mlp.c_fc.weight": &m.W1, "h.0.mlp.c_fc.bias": &m.B1,
		"h.0.mlp.c_proj.weight": &m.W2, "h.0.mlp.c_proj.bias": &m.B2,
		"ln_f.weight": &m.LnfW, "ln_f.bias": &m.LnfB,
	}
}

// newGPT initialises a model deterministically, as GPT-2 does: normal
// weights with standard deviation 0.02, zero biases, unit norm scales.
func newGPT(c Config, seed uint64) *GPT {
	g := tensor.NewGenerator(seed)
	normal := func(shape ...int) *tensor.Tensor { return g.Randn(tensor.Float32, shape...).MulScalar(0.02) }
	zeros := func(n int) *tensor.Tensor { return tensor.Zeros(tensor.Float32, n) }
	ones := func(n int) *tensor.Tensor { return tensor.Ones(tensor.Float32, n) }
	d := c.D
	return &GPT{
		Heads: c.Heads,
		Wte:   normal(c.Vocab, d), Wpe: normal(c.Seq, d),
		Ln1W: ones(d), Ln1B: zeros(d),
		Wq: normal(d, d), Bq: zeros(d),
		Wk: normal(d, d), Bk: zeros(d),
		Wv: normal(d, d), Bv: zeros(d),
		Wo: normal(d, d), Bo: zeros(d),
		Ln2W: ones(d), Ln2B: zeros(d),
		W1: normal(4*d, d), B1: zeros(4 * d),
		W2: normal(d, 4*d), B2: zeros(d),
		LnfW: ones(d), LnfB: zeros(d),
	}
}

// Forward maps token ids [batch, t] to logits [batch, t, vocab]. It reads
// only t; the batch size is inferred with -1, so the function does not tie
// itself to one batch size.
func Forward(m *GPT, idx *tensor.Tensor) *tensor.Tensor {
	t := idx.Size(1)
	d := m.Wte.Size(1)
	hd := d / m.Heads

	x := tensor.Embedding(idx, m.Wte).Add(m.Wpe.Narrow(0, 0, t)) // [b, t, d]

	// Causal self-attention.
	h := x.LayerNorm([]int{d}, m.Ln1W, m.Ln1B, 1e-5)
	heads := func(w, b *tensor.Tensor) *tensor.Tensor { // [b, heads, t, hd]
		return h.Linear(w, b).Reshape(-1, t, m.Heads, hd).Transpose(1, 2)
	}
	q, k, v := heads(m.Wq, m.Bq), heads(m.Wk, m.Bk), heads(m.Wv, m.Bv)
	scores := q.MatMul(k.Transpose(-2, -1)).DivScalar(math.Sqrt(float64(hd))) // [b, heads, t, t]
	pos := tensor.Arange(0, float64(t), 1, tensor.Int64)
	future := pos.Unsqueeze(0).Gt(pos.Unsqueeze(1)) // [t, t]: key after query
	att := scores.MaskedFill(future, math.Inf(-1)).Softmax(-1)
	// Merge the heads: [b, heads, t, hd] → [b, t, heads, hd] → [b, t, d].
	// The transpose is not contiguous, so Reshape has to copy; Contiguous
	// says so explicitly (while tracing, Compile sees every intermediate as
	// contiguous and would record a View that fails on the real strides).
	y := att.MatMul(v).Transpose(1, 2).Contiguous().Reshape(-1, t, d)
	x = x.Add(y.Linear(m.Wo, m.Bo))

	// MLP.
	h = x.LayerNorm([]int{d}, m.Ln2W, m.Ln2B, 1e-5)
	x = x.Add(h.Linear(m.W1, m.B1).GELU().Linear(m.W2, m.B2))

	// Logits with the embedding matrix (weight tying).
	return x.LayerNorm([]int{d}, m.LnfW, m.LnfB, 1e-5).MatMul(m.Wte.T())
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "transformer:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("transformer", flag.ContinueOnError)
	weights := fl.String("weights", filepath.Join(os.TempDir(), "gocompile-transformer.safetensors"), "safetensors file with the weights")
	write := fl.Bool("write", false, "rewrite the weights file even if it exists")
	device := fl.String("device", "", "cpu, cuda or cuda:N (default: GOCOMPILE_DEVICE, else cpu)")
	var c Config
	fl.IntVar(&c.Vocab, "vocab", 256, "vocabulary size")
	fl.IntVar(&c.D, "d", 64, "model width")
	fl.IntVar(&c.Heads, "heads", 4, "attention heads")
	fl.IntVar(&c.Seq, "seq", 32, "sequence length")
	batch := fl.Int("batch", 4, "batch size")
	iters := fl.Int("iters", 20, "timed calls of each version")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if c.D%c.Heads != 0 {
		return fmt.Errorf("-d %d is not a multiple of -heads %d", c.D, c.Heads)
	}
	if err := tensor.UseDevice(*device); err != nil {
		return err
	}
	dev := tensor.DefaultDevice()
	fmt.Fprintf(stdout, "device %v; vocab %d, d %d, heads %d, seq %d, batch %d\n", dev, c.Vocab, c.D, c.Heads, c.Seq, *batch)

	// The weights: written on first use, then always read from the file.
	if _, err := os.Stat(*weights); *write || errors.Is(err, fs.ErrNotExist) {
		if err := save(*weights, newGPT(c, 1234), c); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *weights)
	}
	m, err := load(*weights, c, dev)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range m.params() {
		n += (*p).Numel()
	}
	fmt.Fprintf(stdout, "loaded %s: %d tensors, %d parameters\n", *weights, len(m.params()), n)

	idx := tensor.NewGenerator(7).RandInt(0, int64(c.Vocab), *batch, c.Seq)

	// Eager.
	ref := Forward(m, idx)
	eager := timeCalls(*iters, dev, func() { Forward(m, idx) })

	// Compiled: the model struct is an argument, so its tensors are graph
	// inputs (not constants); new weights of the same shapes reuse the
	// compiled graph.
	var st tensor.CompileStats
	fast := tensor.Compile(Forward, tensor.WithStats(&st))
	start := time.Now()
	out := fast(m, idx)
	tensor.Synchronize(dev)
	first := time.Since(start)
	compiled := timeCalls(*iters, dev, func() { fast(m, idx) })

	diff := out.Sub(ref).Abs().Max().Item()
	fmt.Fprintf(stdout, "logits %v; max abs difference eager vs compiled: %.3g\n", out.Shape(), diff)
	fmt.Fprintf(stdout, "eager: %v per call\n", eager.Round(time.Microsecond))
	fmt.Fprintf(stdout, "compiled: first call (trace + compile) %v, then %v per call (%.2fx eager)\n",
		first.Round(time.Microsecond), compiled.Round(time.Microsecond), float64(eager)/float64(compiled))
	fmt.Fprintf(stdout, "stats: calls=%d compiles=%d recompiles=%d breaks=%d\n",
		st.Calls.Load(), st.Compiles.Load(), st.Recompiles.Load(), st.Breaks.Load())
	top := out.Select(1, c.Seq-1).ArgMax(-1, false).Int64s()
	fmt.Fprintf(stdout, "next-token argmax per sequence: %v\n", top)

	ex, err := tensor.Explain(Forward, m, idx)
	if err != nil {
		return err
	}
	total := 0
	var ops []string
	for _, name := range sortedKeys(ex.OpCounts) {
		total += ex.OpCounts[name]
		ops = append(ops, fmt.Sprintf("%s×%d", name, ex.OpCounts[name]))
	}
	fmt.Fprintf(stdout, "explain: %d graph, %d breaks, %d ops, %d guards\n", ex.Graphs, len(ex.Breaks), total,
		len(strings.Split(strings.TrimSpace(ex.Guards), "\n")))
	fmt.Fprintf(stdout, "  ops: %s\n", strings.Join(ops, " "))
	return nil
}

// save writes m to path with c in the metadata.
func save(path string, m *GPT, c Config) error {
	ts := map[string]*tensor.Tensor{}
	for name, p := range m.params() {
		ts[name] = *p
	}
	meta := map[string]string{
		"format": "gocompile-gpt", "vocab": strconv.Itoa(c.Vocab), "d_model": strconv.Itoa(c.D),
		"heads": strconv.Itoa(c.Heads), "seq": strconv.Itoa(c.Seq),
	}
	return tensor.SaveSafetensors(path, ts, meta)
}

// load reads a model from path onto dev and checks that it has the size c
// asks for.
func load(path string, c Config, dev tensor.Device) (*GPT, error) {
	ts, meta, err := tensor.LoadSafetensors(path)
	if err != nil {
		return nil, err
	}
	for k, want := range map[string]int{"vocab": c.Vocab, "d_model": c.D, "heads": c.Heads, "seq": c.Seq} {
		if got, err := strconv.Atoi(meta[k]); err != nil || got != want {
			return nil, fmt.Errorf("%s has %s=%q, flags ask for %d: pass -write to rewrite it", path, k, meta[k], want)
		}
	}
	m := &GPT{Heads: c.Heads}
	for name, p := range m.params() {
		t, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("%s has no tensor %q: pass -write to rewrite it", path, name)
		}
		*p = t.To(dev)
	}
	return m, nil
}

// timeCalls returns the mean time of n calls of f, waiting for the device.
func timeCalls(n int, dev tensor.Device, f func()) time.Duration {
	f() // warm up
	tensor.Synchronize(dev)
	start := time.Now()
	for range n {
		f()
	}
	tensor.Synchronize(dev)
	return time.Since(start) / time.Duration(n)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
