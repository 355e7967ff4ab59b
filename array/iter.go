package array

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gocompile/ir"
)

// BlockSize is the number of elements a kernel processes per step: small
// enough that a block program's registers stay in L1/L2.
const BlockSize = 1024

// MinParallel is the smallest number of elements worth a goroutine.
const MinParallel = 1 << 15

// parallelFor splits [0, n) elements into ranges of at least grain
// elements, aligned to BlockSize so that only the last block of the whole
// range is partial, and runs fn on them on up to GOMAXPROCS goroutines.
func parallelFor(n, grain int, fn func(lo, hi int)) { split(n, grain, BlockSize, fn) }

// ParallelRows splits [0, n) rows (each a unit of work) into ranges of at
// least grain rows and runs fn on them on up to GOMAXPROCS goroutines.
func ParallelRows(n, grain int, fn func(lo, hi int)) { split(n, grain, 1, fn) }

// chunksPerWorker is how many ranges split cuts the work into per
// goroutine: workers take the next range as they finish one, so that one
// that is descheduled or slowed (by other processes, or by data that costs
// more) holds up the others by one range, not by its whole share.
const chunksPerWorker = 8

// split runs fn over ranges of [0, n) of at least grain elements, aligned
// to align, on up to GOMAXPROCS goroutines. Which goroutine runs a range
// varies from call to call; the ranges' results must not depend on it.
func split(n, grain, align int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(grain, 1))
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunk := max(grain, (n+workers*chunksPerWorker-1)/(workers*chunksPerWorker))
	chunk = (chunk + align - 1) / align * align
	var next atomic.Int64
	work := func() {
		for {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= n {
				return
			}
			fn(lo, min(lo+chunk, n))
		}
	}
	// A worker's panic stops the others taking ranges and is raised again
	// on the caller's goroutine, where the caller (tensor.Try, a
	// service's handler) can recover it: a panic on a goroutine of its own
	// would end the process.
	var failed atomic.Pointer[any]
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					failed.CompareAndSwap(nil, &r)
					next.Store(int64(n))
				}
			}()
			work()
		}()
	}
	wg.Wait()
	if r := failed.Load(); r != nil {
		panic(*r)
	}
}

// Coalesce merges adjacent dims that every operand steps through as one
// (stride[i] == stride[i+1]*shape[i+1]) and drops size-1 dims, so that
// contiguous operands become one long run. strides holds one stride list
// per operand, aligned with shape; the results are new slices.
func Coalesce(shape []int, strides ...[]int) ([]int, [][]int) {
	outShape := make([]int, 0, len(shape))
	outStrides := make([][]int, len(strides))
	for i := range strides {
		outStrides[i] = make([]int, 0, len(shape))
	}
	for d := range shape {
		if shape[d] == 1 {
			continue
		}
		last := len(outShape) - 1
		merge := last >= 0
		for k := 0; merge && k < len(strides); k++ {
			merge = outStrides[k][last] == strides[k][d]*shape[d]
		}
		if merge {
			outShape[last] *= shape[d]
			for k := range strides {
				outStrides[k][last] = strides[k][d]
			}
			continue
		}
		outShape = append(outShape, shape[d])
		for k := range strides {
			outStrides[k] = append(outStrides[k], strides[k][d])
		}
	}
	return outShape, outStrides
}

// Operand is a strided view of a CPU array's storage that a kernel reads
// in blocks, converted to a compute kind. Each goroutine uses its own
// Clone.
type Operand struct {
	data    any
	dtype   DType
	shape   []int // the iteration shape (coalesced)
	strides []int // aligned with shape; 0 on broadcast dims
	offset  int
	dense   bool // elements at offset+i for flat index i
	idx     []int
	raw     any // staging buffer of the storage type, for strided loads
	conv    ir.Vec
}

// Operand reads t's storage with the given iteration shape and strides
// from storage offset offset (t's own layout is not used).
func (t *Array) Operand(shape, strides []int, offset int) *Operand {
	return newOperand(t.st.data, t.dtype, shape, strides, offset)
}

func newOperand(data any, dt DType, shape, strides []int, offset int) *Operand {
	o := &Operand{data: data, dtype: dt, shape: shape, strides: strides, offset: offset}
	o.dense = len(shape) == 0 || (len(shape) == 1 && strides[0] == 1)
	if len(shape) == 0 {
		o.shape, o.strides = []int{1}, []int{0}
	}
	return o
}

// SetOffset moves the operand to start at storage offset off (a kernel
// walking rows moves one operand from row to row).
func (o *Operand) SetOffset(off int) { o.offset = off }

// Clone gives a copy with its own buffers, for another goroutine.
func (o *Operand) Clone() *Operand {
	c := *o
	c.idx, c.raw, c.conv = nil, nil, ir.Vec{}
	return &c
}

