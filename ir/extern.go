package ir

import "math"

func extern(op *Op) *Op {
	op.Kind = Extern
	return Register(op)
}

// The extern ops: each has a dedicated kernel; the registry gives its shape
// and type rules.
var (
	OpMatMul = extern(&Op{Name: "matmul", Title: "MatMul", Arity: 2, Rule: PromoteNoBool, Shape: matmulShape, Fresh: true,
		Doc: "matrix product with PyTorch's rules: 1-D operands are vectors, leading dims are batch dims and broadcast"})
	OpCat = extern(&Op{Name: "cat", Title: "Cat", Arity: -1, Rule: Promote, Shape: catShape,
		Doc: "concatenation along Attrs.Dim"})
	OpStack = extern(&Op{Name: "stack", Title: "Stack", Arity: -1, Rule: Promote, Shape: stackShape,
		Doc: "stacking along a new dim Attrs.Dim"})
	OpGather = extern(&Op{Name: "gather", Title: "Gather", Arity: 2, Indices: []int{1}, Rule: SameAsFirst, Shape: gatherShape,
		Doc: "out[i][j][k] = x[index[i][j][k]][j][k] for Attrs.Dim = 0, and so on"})
	OpIndexSelect = extern(&Op{Name: "index_select", Title: "IndexSelect", Arity: 2, Indices: []int{1}, Rule: SameAsFirst,
		Shape: indexSelectShape, Doc: "the entries of x at the 1-D index along Attrs.Dim"})
	OpEmbedding = extern(&Op{Name: "embedding", Title: "Embedding", Arity: 2, Indices: []int{0}, Rule: SameAsFirst,
		Shape: embeddingShape, Doc: "rows of weight (operand 1) at indices (operand 0): shape indices + [embedding dim]"})
	OpCumSum = extern(&Op{Name: "cumsum", Title: "CumSum", Arity: 1, Rule: SumType, Shape: alongDimShape("CumSum"),
		Doc: "inclusive running sum along Attrs.Dim; floats sum in float64 and round each result once, integers and bools sum in int64"})
	OpIndexCopy = extern(&Op{Name: "index_copy", Title: "IndexCopy", Arity: 3, Indices: []int{1}, Rule: SameAsFirst, Shape: indexCopyShape,
		Doc: "x with its entries at the 1-D index along Attrs.Dim replaced by src's, in order, as torch.index_copy (a new tensor; src converted to x's type)"})
	OpIndexAdd = extern(&Op{Name: "index_add", Title: "IndexAdd", Arity: 3, Indices: []int{1}, Rule: FloatOnly, Shape: indexAddShape,
		Doc: "x with src's entries added to its entries at the 1-D index along Attrs.Dim, repeated indices adding up, as torch.index_add (a new tensor; floating types)"})
	OpArgSort = extern(&Op{Name: "argsort", Title: "ArgSort", Arity: 1, Rule: IndexType, Shape: alongDimShape("ArgSort"),
		Doc: "the indices that sort x along Attrs.Dim, stably: ascending, or descending where Attrs.Step < 0; NaN sorts above every number"})
	OpTril = extern(&Op{Name: "tril", Title: "Tril", Arity: 1, Rule: SameAsFirst, Shape: triangleShape("Tril"),
		Doc: "the lower triangle of the last two dims: [..., i, j] kept where j - i <= Attrs.Start (the diagonal), else 0"})
	OpTriu = extern(&Op{Name: "triu", Title: "Triu", Arity: 1, Rule: SameAsFirst, Shape: triangleShape("Triu"),
		Doc: "the upper triangle of the last two dims: [..., i, j] kept where j - i >= Attrs.Start (the diagonal), else 0"})
	OpContiguous = extern(&Op{Name: "contiguous", Title: "Contiguous", Arity: 1, Rule: SameAsFirst,
		Shape: func(in [][]int, _ *Attrs) ([]int, error) { return clone(in[0]), nil },
		Doc:   "a row-major copy"})
)

