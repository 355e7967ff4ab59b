package array

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"gocompile/ir"
)

// externKernels are the CPU kernels of the registry's extern ops.
var externKernels map[string]func(op *ir.Op, a ir.Attrs, args []ir.Value) *Array

func init() {
	externKernels = map[string]func(*ir.Op, ir.Attrs, []ir.Value) *Array{
		"matmul":       matmulKernel,
		"cat":          catKernel,
		"stack":        stackKernel,
		"gather":       gatherKernel,
		"index_select": indexSelectKernel,
		"embedding":    embeddingKernel,
		"contiguous":   contiguousKernel,
		"cumsum":       cumsumKernel,
		"argsort":      argsortKernel,
		"index_copy":   indexCopyKernel,
		"index_add":    indexAddKernel,
		"attention":    attentionKernel,

		"as_strided_scatter":    asStridedScatterKernel,
		"as_strided_index_copy": asStridedIndexCopyKernel,
		"tril":                  triangleKernel,
		"triu":                  triangleKernel,
	}
}

// externTypes checks an extern op's shape and type rules.
func externTypes(op *ir.Op, a *ir.Attrs, ts []*Array) (shape []int, compute, out DType) {
	shapes := make([][]int, len(ts))
	types := make([]ir.Operand, len(ts))
	for i, t := range ts {
		shapes[i] = t.shape
		types[i] = ir.Operand{DType: t.dtype, Rank0: len(t.shape) == 0}
	}
	shape, err := op.Shape(shapes, a)
	Check(err, op.Title, ts...)
	Check(ir.CheckShape(op.Title, nil, shape), op.Title, ts...)
	compute, out, err = op.Types(types, a)
	Check(err, op.Title, ts...)
	return shape, compute, out
}

// copyInto writes src, broadcast to dst's shape and converted to dst's type,
// into dst, which may be any view.
func copyInto(dst, src *Array) {
	n := dst.Numel()
	if n == 0 {
		return
	}
	if dst.st.dev != CPU {
		gpuCopyInto(dst, src.ToDevice(dst.st.dev))
		return
	}
	src = src.cpu()
	sst := ir.BroadcastStrides(src.shape, src.strides, dst.shape)
	cshape, cst := Coalesce(dst.shape, dst.strides, sst)
	k := dst.dtype.Compute()
	if dst.dtype == ir.Bool {
		k = src.dtype.Compute() // test for non-zero in the source's kind
	}
	so := newOperand(src.st.data, src.dtype, cshape, cst[1], src.offset)
	do := newOperand(dst.st.data, dst.dtype, cshape, cst[0], dst.offset)
	parallelFor(n, MinParallel, func(lo, hi int) {
		s := so.Clone()
		size := min(BlockSize, hi-lo) // a small copy's buffers are small
		buf := ir.NewVec(k, size)
		var raw any
		var idx []int
		for b := lo; b < hi; b += BlockSize {
			m := min(BlockSize, hi-b)
			v := s.Load(b, m, k, buf)
			if do.dense {
				store(dst.st.data, dst.dtype, do.offset+b, v, k, m)
				continue
			}
			if raw == nil {
				raw = allocData(dst.dtype, size)
			}
			store(raw, dst.dtype, 0, v, k, m)
			scatterAny(dst.st.data, raw, do.shape, do.strides, do.offset, b, m, &idx)
		}
	})
}

func scatterAny(dst, src any, shape, strides []int, offset, start, n int, idx *[]int) {
	switch d := dst.(type) {
	case []float32:
		scatter(d, src.([]float32), shape, strides, offset, start, n, idx)
	case []float64:
		scatter(d, src.([]float64), shape, strides, offset, start, n, idx)
	case []uint16:
		scatter(d, src.([]uint16), shape, strides, offset, start, n, idx)
	case []int32:
		scatter(d, src.([]int32), shape, strides, offset, start, n, idx)
	case []int64:
		scatter(d, src.([]int64), shape, strides, offset, start, n, idx)
	case []bool:
		scatter(d, src.([]bool), shape, strides, offset, start, n, idx)
	}
}

