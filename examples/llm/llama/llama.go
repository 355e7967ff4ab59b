// Package llama is the LLaMA-style decoder of examples/llm: RMSNorm,
// rotary embeddings, grouped-query attention and a SwiGLU feed-forward,
// with gpt-fast's safetensors names and a static KV cache that Forward
// writes in place. bench -llm times its decode step.
package llama

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"

	"gocompile/tensor"
)

// Config is a LLaMA-style decoder's size.
type Config struct {
	Dim, Layers, Heads, KVHeads, FFN, Vocab int
	MaxSeq                                  int // the KV cache's length
	Eps, RopeBase                           float64
}

// Configs are the two configurations: a tiny one that runs anywhere (a byte-level
// vocabulary, so prompts and replies are text), and a 1B-class one.
var Configs = map[string]Config{
	"tiny": {Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 172, Vocab: 256, MaxSeq: 128, Eps: 1e-5, RopeBase: 10000},
	"1b":   {Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, MaxSeq: 2048, Eps: 1e-5, RopeBase: 10000},
}

// Layer is one decoder layer's weights (Linear weights are [out, in], as
// in PyTorch). Wq, Wk and Wv are views of the rows of Wqkv, W1 and W3 of
// W13: Forward runs one product for the query, key and value and one for
// the gate and up projections (gpt-fast fuses wqkv so), where separate
// weights take five.
type Layer struct {
	AttnNorm, Wq, Wk, Wv, Wo *tensor.Tensor
	FFNNorm, W1, W2, W3      *tensor.Tensor // W1 gate, W3 up, W2 down (SwiGLU)
	Wqkv, W13                *tensor.Tensor // [Wq; Wk; Wv] and [W1; W3]
}

// Model is the decoder: embeddings, layers, final norm and output.
type Model struct {
	Cfg    Config
	TokEmb *tensor.Tensor // [vocab, dim]
	Layers []Layer
	Norm   *tensor.Tensor // [dim]
	Output *tensor.Tensor // [vocab, dim]
}

// Params names every weight as it is stored in the safetensors file
// (gpt-fast's names).
func (m *Model) Params() map[string]**tensor.Tensor {
	p := map[string]**tensor.Tensor{"tok_embeddings.weight": &m.TokEmb, "norm.weight": &m.Norm, "output.weight": &m.Output}
	for i := range m.Layers {
		l := &m.Layers[i]
		pre := fmt.Sprintf("layers.%d.", i)
		for name, t := range map[string]**tensor.Tensor{
			"attention_norm.weight": &l.AttnNorm, "attention.wq.weight": &l.Wq, "attention.wk.weight": &l.Wk,
			"attention.wv.weight": &l.Wv, "attention.wo.weight": &l.Wo, "ffn_norm.weight": &l.FFNNorm,
			"feed_forward.w1.weight": &l.W1, "feed_forward.w2.weight": &l.W2, "feed_forward.w3.weight": &l.W3,
		} {
			p[pre+name] = t
		}
	}
	return p
}

// NewModel initialises weights deterministically, scaled so that
// activations stay near unit size: normal weights with standard deviation
// 1/sqrt(fan-in), unit norm scales.
func NewModel(c Config, seed uint64, dt tensor.DType) *Model {
	g := tensor.NewGenerator(seed)
	w := func(out, in int) *tensor.Tensor {
		return g.Randn(tensor.Float32, out, in).MulScalar(1 / math.Sqrt(float64(in))).To(dt)
	}
	ones := func(n int) *tensor.Tensor { return tensor.Ones(dt, n) }
	hd := c.Dim / c.Heads
	m := &Model{Cfg: c, TokEmb: g.Randn(tensor.Float32, c.Vocab, c.Dim).To(dt), Norm: ones(c.Dim), Output: w(c.Vocab, c.Dim)}
	for range c.Layers {
		m.Layers = append(m.Layers, Layer{
			AttnNorm: ones(c.Dim), Wq: w(c.Heads*hd, c.Dim), Wk: w(c.KVHeads*hd, c.Dim), Wv: w(c.KVHeads*hd, c.Dim),
			Wo: w(c.Dim, c.Heads*hd), FFNNorm: ones(c.Dim), W1: w(c.FFN, c.Dim), W2: w(c.Dim, c.FFN), W3: w(c.FFN, c.Dim),
		})
	}
	m.fuse()
	return m
}