func matmulShape(in [][]int, _ *Attrs) ([]int, error) {
	a, b := in[0], in[1]
	if len(a) == 0 || len(b) == 0 {
		return nil, Errorf("MatMul", in, "use Mul for scalars", "both operands need at least one dim")
	}
	av, bv := len(a) == 1, len(b) == 1
	if av {
		a = []int{1, a[0]}
	}
	if bv {
		b = []int{b[0], 1}
	}
	k1, k2 := a[len(a)-1], b[len(b)-2]
	if k1 != k2 {
		return nil, Errorf("MatMul", in, "the last dim of the first operand must equal the second-to-last of the second (Transpose one?)",
			"inner dims do not match: %d vs %d", k1, k2)
	}
	batch, err := Broadcast("MatMul", a[:len(a)-2], b[:len(b)-2])
	if err != nil {
		e := err.(*Error)
		e.Shapes = in
		e.Reason = "batch dims " + e.Reason
		return nil, e
	}
	out := batch
	if !av {
		out = append(out, a[len(a)-2])
	}
	if !bv {
		out = append(out, b[len(b)-1])
	}
	return out, nil
}

// MatMulBatch returns the broadcast batch shape and the matrix sizes
// (m×k)·(k×n) of a matmul whose shapes passed matmulShape.
func MatMulBatch(a, b []int) (batch []int, m, k, n int) {
	if len(a) == 1 {
		a = []int{1, a[0]}
	}
	if len(b) == 1 {
		b = []int{b[0], 1}
	}
	batch, _ = Broadcast("MatMul", a[:len(a)-2], b[:len(b)-2])
	return batch, a[len(a)-2], a[len(a)-1], b[len(b)-1]
}

func catShape(in [][]int, a *Attrs) ([]int, error) {
	if len(in) == 0 {
		return nil, Errorf("Cat", in, "pass at least one tensor", "no tensors to concatenate")
	}
	d, err := NormDim("Cat", in[0], a.Dim)
	if err != nil {
		return nil, err
	}
	if len(in[0]) == 0 {
		return nil, Errorf("Cat", in, "Unsqueeze scalars first, or use Stack", "cannot concatenate scalars")
	}
	out := clone(in[0])
	out[d] = 0
	for i, s := range in {
		if len(s) != len(out) {
			return nil, Errorf("Cat", in, "give every tensor the same number of dims",
				"tensor %d has %d dims, tensor 0 has %d", i, len(s), len(out))
		}
		for j := range s {
			if j != d && s[j] != out[j] {
				return nil, Errorf("Cat", in, "sizes must match in every dim but the one concatenated",
					"tensor %d has size %d at dim %d, tensor 0 has %d", i, s[j], j, out[j])
			}
		}
		if s[d] > math.MaxInt-out[d] {
			return nil, Errorf("Cat", in, "concatenate fewer or smaller tensors",
				"the sizes at dim %d add up to more than an int holds", d)
		}
		out[d] += s[d]
	}
	return out, nil
}

func stackShape(in [][]int, a *Attrs) ([]int, error) {
	if len(in) == 0 {
		return nil, Errorf("Stack", in, "pass at least one tensor", "no tensors to stack")
	}
	r := len(in[0]) + 1
	d := a.Dim
	if d < -r || d >= r {
		return nil, Errorf("Stack", in, "use a dim in [-rank-1, rank]", "dim %d is out of range", a.Dim)
	}
	if d < 0 {
		d += r
	}
	for i, s := range in {
		if !equalInts(s, in[0]) {
			return nil, Errorf("Stack", in, "give every tensor the same shape", "tensor %d has shape %s, tensor 0 %s",
				i, FormatShape(s), FormatShape(in[0]))
		}
	}
	return append(append(clone(in[0][:d]), len(in)), in[0][d:]...), nil
}

