package array

import (
	"runtime"

	"gocompile/ir"
)

// reduce runs a reduction op: the reduced dims are walked as one flat range
// per output element, in blocks, and folded with the registry's Reducer.
func reduce(op *ir.Op, a ir.Attrs, x *Array) *Array {
	dims, err := ir.NormDims(op.Title, x.shape, a.Dims)
	Check(err, op.Title, x)
	compute, out, err := op.Types([]ir.Operand{{DType: x.dtype}}, &a)
	Check(err, op.Title, x)
	r := op.Reducer

	isRed := make([]bool, len(x.shape))
	for _, d := range dims {
		isRed[d] = true
	}
	var keptShape, keptStrides, redShape, redStrides []int
	for d := range x.shape {
		if isRed[d] {
			redShape = append(redShape, x.shape[d])
			redStrides = append(redStrides, x.strides[d])
		} else {
			keptShape = append(keptShape, x.shape[d])
			keptStrides = append(keptStrides, x.strides[d])
		}
	}
	nRed := ir.Numel(redShape)
	if nRed == 0 && r != ir.RSum && r != ir.RMean {
		Throw(op.Title, []*Array{x}, "reduce over non-empty dims, or check the input's size first",
			"cannot take the %v over zero elements (dims %v)", r, dims)
	}
	res := newOn(x.st.dev, out, ir.ReduceShape(x.shape, dims, a.KeepDim))
	nOut := ir.Numel(keptShape)
	if nOut == 0 {
		return res
	}
	k := compute.Compute()
	if x.st.dev != CPU {
		gpuReduce(r, x, k, keptShape, keptStrides, redShape, redStrides, res)
		return res
	}
	rshape, rstrides := Coalesce(redShape, redStrides)
	rstride := []int(nil)
	if len(rstrides) > 0 {
		rstride = rstrides[0]
	}
	isInt := k == ir.I64

	// fold reduces flat range [lo, hi) of the reduced dims of the row at off.
	fold := func(o *Operand, buf ir.Vec, off, lo, hi int) ir.Acc {
		o.offset = off
		if v, ok := o.Alias(lo, hi-lo, k); ok {
			return FoldVec(r, k, lo, hi, v)
		}
		return FoldRange(r, k, lo, hi, func(s, m int) ir.Vec { return o.Load(s, m, k, buf) })
	}
	newRowOperand := func() (*Operand, ir.Vec) {
		return newOperand(x.st.data, x.dtype, rshape, rstride, 0), ir.NewVec(k, min(BlockSize, max(nRed, 1)))
	}
	rowOffset := func(o int, idx []int) int {
		if len(keptShape) == 0 {
			return x.offset
		}
		return x.offset + Unravel(o, keptShape, keptStrides, idx)
	}
	if nOut >= runtime.GOMAXPROCS(0) && columnLayout(keptShape, keptStrides, rshape, rstride) {
		// Outputs side by side in memory: folded a tile at a time.
		accs := make([]ir.Acc, nOut)
		foldColumns(r, k, x, keptShape, keptStrides, rshape, rstride, accs)
		writeResults(res, r, accs, isInt, nRed)
		return res
	}
	if nOut >= runtime.GOMAXPROCS(0) || nRed < 2*MinParallel {
		// Many rows: each goroutine reduces whole rows.
		ParallelRows(nOut, max(1, MinParallel/max(nRed, 1)), func(lo, hi int) {
			o, buf := newRowOperand()
			idx := make([]int, len(keptShape))
			StoreRowResults(res, r, isInt, nRed, lo, hi, func(i int) ir.Acc {
				return fold(o, buf, rowOffset(i, idx), 0, nRed)
			})
		})
		return res
	}
	// Few long rows: split each row across the cores.
	accs := make([]ir.Acc, nOut)
	idx := make([]int, len(keptShape))
	for i := range nOut {
		off := rowOffset(i, idx)
		accs[i] = FoldSplit(r, isInt, nRed, func() func(lo, hi int) ir.Acc {
			o, buf := newRowOperand()
			return func(lo, hi int) ir.Acc { return fold(o, buf, off, lo, hi) }
		})
	}
	writeResults(res, r, accs, isInt, nRed)
	return res
}

func writeResults(res *Array, r ir.Reducer, accs []ir.Acc, isInt bool, n int) {
	for b := 0; b < len(accs); b += resultBatch {
		writeBatch(res, b, r, accs[b:min(b+resultBatch, len(accs))], isInt, n)
	}
}

// resultBatch is how many results a reduction stores at a time, from
// buffers on the stack rather than one per output on the heap.
const resultBatch = 256

