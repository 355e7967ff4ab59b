package tensor

import "math"

// The models of scripts/pytorch_golden.py, written against the public API.
// Each takes the case's inputs in the script's order (weights included).

var goldenModels = map[string]func(in []*Tensor, a goldenAttrs) *Tensor{
	"mlp":               goldenMLP,
	"attention_block":   goldenAttentionBlock,
	"transformer_block": goldenTransformerBlock,
	"index_put":         goldenIndexPut,
}

// goldenIndexPut is Tensor.IndexPut, a composite of the public API: x,
// values, then the index tensors.
func goldenIndexPut(in []*Tensor, a goldenAttrs) *Tensor {
	return in[0].IndexPut(in[2:], in[1], a.Accumulate)
}

// goldenMLP is Linear + GELU, twice.
func goldenMLP(in []*Tensor, _ goldenAttrs) *Tensor {
	x, w1, b1, w2, b2 := in[0], in[1], in[2], in[3], in[4]
	return x.Linear(w1, b1).GELU().Linear(w2, b2).GELU()
}

// goldenCausalMask is true above the diagonal: position i may not attend
// to j > i (torch.ones(s, s, dtype=bool).triu(1)).
func goldenCausalMask(s int) *Tensor {
	r := Arange(0, float64(s), 1, Int64)
	return r.Unsqueeze(0).Gt(r.Unsqueeze(1))
}

// goldenAttentionBlock is pre-norm single-head causal self-attention with a
// residual.
func goldenAttentionBlock(in []*Tensor, _ goldenAttrs) *Tensor {
	x, lnW, lnB := in[0], in[1], in[2]
	wq, bq, wk, bk, wv, bv, wo, bo := in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10]
	s, d := x.Size(-2), x.Size(-1)
	h := x.LayerNorm([]int{d}, lnW, lnB, 1e-5)
	q, k, v := h.Linear(wq, bq), h.Linear(wk, bk), h.Linear(wv, bv)
	scores := q.MatMul(k.Transpose(-2, -1)).DivScalar(math.Sqrt(float64(d)))
	scores = scores.MaskedFill(goldenCausalMask(s), math.Inf(-1))
	return x.Add(scores.Softmax(-1).MatMul(v).Linear(wo, bo))
}

// goldenTransformerBlock: token and position embeddings, pre-norm
// multi-head causal attention, tanh-GELU MLP, residuals, a final layer norm
// and a linear head to logits [batch, seq, vocab].
func goldenTransformerBlock(in []*Tensor, a goldenAttrs) *Tensor {
	tokens, tokEmb, posEmb := in[0], in[1], in[2]
	ln1W, ln1B, wQKV, bQKV, wO, bO := in[3], in[4], in[5], in[6], in[7], in[8]
	ln2W, ln2B, wFC, bFC, wProj, bProj := in[9], in[10], in[11], in[12], in[13], in[14]
	lnfW, lnfB, wHead := in[15], in[16], in[17]
	heads, eps := a.Heads, a.Eps
	b, s, d := tokens.Size(0), tokens.Size(1), tokEmb.Size(1)
	dh := d / heads
	x := Embedding(tokens, tokEmb).Add(Embedding(Arange(0, float64(s), 1, Int64), posEmb))
	h := x.LayerNorm([]int{d}, ln1W, ln1B, eps)
	qkv := h.Linear(wQKV, bQKV).Reshape(b, s, 3, heads, dh).Permute(2, 0, 3, 1, 4) // [3, b, heads, s, dh]
	q, k, v := qkv.Select(0, 0), qkv.Select(0, 1), qkv.Select(0, 2)
	scores := q.MatMul(k.Transpose(-2, -1)).MulScalar(1 / math.Sqrt(float64(dh)))
	att := scores.MaskedFill(goldenCausalMask(s), math.Inf(-1)).Softmax(-1)
	y := att.MatMul(v).Transpose(1, 2).Reshape(b, s, d)
	x = x.Add(y.Linear(wO, bO))
	h = x.LayerNorm([]int{d}, ln2W, ln2B, eps)
	x = x.Add(h.Linear(wFC, bFC).GELUTanh().Linear(wProj, bProj))
	return x.LayerNorm([]int{d}, lnfW, lnfB, eps).Linear(wHead, nil)
}