// Load returns elements [start, start+n) of the operand (in iteration
// order) converted to kind k. It aliases storage when the operand is dense
// and already of kind k; otherwise it fills buf.
func (o *Operand) Load(start, n int, k ir.Kind, buf ir.Vec) ir.Vec {
	if o.dense {
		return o.loadRun(o.offset+start, n, k, buf)
	}
	if len(o.shape) == 1 && o.strides[0] == 0 {
		fillFrom(buf, k, o.data, o.dtype, o.offset, n)
		return buf
	}
	if r := len(o.shape); o.strides[r-1] == 1 && n > 0 && start/o.shape[r-1] == (start+n-1)/o.shape[r-1] {
		// Within one contiguous run (a row of a broadcast or sliced
		// operand): read it in place.
		if len(o.idx) < r {
			o.idx = make([]int, r)
		}
		return o.loadRun(o.offset+Unravel(start, o.shape, o.strides, o.idx[:r]), n, k, buf)
	}
	if o.raw == nil {
		o.raw = allocData(o.dtype, min(BlockSize, ir.Numel(o.shape)))
	}
	gatherAny(o.raw, o.data, o.shape, o.strides, o.offset, start, n, &o.idx)
	convert(buf, k, o.raw, o.dtype, 0, n)
	return buf
}

// loadRun returns the n stored elements from lo on, contiguous in storage,
// as kind k: aliasing storage where it is of kind k, else converted into
// buf.
func (o *Operand) loadRun(lo, n int, k ir.Kind, buf ir.Vec) ir.Vec {
	if v, ok := aliasVec(o.data, o.dtype, k, lo, lo+n); ok {
		return v
	}
	if !loadHalf(buf, k, o.data, o.dtype, lo, n) {
		convert(buf, k, o.data, o.dtype, lo, n)
	}
	return buf
}

// Alias returns elements [start, start+n) of the operand as a Vec of kind
// k that aliases storage, when the operand is dense and stored in kind k.
func (o *Operand) Alias(start, n int, k ir.Kind) (ir.Vec, bool) {
	if !o.dense || n <= 0 {
		return ir.Vec{}, false
	}
	lo := o.offset + start
	return aliasVec(o.data, o.dtype, k, lo, lo+n)
}

// Unravel writes the multi-index of flat (row-major over shape) into idx
// and returns the storage offset it addresses.
func Unravel(flat int, shape, strides, idx []int) int {
	off := 0
	for d := len(shape) - 1; d >= 0; d-- {
		i := flat % shape[d]
		flat /= shape[d]
		idx[d] = i
		off += i * strides[d]
	}
	return off
}

func gatherAny(dst, src any, shape, strides []int, offset, start, n int, idx *[]int) {
	switch s := src.(type) {
	case []float32:
		gather(dst.([]float32), s, shape, strides, offset, start, n, idx)
	case []float64:
		gather(dst.([]float64), s, shape, strides, offset, start, n, idx)
	case []uint16:
		gather(dst.([]uint16), s, shape, strides, offset, start, n, idx)
	case []int32:
		gather(dst.([]int32), s, shape, strides, offset, start, n, idx)
	case []int64:
		gather(dst.([]int64), s, shape, strides, offset, start, n, idx)
	case []bool:
		gather(dst.([]bool), s, shape, strides, offset, start, n, idx)
	}
}

// gather copies n elements, starting at flat index start of a strided view,
// into dst.
func gather[S any](dst, src []S, shape, strides []int, offset, start, n int, idx *[]int) {
	is := strides[len(strides)-1]
	walkRuns(shape, strides, offset, start, n, idx, func(k, p, run int) {
		for j := range run {
			dst[k+j] = src[p]
			p += is
		}
	})
}

// scatter is gather's inverse: it writes n elements of src to a strided view.
func scatter[S any](dst, src []S, shape, strides []int, offset, start, n int, idx *[]int) {
	if len(shape) == 0 {
		if n > 0 {
			dst[offset] = src[0]
		}
		return
	}
	is := strides[len(strides)-1]
	walkRuns(shape, strides, offset, start, n, idx, func(k, p, run int) {
		for j := range run {
			dst[p] = src[k+j]
			p += is
		}
	})
}

// walkRuns visits n elements of a strided view, from flat index start, as
// runs along the innermost dim: fn gets the run's position k among the n,
// its storage offset and its length. idx is scratch for the multi-index.
func walkRuns(shape, strides []int, offset, start, n int, idxp *[]int, fn func(k, off, run int)) {
	r := len(shape)
	if len(*idxp) < r {
		*idxp = make([]int, r)
	}
	idx := (*idxp)[:r]
	off := offset + Unravel(start, shape, strides, idx)
	inner, is := shape[r-1], strides[r-1]
	for k := 0; k < n; {
		run := min(inner-idx[r-1], n-k)
		fn(k, off, run)
		k += run
		off += run * is
		idx[r-1] += run
		for d := r - 1; d > 0 && idx[d] == shape[d]; d-- { // carry
			off -= idx[d] * strides[d]
			idx[d] = 0
			idx[d-1]++
			off += strides[d-1]
		}
	}
}

// HostVec is a Vec of kind k that aliases elements [lo, hi) of t's
// storage, for a kernel to compute into directly; false unless t is a
// contiguous CPU array stored in kind k.
func (t *Array) HostVec(lo, hi int, k ir.Kind) (ir.Vec, bool) {
	if t.st.dev != CPU || !t.IsContiguous() {
		return ir.Vec{}, false
	}
	return aliasVec(t.st.data, t.dtype, k, t.offset+lo, t.offset+hi)
}