// StoreRowResults folds rows [lo, hi) with fold and stores their results,
// each over n values, into res's storage from offset lo, as eager
// reductions store theirs.
func StoreRowResults(res *Array, r ir.Reducer, isInt bool, n, lo, hi int, fold func(row int) ir.Acc) {
	var accs [resultBatch]ir.Acc
	for b := lo; b < hi; b += resultBatch {
		m := min(resultBatch, hi-b)
		for i := range m {
			accs[i] = fold(b + i)
		}
		writeBatch(res, b, r, accs[:m], isInt, n)
	}
}

// writeBatch stores the results of up to resultBatch accumulators into
// res's storage from offset off.
func writeBatch(res *Array, off int, r ir.Reducer, accs []ir.Acc, isInt bool, n int) {
	if r.IsArg() || isInt {
		var vals [resultBatch]int64
		for i, acc := range accs {
			vals[i] = r.ResultI(acc)
		}
		storeFrom(res.st.data, res.dtype, off, vals[:len(accs)])
		return
	}
	var vals [resultBatch]float64
	for i, acc := range accs {
		vals[i] = r.ResultF(acc, n)
	}
	storeFrom(res.st.data, res.dtype, off, vals[:len(accs)])
}

// FoldPart is the length of the parts a reduced range is folded in: each
// part's blocks into a fresh accumulator, the parts merged in order. A
// range's result depends on its length alone, not on how many cores fold
// its parts (FoldSplit) or whether one folds them all (FoldRange).
const FoldPart = 1 << 16

// FoldRange folds [lo, hi) of a reduced range into a fresh accumulator a
// block at a time, in parts of FoldPart (lo is a multiple of FoldPart or
// the range lies in one part): block(s, m) gives the m values from index
// s, in kind k. Eager reductions and fused row reductions fold through it,
// so that both add up the same blocks in the same order.
func FoldRange(r ir.Reducer, k ir.Kind, lo, hi int, block func(s, m int) ir.Vec) ir.Acc {
	acc := r.Init()
	for p := lo; p < hi; p += FoldPart {
		part := r.Init()
		for s := p; s < min(p+FoldPart, hi); s += BlockSize {
			m := min(BlockSize, hi-s)
			v := block(s, m)
			accumulate(r, k, &part, v, 0, m, s)
		}
		r.Merge(&acc, part, k == ir.I64)
	}
	return acc
}

func accumulate(r ir.Reducer, k ir.Kind, acc *ir.Acc, v ir.Vec, i, m, base int) {
	switch k {
	case ir.F32:
		ir.Accumulate(r, acc, v.F32[i:i+m], int64(base))
	case ir.F64:
		ir.Accumulate(r, acc, v.F64[i:i+m], int64(base))
	default:
		ir.Accumulate(r, acc, v.I64[i:i+m], int64(base))
	}
}

// FoldVec is FoldRange over values already in memory: v holds the values
// of [lo, hi), folded in the same blocks and parts, so with the same
// result, without a call per block to load them.
func FoldVec(r ir.Reducer, k ir.Kind, lo, hi int, v ir.Vec) ir.Acc {
	acc := r.Init()
	for p := lo; p < hi; p += FoldPart {
		part := r.Init()
		pe := min(p+FoldPart, hi)
		switch {
		case (r == ir.RSum || r == ir.RMean) && k == ir.F32:
			ir.SumBlocks(r, &part, v.F32[p-lo:pe-lo], int64(p), BlockSize)
		case (r == ir.RSum || r == ir.RMean) && k == ir.F64:
			ir.SumBlocks(r, &part, v.F64[p-lo:pe-lo], int64(p), BlockSize)
		default:
			for s := p; s < pe; s += BlockSize {
				accumulate(r, k, &part, v, s-lo, min(BlockSize, pe-s), s)
			}
		}
		r.Merge(&acc, part, k == ir.I64)
	}
	return acc
}

// FoldSplit reduces a long range of n values on all cores: its parts of
// FoldPart, each folded by a goroutine's fold (from newFold), merged in
// order, as FoldRange merges them.
func FoldSplit(r ir.Reducer, isInt bool, n int, newFold func() func(lo, hi int) ir.Acc) ir.Acc {
	parts := make([]ir.Acc, (n+FoldPart-1)/FoldPart)
	ParallelRows(len(parts), 1, func(plo, phi int) {
		fold := newFold()
		for p := plo; p < phi; p++ {
			parts[p] = fold(p*FoldPart, min((p+1)*FoldPart, n))
		}
	})
	acc := r.Init()
	for _, p := range parts {
		r.Merge(&acc, p, isInt)
	}
	return acc
}