func contiguousKernel(_ *ir.Op, _ ir.Attrs, args []ir.Value) *Array {
	t := args[0].(*Array)
	if t.IsContiguous() {
		return t
	}
	out := newOn(t.st.dev, t.dtype, t.shape)
	copyInto(out, t)
	return out
}

// asType returns t converted to dt, contiguous (t itself if it already is).
func asType(t *Array, dt DType) *Array {
	if t.dtype == dt && t.IsContiguous() {
		return t
	}
	out := newOn(t.st.dev, dt, t.shape)
	copyInto(out, t)
	return out
}

func matmulKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, y := args[0].(*Array), args[1].(*Array)
	shape, compute, out := externTypes(op, &a, []*Array{x, y})
	batch, m, k, n := ir.MatMulBatch(x.shape, y.shape)
	work := compute
	if compute == ir.Float16 || compute == ir.BFloat16 {
		work = ir.Float32
	} else if compute == ir.Int32 {
		work = ir.Int64
	}
	xs, ys := x, y
	if len(xs.shape) == 1 {
		xs = xs.Unsqueeze(0)
	}
	if len(ys.shape) == 1 {
		ys = ys.Unsqueeze(-1)
	}
	// A batch of rows times one matrix is one tall product: fold the batch
	// into m when that needs no copy, as x·Wᵀ in Linear does.
	if len(ys.shape) == 2 && len(xs.shape) > 2 {
		if _, ok := ir.ViewStrides(xs.shape, xs.strides, []int{ir.Numel(xs.shape[:len(xs.shape)-1]), k}); ok {
			batch, m = nil, ir.Numel(xs.shape[:len(xs.shape)-1])
			xs = xs.View(m, k)
		}
	}
	if xs.st.dev != CPU {
		if compute.IsFloat() {
			work = compute // cuBLAS multiplies 16-bit floats itself, accumulating in float32
		}
		r := gpuMatMul(op, xs, ys, batch, m, k, n, work, shape)
		if out != work {
			r = asType(r, out)
		}
		return r
	}
	xm := blasOperand(xs.Expand(append(append([]int(nil), batch...), m, k)...), work)
	ym := blasOperand(ys.Expand(append(append([]int(nil), batch...), k, n)...), work)
	res := newArray(work, append(append([]int(nil), batch...), m, n))
	nb := ir.Numel(batch)
	if m*n > 0 && k > 0 { // k == 0 leaves the zeros of res: an empty sum
		ParallelRows(nb, max(1, (1<<18)/max(m*n*k, 1)), func(lo, hi int) {
			xi, yi := make([]int, len(batch)), make([]int, len(batch))
			for b := lo; b < hi; b++ {
				gemm(work, xm.at(b, batch, xi), ym.at(b, batch, yi), matrix{t: res, ld: max(n, 1), off: b * m * n}, m, k, n)
			}
		})
	}
	r := res.Reshape(shape...)
	if out != work {
		r = asType(r, out)
	}
	return r
}

// matrix is a batch of matrices as BLAS reads them: each is row-major with
// leading dimension ld, or column-major (trans) with leading dimension ld;
// batch dims may have any strides, including 0 for broadcast ones.
type matrix struct {
	t     *Array
	trans bool
	ld    int
	off   int // storage offset of the matrix at hand
}

// blasOperand returns t, of type work, as a BLAS-readable matrix batch,
// copying only when its last two dims have no unit stride.
func blasOperand(t *Array, work DType) matrix {
	if t.dtype != work {
		t = asType(t, work)
	}
	r := len(t.shape)
	rows, cols := t.shape[r-2], t.shape[r-1]
	rs, cs := t.strides[r-2], t.strides[r-1]
	switch {
	case cs == 1 || cols == 1:
		if rows == 1 {
			rs = max(rs, cols)
		}
		if rs >= max(cols, 1) {
			return matrix{t: t, ld: rs}
		}
	case rs == 1 || rows == 1:
		if cols == 1 {
			cs = max(cs, rows)
		}
		if cs >= max(rows, 1) {
			return matrix{t: t, trans: true, ld: cs}
		}
	}
	return matrix{t: Contiguous(t), ld: max(cols, 1)}
}