// SameShape reports whether two shapes are equal.
func SameShape(a, b []int) bool { return equalInts(a, b) }

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func gatherShape(in [][]int, a *Attrs) ([]int, error) {
	x, idx := in[0], in[1]
	d, err := NormDim("Gather", x, a.Dim)
	if err != nil {
		return nil, err
	}
	if len(idx) != len(x) {
		return nil, Errorf("Gather", in, "give the index as many dims as the input", "index has %d dims, input %d", len(idx), len(x))
	}
	for i := range idx {
		if i != d && idx[i] > x[i] {
			return nil, Errorf("Gather", in, "the index may not be larger than the input outside the gathered dim",
				"index size %d exceeds input size %d at dim %d", idx[i], x[i], i)
		}
	}
	return clone(idx), nil
}

func indexSelectShape(in [][]int, a *Attrs) ([]int, error) {
	x, idx := in[0], in[1]
	d, err := NormDim("IndexSelect", x, a.Dim)
	if err != nil {
		return nil, err
	}
	if len(idx) > 1 {
		return nil, Errorf("IndexSelect", in, "flatten the index, or use Embedding for batched lookups", "index must be 1-D, not %d-D", len(idx))
	}
	out := clone(x)
	if len(out) > 0 {
		out[d] = Numel(idx)
	}
	return out, nil
}

func embeddingShape(in [][]int, _ *Attrs) ([]int, error) {
	idx, w := in[0], in[1]
	if len(w) != 2 {
		return nil, Errorf("Embedding", in, "the weight is a [vocab, dim] matrix", "weight has %d dims, not 2", len(w))
	}
	return append(clone(idx), w[1]), nil
}

// alongDimShape is the shape rule of an op along Attrs.Dim whose result
// has x's shape (a scalar counts as one element along dim 0 or -1).
func alongDimShape(title string) func(in [][]int, a *Attrs) ([]int, error) {
	return func(in [][]int, a *Attrs) ([]int, error) {
		x := in[0]
		if len(x) == 0 {
			if a.Dim != 0 && a.Dim != -1 {
				return nil, Errorf(title, in, "use dim 0 or -1 for a scalar", "dim %d is out of range", a.Dim)
			}
			return []int{}, nil
		}
		if _, err := NormDim(title, x, a.Dim); err != nil {
			return nil, err
		}
		return clone(x), nil
	}
}

func triangleShape(title string) func(in [][]int, _ *Attrs) ([]int, error) {
	return func(in [][]int, _ *Attrs) ([]int, error) {
		if len(in[0]) < 2 {
			return nil, Errorf(title, in, "give a matrix or a batch of matrices (Unsqueeze a vector)",
				"needs at least 2 dims, got %d", len(in[0]))
		}
		return clone(in[0]), nil
	}
}

func indexCopyShape(in [][]int, a *Attrs) ([]int, error) { return indexWriteShape("IndexCopy", in, a) }
func indexAddShape(in [][]int, a *Attrs) ([]int, error)  { return indexWriteShape("IndexAdd", in, a) }

// indexWriteShape is the shape rule of ops that write src into x at a 1-D
// index along a dim: x's shape, with src's the same but along the dim.
func indexWriteShape(title string, in [][]int, a *Attrs) ([]int, error) {
	x, idx, src := in[0], in[1], in[2]
	if len(x) == 0 {
		return nil, Errorf(title, in, "Unsqueeze a scalar first", "cannot index into a scalar")
	}
	d, err := NormDim(title, x, a.Dim)
	if err != nil {
		return nil, err
	}
	if len(idx) > 1 {
		return nil, Errorf(title, in, "flatten the index", "index must be 1-D, not %d-D", len(idx))
	}
	want := clone(x)
	want[d] = Numel(idx)
	if !SameShape(src, want) {
		return nil, Errorf(title, in, "give src x's shape with the indexed dim as long as the index",
			"src has shape %s, want %s", FormatShape(src), FormatShape(want))
	}
	return clone(x), nil
}
