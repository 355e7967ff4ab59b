package main

import (
	"fmt"
	"sort"

	"gocompile/tensor"
)

// Config is the model's and the run's size.
type Config struct {
	Vocab, Dim, Heads, Layers, Seq int // Seq: the context (and positional table) length
	Batch, Steps                   int
	LR, WeightDecay                float64
}

// Tiny is the configuration CI trains: a 2-layer, 64-wide model.
var Tiny = Config{Vocab: 32, Dim: 64, Heads: 4, Layers: 2, Seq: 32, Batch: 8, Steps: 200, LR: 3e-3, WeightDecay: 0.01}

// Model is a GPT-style language model: token and positional embeddings,
// pre-norm blocks of causal self-attention and a GELU MLP, a final norm,
// and logits tied to the token embedding. Linear weights are [out, in], as
// PyTorch's.
type Model struct {
	Cfg    Config
	Params map[string]*tensor.Tensor // by safetensors name
}

// paramShapes are the model's tensors and their shapes.
func paramShapes(c Config) map[string][]int {
	s := map[string][]int{"wte": {c.Vocab, c.Dim}, "wpe": {c.Seq, c.Dim}, "lnf.w": {c.Dim}, "lnf.b": {c.Dim}}
	for i := range c.Layers {
		p := fmt.Sprintf("h%d.", i)
		for _, n := range []string{"ln1.w", "ln1.b", "ln2.w", "ln2.b", "bq", "bk", "bv", "bo", "b2"} {
			s[p+n] = []int{c.Dim}
		}
		for _, n := range []string{"wq", "wk", "wv", "wo"} {
			s[p+n] = []int{c.Dim, c.Dim}
		}
		s[p+"w1"], s[p+"b1"], s[p+"w2"] = []int{4 * c.Dim, c.Dim}, []int{4 * c.Dim}, []int{c.Dim, 4 * c.Dim}
	}
	return s
}

// NewModel makes c's model with seeded weights: normal(0, 0.02) for
// embeddings and Linear weights, ones for norm weights, zeros for biases.
// Every parameter requires gradients.
func NewModel(c Config, seed uint64) *Model {
	shapes := paramShapes(c)
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	m := &Model{Cfg: c, Params: map[string]*tensor.Tensor{}}
	for i, n := range names {
		s := shapes[n]
		var t *tensor.Tensor
		switch {
		case len(s) == 2:
			t = tensor.Randn(seed+uint64(i), tensor.Float32, s...).MulScalar(0.02)
		case n[len(n)-2:] == ".w":
			t = tensor.Ones(tensor.Float32, s...)
		default:
			t = tensor.Zeros(tensor.Float32, s...)
		}
		m.Params[n] = t.SetRequiresGrad(true)
	}
	return m
}

// List is the parameters in name order.
func (m *Model) List() []*tensor.Tensor {
	names := make([]string, 0, len(m.Params))
	for n := range m.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*tensor.Tensor, len(names))
	for i, n := range names {
		out[i] = m.Params[n]
	}
	return out
}

// Logits runs tokens [B, T] (T ≤ Seq) and returns logits [B, T, Vocab].
func (m *Model) Logits(tokens *tensor.Tensor) *tensor.Tensor {
	c, p := m.Cfg, m.Params
	B, T := tokens.Size(0), tokens.Size(1)
	hd := c.Dim / c.Heads
	x := tensor.Embedding(tokens, p["wte"]).Add(p["wpe"].Narrow(0, 0, T))
	heads := func(v *tensor.Tensor) *tensor.Tensor { return v.Reshape(B, T, c.Heads, hd).Transpose(1, 2) }
	for i := range c.Layers {
		l := func(n string) *tensor.Tensor { return p[fmt.Sprintf("h%d.%s", i, n)] }
		h := x.LayerNorm([]int{c.Dim}, l("ln1.w"), l("ln1.b"), 1e-5)
		q, k, v := heads(h.Linear(l("wq"), l("bq"))), heads(h.Linear(l("wk"), l("bk"))), heads(h.Linear(l("wv"), l("bv")))
		y := tensor.ScaledDotProductAttention(q, k, v, nil, true, 0).Transpose(1, 2).Contiguous().Reshape(B, T, c.Dim)
		x = x.Add(y.Linear(l("wo"), l("bo")))
		h = x.LayerNorm([]int{c.Dim}, l("ln2.w"), l("ln2.b"), 1e-5)
		x = x.Add(h.Linear(l("w1"), l("b1")).GELU().Linear(l("w2"), l("b2")))
	}
	x = x.LayerNorm([]int{c.Dim}, p["lnf.w"], p["lnf.b"], 1e-5)
	return x.MatMul(p["wte"].T())
}

// Loss is the mean cross-entropy of the next-token predictions for
// inputs [B, T] against targets [B, T].
func (m *Model) Loss(inputs, targets *tensor.Tensor) *tensor.Tensor {
	logp := m.Logits(inputs).LogSoftmax(-1)
	vocab := tensor.Arange(0, float64(m.Cfg.Vocab), 1, tensor.Int64).ToDevice(targets.Device())
	onehot := targets.Unsqueeze(-1).Eq(vocab).To(logp.DType()) // [B, T, V], no gradient
	return logp.Mul(onehot).Sum().Neg().DivScalar(float64(targets.Numel()))
}