// fuse joins each layer's Wq, Wk and Wv into Wqkv and W1 and W3 into W13,
// and makes the separate weights views of them.
func (m *Model) fuse() {
	for i := range m.Layers {
		l := &m.Layers[i]
		l.Wqkv, l.W13 = tensor.Cat([]*tensor.Tensor{l.Wq, l.Wk, l.Wv}, 0), tensor.Cat([]*tensor.Tensor{l.W1, l.W3}, 0)
		l.views()
	}
}

// views makes Wq, Wk, Wv views of Wqkv's rows and W1, W3 of W13's.
func (l *Layer) views() {
	nq, nkv, nf := l.Wq.Size(0), l.Wk.Size(0), l.W1.Size(0)
	l.Wq, l.Wk, l.Wv = l.Wqkv.Narrow(0, 0, nq), l.Wqkv.Narrow(0, nq, nkv), l.Wqkv.Narrow(0, nq+nkv, nkv)
	l.W1, l.W3 = l.W13.Narrow(0, 0, nf), l.W13.Narrow(0, nf, nf)
}

// LoadModel reads the weights from path, writing deterministic ones there
// first when the file does not exist.
func LoadModel(c Config, path string, seed uint64, dt tensor.DType) (*Model, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		m := NewModel(c, seed, dt)
		ts := map[string]*tensor.Tensor{}
		for name, t := range m.Params() {
			ts[name] = *t
		}
		if err := tensor.SaveSafetensors(path, ts, map[string]string{"format": "pt"}); err != nil {
			return nil, err
		}
	}
	ts, _, err := tensor.LoadSafetensors(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: c, Layers: make([]Layer, c.Layers)}
	for name, t := range m.Params() {
		v, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("%s: no tensor %q", path, name)
		}
		*t = v.To(dt)
	}
	m.fuse()
	return m, nil
}

// ToDevice moves the weights to d: the fused ones, of which the separate
// ones stay views.
func (m *Model) ToDevice(d tensor.Device) {
	m.TokEmb, m.Norm, m.Output = m.TokEmb.ToDevice(d), m.Norm.ToDevice(d), m.Output.ToDevice(d)
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, t := range []**tensor.Tensor{&l.AttnNorm, &l.Wo, &l.FFNNorm, &l.W2, &l.Wqkv, &l.W13} {
			*t = (*t).ToDevice(d)
		}
		l.views()
	}
}

// Decoder is a model with its static KV cache and rotary tables: the
// state a generation loop carries. Forward writes the cache in place.
type Decoder struct {
	M        *Model
	K, V     []*tensor.Tensor // per layer: [batch, kv heads, max seq, head dim]
	Cos, Sin *tensor.Tensor   // [max seq, head dim / 2]
	keyPos   *tensor.Tensor   // [max seq]: 0, 1, …
}

// NewDecoder makes a zeroed cache for batch sequences on the model's
// device.
func NewDecoder(m *Model, batch int) *Decoder {
	c := m.Cfg
	hd := c.Dim / c.Heads
	dev, dt := m.TokEmb.Device(), m.TokEmb.DType()
	d := &Decoder{M: m}
	for range c.Layers {
		d.K = append(d.K, tensor.Zeros(dt, batch, c.KVHeads, c.MaxSeq, hd).ToDevice(dev))
		d.V = append(d.V, tensor.Zeros(dt, batch, c.KVHeads, c.MaxSeq, hd).ToDevice(dev))
	}
	// RoPE: angle p·base^(-2i/hd) for position p and pair i.
	inv := tensor.Arange(0, float64(hd), 2, tensor.Float64).DivScalar(float64(hd)).MulScalar(-math.Log(c.RopeBase)).Exp()
	ang := tensor.Arange(0, float64(c.MaxSeq), 1, tensor.Float64).Unsqueeze(1).Mul(inv.Unsqueeze(0))
	d.Cos, d.Sin = ang.Cos().To(tensor.Float32).ToDevice(dev), ang.Sin().To(tensor.Float32).ToDevice(dev)
	d.keyPos = tensor.Arange(0, float64(c.MaxSeq), 1, tensor.Int64).ToDevice(dev)
	return d
}