// at returns the matrix of batch element b.
func (mt matrix) at(b int, batch, idx []int) matrix {
	mt.off = mt.t.offset
	if len(batch) > 0 {
		mt.off += Unravel(b, batch, mt.t.strides[:len(batch)], idx)
	}
	return mt
}

// gemm computes c = a·b for an m×k a and a k×n b into c (row-major).
func gemm(dt DType, a, b, c matrix, m, k, n int) {
	impl := gonum.Implementation{}
	if (dt == ir.Float32 || dt == ir.Float64) && m*n*k <= gemvMax && m <= 16 && min(m, n, k) > 0 {
		gemvRows(dt, a, b, c, m, k, n)
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if a.trans {
		ta = blas.Trans
	}
	if b.trans {
		tb = blas.Trans
	}
	switch dt {
	case ir.Float32:
		impl.Sgemm(ta, tb, m, n, k, 1, a.t.st.data.([]float32)[a.off:], a.ld,
			b.t.st.data.([]float32)[b.off:], b.ld, 0, c.t.st.data.([]float32)[c.off:], c.ld)
	case ir.Float64:
		impl.Dgemm(ta, tb, m, n, k, 1, a.t.st.data.([]float64)[a.off:], a.ld,
			b.t.st.data.([]float64)[b.off:], b.ld, 0, c.t.st.data.([]float64)[c.off:], c.ld)
	default:
		as, bs, cs := a.t.st.data.([]int64)[a.off:], b.t.st.data.([]int64)[b.off:], c.t.st.data.([]int64)[c.off:]
		ars, acs := a.ld, 1
		if a.trans {
			ars, acs = 1, a.ld
		}
		brs, bcs := b.ld, 1
		if b.trans {
			brs, bcs = 1, b.ld
		}
		for i := range m {
			row := cs[i*c.ld : i*c.ld+n]
			for p := range k {
				av := as[i*ars+p*acs]
				for j := range row {
					row[j] += av * bs[p*brs+j*bcs]
				}
			}
		}
	}
}

// gemvMax is the most multiply-adds of a product of few rows that runs
// as a matrix-vector product a row at a time on the calling goroutine
// (about 10 µs of work): gonum's Sgemm splits even a one-row product into
// goroutines, which for a small model's decode step cost more than its
// arithmetic (a tiny decoder's step spent a tenth of its time waking
// them). Larger products gain from the cores.
const gemvMax = 1 << 16

// gemvRows computes C = A·B (as gemm) a row of A at a time with BLAS's
// serial matrix-vector product.
func gemvRows(dt DType, a, b, c matrix, m, k, n int) {
	impl := gonum.Implementation{}
	// Row i of A: k elements from a.off + i·lda (stride 1), or, for an A
	// stored transposed, from a.off + i (stride lda).
	row, inc := a.ld, 1
	if a.trans {
		row, inc = 1, a.ld
	}
	// c_i = Bᵀ·a_i for B stored k×n, or B·a_i for B stored n×k.
	tb, rows, cols := blas.Trans, k, n
	if b.trans {
		tb, rows, cols = blas.NoTrans, n, k
	}
	for i := range m {
		switch dt {
		case ir.Float32:
			impl.Sgemv(tb, rows, cols, 1, b.t.st.data.([]float32)[b.off:], b.ld,
				a.t.st.data.([]float32)[a.off+i*row:], inc, 0, c.t.st.data.([]float32)[c.off+i*c.ld:], 1)
		case ir.Float64:
			impl.Dgemv(tb, rows, cols, 1, b.t.st.data.([]float64)[b.off:], b.ld,
				a.t.st.data.([]float64)[a.off+i*row:], inc, 0, c.t.st.data.([]float64)[c.off+i*c.ld:], 1)
		}
	}
}

func catKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	ts := tensorsOf(args)
	shape, _, out := externTypes(op, &a, ts)
	d := ts[0].normDim("Cat", a.Dim)
	res := newOn(ts[0].st.dev, out, shape)
	at := 0
	for _, t := range ts {
		copyInto(res.Slice(d, at, at+t.shape[d], 1), t)
		at += t.shape[d]
	}
	return res
}

func stackKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	ts := tensorsOf(args)
	shape, _, out := externTypes(op, &a, ts)
	d := a.Dim
	if d < 0 {
		d += len(shape)
	}
	res := newOn(ts[0].st.dev, out, shape)
	for i, t := range ts {
		copyInto(res.selectAt(d, i), t)
	}
	return res
}

// indexValues reads the indices of an int32 or int64 array's contiguous data.
func indexValues(idx *Array) []int64 {
	c := asType(idx.cpu(), ir.Int64)
	return c.st.data.([]int64)[c.offset : c.offset+c.Numel()]
}

func checkIndex(op string, ts []*Array, v int64, size int) int {
	if v < -int64(size) || v >= int64(size) {
		Throw(op, ts, "indices must lie in [-size, size)", "index %d is out of range for a dim of size %d", v, size)
	}
	if v < 0 {
		v += int64(size)
	}
	return int(v)
}

func indexSelectKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, idx := args[0].(*Array), args[1].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, idx})
	return indexSelect(op.Title, x, idx, a.Dim, shape, out)
}

// indexSelect picks the entries of x at the 1-D idx along dim into a new
// tensor of the given shape and type; errors name op.
func indexSelect(op string, x, idx *Array, dim int, shape []int, out DType) *Array {
	if dev := x.st.dev; dev != CPU {
		if len(x.shape) == 0 { // a scalar source: a rare case, done on the host
			return indexSelect(op, x.cpu(), idx.cpu(), dim, shape, out).ToDevice(dev)
		}
		res := newGPUArray(dev, out, shape)
		gpuIndex(op, x, idx, x.normDim(op, dim), false, res)
		return res
	}
	res := newArray(out, shape)
	if len(x.shape) == 0 {
		for _, v := range indexValues(idx) {
			checkIndex(op, []*Array{x, idx}, v, 1)
		}
		copyInto(res, x)
		return res
	}
	d := x.normDim(op, dim)
	for i, v := range indexValues(idx) {
		j := checkIndex(op, []*Array{x, idx}, v, x.shape[d])
		copyInto(res.selectAt(d, i), x.selectAt(d, j))
	}
	return res
}

// indexCopyKernel is IndexCopy on any device: a copy of x, then each
// entry of src copied to its index along the dim, in order (a repeated
// index keeps the last).
func indexCopyKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, idx, src := args[0].(*Array), args[1].(*Array), args[2].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, idx, src})
	d := x.normDim(op.Title, a.Dim)
	res := newOn(x.st.dev, out, shape)
	copyInto(res, x)
	indexCopyInto(op.Title, res, d, idx, src)
	return res
}

// IndexCopyInto writes src's entries at the 1-D idx along dim of dst, in
// place (IndexCopy's semantics, into dst itself); errors name op.
func IndexCopyInto(op string, dst *Array, dim int, idx, src *Array) {
	d := dst.normDim(op, dim)
	want := append([]int(nil), dst.shape...)
	want[d] = idx.Numel()
	if len(idx.shape) > 1 || !ir.SameShape(src.shape, want) {
		Throw(op, []*Array{dst, idx, src}, "give a 1-D index and src of dst's shape with the indexed dim as long as the index",
			"index %s, src %s, want %s", ir.FormatShape(idx.shape), ir.FormatShape(src.shape), ir.FormatShape(want))
	}
	dst.st.version.Add(1)
	indexCopyInto(op, dst, d, idx, src)
}

