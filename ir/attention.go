package ir

import "math"

// OpSDPA is attention as torch.nn.functional.scaled_dot_product_attention
// computes it (its math reference), decomposed so that every device runs
// it and compiled graphs fuse its pointwise and softmax parts.
var OpSDPA = composite(&Op{Name: "scaled_dot_product_attention", Title: "ScaledDotProductAttention", Arity: 4, Params: 2,
	Rule: FloatOnly, Decompose: sdpaDecomp,
	Doc: "softmax(q·kᵀ·scale + mask)·v over the last two dims: q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev], " +
		"Hq a multiple of Hkv (grouped-query heads share k and v); mask (operand 3, may be nil) broadcasts to [..., L, S] " +
		"and is added, or where bool, true attends; Attrs.Scalars: scale (0: 1/sqrt(E)) and causal (non-zero: " +
		"query i attends keys j <= i, aligned top-left as PyTorch's is_causal)"})

func sdpaDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	q, k, v, mask := args[0], args[1], args[2], args[3]
	qs, ks, vs := b.Shape(q), b.Shape(k), b.Shape(v)
	shapes := [][]int{qs, ks, vs}
	const title = "ScaledDotProductAttention"
	for _, x := range []Value{q, k, v} {
		if err := requireFloat(b, title, x); err != nil {
			return nil, err
		}
	}
	r := len(qs)
	if r < 2 || len(ks) != r || len(vs) != r {
		return nil, Errorf(title, shapes, "give q [..., L, E], k [..., S, E] and v [..., S, Ev] of one rank, at least 2",
			"ranks %d, %d and %d", len(qs), len(ks), len(vs))
	}
	E, S := qs[r-1], ks[r-2]
	if ks[r-1] != E || vs[r-2] != S {
		return nil, Errorf(title, shapes, "k's last dim must equal q's, and v's second-to-last k's",
			"q has %d features, k %d; k has %d positions, v %d", E, ks[r-1], S, vs[r-2])
	}
	if r >= 3 && (ks[r-3] != qs[r-3] || vs[r-3] != qs[r-3]) {
		hq, hkv := qs[r-3], ks[r-3]
		if hkv == 0 || vs[r-3] != hkv || hq%hkv != 0 {
			return nil, Errorf(title, shapes, "give k and v the same number of heads, one that divides q's (grouped-query attention)",
				"q has %d heads, k %d, v %d", hq, hkv, vs[r-3])
		}
		k, v = repeatHeads(b, k, hq/hkv), repeatHeads(b, v, hq/hkv)
	}
	scale := 1 / math.Sqrt(float64(E))
	if len(a.Scalars) > 0 && a.Scalars[0] != 0 {
		scale = a.Scalars[0]
	}
	causal := len(a.Scalars) > 1 && a.Scalars[1] != 0
	q, back := upcast(b, q)
	k, _ = upcast(b, k)
	v, _ = upcast(b, v)
	kt := b.Apply(OpTranspose, Attrs{Dim: -2, Dim2: -1}, k)
	s := b.Apply(OpMul, Attrs{}, b.Apply(OpMatMul, Attrs{}, q, kt), Scalar{Value: scale, DType: Float64})
	if causal {
		// The keys above the diagonal, from one [L, S] slice of the
		// scores (true everywhere, NaN too), broadcast over the rest.
		first := s
		for d := range r - 2 {
			first = b.Apply(OpSlice, Attrs{Dim: d, Start: 0, Stop: 1, Step: 1}, first)
		}
		all := b.Apply(OpLogicalOr, Attrs{}, b.Apply(OpEq, Attrs{}, first, first), b.Apply(OpNe, Attrs{}, first, first))
		above := b.Apply(OpTriu, Attrs{Start: 1}, all)
		s = b.Apply(OpMaskedFill, Attrs{Scalars: []float64{math.Inf(-1)}}, s, above)
	}
	if mask != nil {
		if b.DType(mask) == Bool {
			s = b.Apply(OpMaskedFill, Attrs{Scalars: []float64{math.Inf(-1)}}, s, b.Apply(OpLogicalNot, Attrs{}, mask))
		} else {
			m, _ := upcast(b, mask)
			s = b.Apply(OpAdd, Attrs{}, s, m)
		}
	}
	p := b.Apply(OpSoftmax, Attrs{Dim: -1}, s)
	return back(b.Apply(OpMatMul, Attrs{}, p, v)), nil
}

// repeatHeads repeats each head of x [..., H, S, E] n times in place:
// [..., H*n, S, E], head h*n+i a copy of head h, as repeat_interleave.
func repeatHeads(b Builder, x Value, n int) Value {
	if n == 1 {
		return x
	}
	s := b.Shape(x)
	r := len(s)
	expanded := append(append(clone(s[:r-2]), n), s[r-2:]...)
	x = b.Apply(OpUnsqueeze, Attrs{Dim: r - 2}, x)
	x = b.Apply(OpExpand, Attrs{Dims: expanded}, x)
	x = b.Apply(OpContiguous, Attrs{}, x)
	out := append(clone(s[:r-3]), s[r-3]*n, s[r-2], s[r-1])
	return b.Apply(OpReshape, Attrs{Dims: out}, x)
}