// rope rotates the pairs (first half, second half) of x [b, t, h, hd] by
// the angles whose cosines and sines are cos and sin [t, 1, hd/2].
func rope(x, cos, sin *tensor.Tensor) *tensor.Tensor {
	hd := x.Size(3)
	xf := x.To(tensor.Float32)
	x1, x2 := xf.Narrow(3, 0, hd/2), xf.Narrow(3, hd/2, hd/2)
	out := tensor.Cat([]*tensor.Tensor{x1.Mul(cos).Sub(x2.Mul(sin)), x2.Mul(cos).Add(x1.Mul(sin))}, 3)
	return out.To(x.DType())
}

// Forward runs tokens [b, t] at positions pos [t] (Int64), writing their
// keys and values into the cache, and returns the logits of the last
// position [b, vocab] in float32. Queries attend the cache's keys at
// positions up to their own.
func (d *Decoder) Forward(tokens, pos *tensor.Tensor) *tensor.Tensor {
	m, c := d.M, d.M.Cfg
	t := tokens.Size(1)
	hd := c.Dim / c.Heads
	x := tensor.Embedding(tokens, m.TokEmb) // [b, t, dim]
	// Key j is visible to the query at position p where j <= p.
	mask := d.keyPos.Unsqueeze(0).Le(pos.Unsqueeze(1)) // [t, max seq]
	cos := d.Cos.IndexSelect(0, pos).Unsqueeze(1)      // [t, 1, hd/2], for every layer
	sin := d.Sin.IndexSelect(0, pos).Unsqueeze(1)
	for i, l := range m.Layers {
		h := x.RMSNorm([]int{c.Dim}, l.AttnNorm, c.Eps)
		qkv := h.Linear(l.Wqkv, nil) // [b, t, (heads + 2 kv heads) · hd]
		nq, nkv := c.Heads*hd, c.KVHeads*hd
		q := rope(qkv.Narrow(2, 0, nq).Reshape(-1, t, c.Heads, hd), cos, sin).Transpose(1, 2)
		k := rope(qkv.Narrow(2, nq, nkv).Reshape(-1, t, c.KVHeads, hd), cos, sin).Transpose(1, 2)
		v := qkv.Narrow(2, nq+nkv, nkv).Reshape(-1, t, c.KVHeads, hd).Transpose(1, 2)
		d.K[i].IndexCopyInPlace(2, pos, k)
		d.V[i].IndexCopyInPlace(2, pos, v)
		y := tensor.ScaledDotProductAttention(q, d.K[i], d.V[i], mask, false, 0) // [b, heads, t, hd]
		y = y.Transpose(1, 2).Contiguous().Reshape(-1, t, c.Dim)
		x = x.Add(y.Linear(l.Wo, nil))
		h = x.RMSNorm([]int{c.Dim}, l.FFNNorm, c.Eps)
		gu := h.Linear(l.W13, nil) // [b, t, 2 ffn]: the gate, then the up projection
		x = x.Add(gu.Narrow(2, 0, c.FFN).SiLU().Mul(gu.Narrow(2, c.FFN, c.FFN)).Linear(l.W2, nil))
	}
	last := x.Narrow(1, t-1, 1).Squeeze(1)
	return last.RMSNorm([]int{c.Dim}, m.Norm, c.Eps).Linear(m.Output, nil).To(tensor.Float32)
}