func indexCopyInto(op string, dst *Array, d int, idx, src *Array) {
	if dst.st.dev != CPU {
		gpuIndexCopy(op, dst, d, idx.ToDevice(dst.st.dev), src.ToDevice(dst.st.dev))
		return
	}
	for i, v := range indexValues(idx) {
		j := checkIndex(op, []*Array{dst, idx, src}, v, dst.shape[d])
		copyInto(dst.selectAt(d, j), src.selectAt(d, i))
	}
}

func embeddingKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	idx, w := args[0].(*Array), args[1].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{idx, w})
	flat := idx.Reshape(-1)
	rows := indexSelect(op.Title, w, flat, 0, []int{flat.shape[0], w.shape[1]}, out)
	return rows.Reshape(shape...)
}

func gatherKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, idx := args[0].(*Array), args[1].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, idx})
	d := x.normDim(op.Title, a.Dim)
	if len(shape) == 0 { // a scalar: the index must still name its one element
		checkIndex(op.Title, []*Array{x, idx}, indexValues(idx)[0], 1)
	}
	if dev := x.st.dev; dev != CPU {
		res := newGPUArray(dev, out, shape)
		gpuIndex(op.Title, x, idx, d, true, res)
		return res
	}
	res := newArray(out, shape)
	n := res.Numel()
	if n == 0 {
		return res
	}
	iv := indexValues(idx)
	src := make([]int, n) // storage offset in x of each output element
	pos := make([]int, len(shape))
	ts := []*Array{x, idx}
	for e := range n {
		off := x.offset
		for dd := range shape {
			i := pos[dd]
			if dd == d {
				i = checkIndex(op.Title, ts, iv[e], x.shape[d])
			}
			off += i * x.strides[dd]
		}
		src[e] = off
		for dd := len(shape) - 1; dd >= 0; dd-- {
			pos[dd]++
			if pos[dd] < shape[dd] {
				break
			}
			pos[dd] = 0
		}
	}
	gatherOffsets(res.st.data, x.st.data, src)
	return res
}

func gatherOffsets(dst, src any, offs []int) {
	switch d := dst.(type) {
	case []float32:
		pick(d, src.([]float32), offs)
	case []float64:
		pick(d, src.([]float64), offs)
	case []uint16:
		pick(d, src.([]uint16), offs)
	case []int32:
		pick(d, src.([]int32), offs)
	case []int64:
		pick(d, src.([]int64), offs)
	case []bool:
		pick(d, src.([]bool), offs)
	}
}

func pick[S any](d, s []S, offs []int) {
	for i, o := range offs {
		d[i] = s[o]
	}
}

// indexAddKernel is IndexAdd: on the CPU in float64, each sum rounded
// once to the result's type; on a GPU with atomic adds (see gpuIndexAdd).
func indexAddKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, idx, src := args[0].(*Array), args[1].(*Array), args[2].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, idx, src})
	d := x.normDim(op.Title, a.Dim)
	if dev := x.st.dev; dev != CPU {
		return gpuIndexAdd(op.Title, x, d, idx.ToDevice(dev), src.ToDevice(dev), out)
	}
	acc, s64 := newArray(ir.Float64, shape), newArray(ir.Float64, src.shape)
	copyInto(acc, x)
	copyInto(s64, src.cpu())
	av, sv := acc.st.data.([]float64), s64.st.data.([]float64)
	iv := indexValues(idx)
	outer, inner, L, n := 1, 1, shape[d], len(iv)
	for _, s := range shape[:d] {
		outer *= s
	}
	for _, s := range shape[d+1:] {
		inner *= s
	}
	ts := []*Array{x, idx, src}
	for o := range outer {
		for i, v := range iv {
			j := checkIndex(op.Title, ts, v, L)
			dst, from := av[(o*L+j)*inner:(o*L+j+1)*inner], sv[(o*n+i)*inner:(o*n+i+1)*inner]
			for k := range dst {
				dst[k] += from[k]
			}
		}
	}
	if out == ir.Float64 {
		return acc
	}
	res := newArray(out, shape)
	copyInto(res, acc)
	return res
}
