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
		"query i attends keys j <= i, aligned top-left as PyTorch's is_causal); a query that attends no key gives zeros, as PyTorch's"})

// OpAttention is ScaledDotProductAttention run as one kernel where the
// device has one: few queries against any number of keys (a decode step
// against a KV cache) split along the keys, or 16-bit operands with many
// queries (a prefill) tiled, with no score matrix in memory. sdpaDecomp
// emits it for the operands AttentionFits accepts, and its meaning is
// SDPAMath's (devices without a kernel for it run SDPAMath). Operand 3 is
// a bool mask or nil.
var OpAttention = extern(&Op{Name: "attention", Title: "ScaledDotProductAttention", Arity: 4, Params: 2,
	Rule: SameAsFirst, Masks: []int{3}, Shape: attentionShape, Math: SDPAMath,
	Doc: "ScaledDotProductAttention (its math) as one kernel, for the operands AttentionFits accepts: q [B, Hq, L, E] or [Hq, L, E], " +
		"k and v [B, Hkv, S, E|Ev] of q's type, an optional bool mask broadcasting to [B, Hq, L, S]; Attrs.Scalars as ScaledDotProductAttention's"})

// Limits of OpAttention's split-key kernel: queries per head, and the
// rows (query heads of a key head times queries) and features one kernel
// block holds.
const (
	AttentionMaxQueries = 16
	AttentionMaxRows    = 32
	AttentionMaxFloats  = 2048 // rows × features, for q and for the output
)

func attentionShape(in [][]int, a *Attrs) ([]int, error) {
	if len(in) < 3 || len(in[0]) < 2 || len(in[2]) != len(in[0]) {
		return nil, Errorf("ScaledDotProductAttention", in, "give q, k and v of one rank", "ranks do not match")
	}
	out := clone(in[0])
	out[len(out)-1] = in[2][len(in[2])-1]
	return out, nil
}

// AttentionFits reports whether OpAttention computes attention of q, k, v
// (shapes) with a mask of maskType (Invalid: none): rank 3 or 4 with equal
// batch sizes, q, k and v of one type, float32, float16 or bfloat16 (its
// kernels add in float32; float64 keeps the math), a mask, if any, bool
// and of rank at most q's, and the shapes within one of its two kernels'
// limits: few queries (AttentionSplitFits) or 16-bit operands with
// features a tensor-core kernel tiles (AttentionTiledFits). Shapes are
// already checked as SDPAMath checks them.
func AttentionFits(qs, ks, vs []int, qt, kt, vt, maskType DType, maskRank int) bool {
	r := len(qs)
	if r != 3 && r != 4 || qt != kt || qt != vt || qt != Float32 && qt != Float16 && qt != BFloat16 {
		return false
	}
	if r == 4 && (ks[0] != qs[0] || vs[0] != qs[0]) {
		return false
	}
	if maskType != Invalid && (maskType != Bool || maskRank > r) {
		return false
	}
	hq, hkv, L, E, Ev := qs[r-3], ks[r-3], qs[r-2], qs[r-1], vs[r-1]
	if hkv == 0 || L == 0 || ks[r-2] == 0 {
		return false
	}
	return AttentionSplitFits(hq/hkv, L, E, Ev) || AttentionTiledFits(qt, E, Ev)
}

// AttentionSplitFits reports whether the split-key kernel (few queries
// against many keys) takes groups query heads a key head, L queries, E
// and Ev features: at most AttentionMaxQueries queries, groups × L rows
// within AttentionMaxRows, and rows × features within AttentionMaxFloats.
func AttentionSplitFits(groups, L, E, Ev int) bool {
	rows := groups * L
	return L <= AttentionMaxQueries && rows <= AttentionMaxRows && rows*E <= AttentionMaxFloats && rows*((Ev+31)/32*32) <= AttentionMaxFloats
}

// AttentionTiledFits reports whether the tiled kernel (any number of
// queries, tensor-core MMAs) takes operands of type t with E and Ev
// features: bfloat16 or float16, each a multiple of 16 up to 128.
func AttentionTiledFits(t DType, E, Ev int) bool {
	return (t == BFloat16 || t == Float16) && E%16 == 0 && Ev%16 == 0 && E > 0 && Ev > 0 && E <= 128 && Ev <= 128
}

func sdpaDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	if _, _, err := sdpaShapes(b, args[0], args[1], args[2]); err != nil {
		return nil, err
	}
	q, k, v, mask := args[0], args[1], args[2], args[3]
	mt, mr := Invalid, 0
	if mask != nil {
		mt, mr = b.DType(mask), len(b.Shape(mask))
	}
	if AttentionFits(b.Shape(q), b.Shape(k), b.Shape(v), b.DType(q), b.DType(k), b.DType(v), mt, mr) {
		if mask != nil { // the mask must broadcast to the scores
			scores := attentionScores(b.Shape(q), b.Shape(k))
			if bs, err := Broadcast("ScaledDotProductAttention", b.Shape(mask), scores); err == nil && SameShape(bs, scores) {
				return b.Apply(OpAttention, a, q, k, v, mask), nil
			}
		} else {
			return b.Apply(OpAttention, a, q, k, v, nil), nil
		}
	}
	return SDPAMath(b, a, args...)
}

// attentionScores is the shape of the scores of q against k: [..., Hq, L, S].
func attentionScores(qs, ks []int) []int {
	out := clone(qs)
	out[len(out)-1] = ks[len(ks)-2]
	return out
}

// sdpaShapes checks q, k and v as ScaledDotProductAttention takes them
// and returns the query heads and key heads (1 and 1 for rank 2).
func sdpaShapes(b Builder, q, k, v Value) (hq, hkv int, err error) {
	qs, ks, vs := b.Shape(q), b.Shape(k), b.Shape(v)
	shapes := [][]int{qs, ks, vs}
	const title = "ScaledDotProductAttention"
	for _, x := range []Value{q, k, v} {
		if err := requireFloat(b, title, x); err != nil {
			return 0, 0, err
		}
	}
	r := len(qs)
	if r < 2 || len(ks) != r || len(vs) != r {
		return 0, 0, Errorf(title, shapes, "give q [..., L, E], k [..., S, E] and v [..., S, Ev] of one rank, at least 2",
			"ranks %d, %d and %d", len(qs), len(ks), len(vs))
	}
	E, S := qs[r-1], ks[r-2]
	if ks[r-1] != E || vs[r-2] != S {
		return 0, 0, Errorf(title, shapes, "k's last dim must equal q's, and v's second-to-last k's",
			"q has %d features, k %d; k has %d positions, v %d", E, ks[r-1], S, vs[r-2])
	}
	if r < 3 {
		return 1, 1, nil
	}
	hq, hkv = qs[r-3], ks[r-3]
	if hkv == 0 || vs[r-3] != hkv || hq%hkv != 0 {
		if hq != hkv || vs[r-3] != hq {
			return 0, 0, Errorf(title, shapes, "give k and v the same number of heads, one that divides q's (grouped-query attention)",
				"q has %d heads, k %d, v %d", hq, hkv, vs[r-3])
		}
	}
	return hq, hkv, nil
}

// SDPAMath is ScaledDotProductAttention's meaning, as PyTorch's math
// reference computes it: key heads repeated for grouped-query attention,
// 16-bit operands computed in float32, scores scaled, masked and
// soft-maxed, then multiplied by v.
func SDPAMath(b Builder, a Attrs, args ...Value) (Value, error) {
	f, err := sdpaProbs(b, a, args[0], args[1], args[2], args[3])
	if err != nil {
		return nil, err
	}
	return f.back(b.Apply(OpMatMul, Attrs{}, f.p, f.v)), nil
}

// sdpaParts is attention up to its probabilities: q, k and v in float32 at
// least, k and v repeated to q's heads, the softmax of the scaled, masked
// scores, the scale, and back, the cast to q's type.
type sdpaParts struct {
	q, k, v, p Value
	scale      float64
	groups     int // query heads per key head
	back       func(Value) Value
}

func sdpaProbs(b Builder, a Attrs, q, k, v, mask Value) (*sdpaParts, error) {
	hq, hkv, err := sdpaShapes(b, q, k, v)
	if err != nil {
		return nil, err
	}
	qs := b.Shape(q)
	r := len(qs)
	E := qs[r-1]
	f := &sdpaParts{groups: hq / hkv, scale: 1 / math.Sqrt(float64(E))}
	if hq != hkv {
		k, v = repeatHeads(b, k, f.groups), repeatHeads(b, v, f.groups)
	}
	if len(a.Scalars) > 0 && a.Scalars[0] != 0 {
		f.scale = a.Scalars[0]
	}
	causal := len(a.Scalars) > 1 && a.Scalars[1] != 0
	f.q, f.back = upcast(b, q)
	f.k, _ = upcast(b, k)
	f.v, _ = upcast(b, v)
	kt := b.Apply(OpTranspose, Attrs{Dim: -2, Dim2: -1}, f.k)
	s := b.Apply(OpMul, Attrs{}, b.Apply(OpMatMul, Attrs{}, f.q, kt), Scalar{Value: f.scale, DType: Float64})
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
	// A query row that sees no key (every score −inf) attends to nothing:
	// zeros, not softmax's 0/0, as PyTorch's attention gives (its
	// _safe_softmax). A NaN score still makes the row NaN.
	blind := b.Apply(OpEq, Attrs{}, b.Apply(OpAMax, Attrs{Dims: []int{-1}, KeepDim: true}, s), Scalar{Value: math.Inf(-1), DType: Float64})
	sees := b.Apply(OpCast, Attrs{DType: b.DType(s)}, b.Apply(OpLogicalNot, Attrs{}, blind))
	s = b.Apply(OpMaskedFill, Attrs{Scalars: []float64{0}}, s, blind)
	f.p = b.Apply(OpMul, Attrs{}, b.Apply(OpSoftmax, Attrs{Dim: -1}, s), sees)
	return f, nil
}

// sdpaVJP is attention's derivative, as flash attention's backward
// computes it: the probabilities P recomputed from q and k (nothing of
// the S×S scores saved), dV = Pᵀ·dO, dS = P ⊙ (dO·Vᵀ − D) with the row
// term D = rowsum(dO ⊙ O) from the output (it equals rowsum(dP ⊙ P)),
// dQ = dS·K·scale and dK = dSᵀ·Q·scale, summed over the query heads that
// share a key head; an additive mask's gradient is dS.
func sdpaVJP(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
	f, err := sdpaProbs(b, a, args[0], args[1], args[2], args[3])
	if err != nil {
		return nil, err
	}
	o := gradOps{b}
	t := func(x Value) Value { return o.ap(OpTranspose, Attrs{Dim: -2, Dim2: -1}, x) }
	mm := func(x, y Value) Value { return o.ap(OpMatMul, Attrs{}, x, y) }
	g, _ = upcast(b, g)
	out, _ = upcast(b, out)
	dv := mm(t(f.p), g)
	d := o.ap(OpSum, Attrs{Dims: []int{-1}, KeepDim: true}, o.mul(g, out))
	ds := o.mul(f.p, o.sub(mm(g, t(f.v)), d))
	dq := o.mul(mm(ds, f.k), o.c(f.scale))
	dk := o.mul(mm(t(ds), f.q), o.c(f.scale))
	var dmask Value
	if mask := args[3]; mask != nil && b.DType(mask) != Bool {
		dmask = ds
	}
	return []Value{dq, sumHeads(b, dk, f.groups), sumHeads(b, dv, f.groups), dmask}, nil
}

// sumHeads undoes repeatHeads for a gradient: x [..., H*n, S, E] summed
// over each run of n heads, [..., H, S, E].
func sumHeads(b Builder, x Value, n int) Value {
	if n == 1 {
		return x
	}
	s := b.Shape(x)
	r := len(s)
	split := append(append(clone(s[:r-3]), s[r-3]/n, n), s[r-2:]...)
	x = b.Apply(OpReshape, Attrs{Dims: split}, x)
	return b.Apply(OpSum, Attrs{Dims: []int{r - 2}}, x)
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
