package tensor

import (
	"math"
	"math/rand/v2"
	"sync"

	"gocompile/array"

	"gocompile/ir"
)

// Element is a Go type FromSlice accepts; int is stored as Int64.
type Element interface {
	float32 | float64 | int32 | int64 | int | bool
}

// FromSlice returns a CPU tensor holding a copy of data in the given shape
// (1-D if no shape is given). float32, float64, int32, int64 and bool give
// tensors of that type; int gives Int64.
func FromSlice[T Element](data []T, shape ...int) *Tensor {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	check(ir.CheckShape("FromSlice", nil, shape), "FromSlice")
	if n := ir.Numel(shape); n != len(data) {
		panic(errorf("FromSlice", [][]int{shape}, "pass as many values as the shape holds",
			"shape holds %d elements but %d values were given", n, len(data)))
	}
	var a *array.Array
	switch d := any(data).(type) {
	case []float32:
		a = array.FromData(append([]float32(nil), d...), Float32, shape)
	case []float64:
		a = array.FromData(append([]float64(nil), d...), Float64, shape)
	case []int32:
		a = array.FromData(append([]int32(nil), d...), Int32, shape)
	case []int64:
		a = array.FromData(append([]int64(nil), d...), Int64, shape)
	case []int:
		vals := make([]int64, len(d))
		for i, v := range d {
			vals[i] = int64(v)
		}
		a = array.FromData(vals, Int64, shape)
	case []bool:
		a = array.FromData(append([]bool(nil), d...), Bool, shape)
	}
	return onDefault(wrap(a))
}

// Scalar returns a zero-dimensional tensor holding v.
func Scalar(v float64, dt DType) *Tensor { return Full(v, dt) }

// Zeros returns a tensor of zeros.
func Zeros(dt DType, shape ...int) *Tensor {
	checkShape("Zeros", dt, shape)
	return onDefault(wrap(array.New(CPU, dt, shape)))
}

// Ones returns a tensor of ones.
func Ones(dt DType, shape ...int) *Tensor { return Full(1, dt, shape...) }

// Full returns a tensor with every element v (converted to dt).
func Full(v float64, dt DType, shape ...int) *Tensor {
	checkShape("Full", dt, shape)
	t := wrap(array.New(CPU, dt, shape))
	t.fill(v)
	return onDefault(t)
}

// ZerosLike returns zeros with t's shape, type and device.
func ZerosLike(t *Tensor) *Tensor { return FullLike(t, 0) }

// OnesLike returns ones with t's shape, type and device.
func OnesLike(t *Tensor) *Tensor { return FullLike(t, 1) }

// FullLike returns v everywhere, with t's shape, type and device.
func FullLike(t *Tensor, v float64) *Tensor {
	t.must("FullLike")
	x := wrap(array.New(CPU, t.dtype(), t.shape()))
	x.fill(v)
	return x.ToDevice(t.v.Device())
}

// fromFloat64s builds a tensor of type dt from float64 values.
func fromFloat64s(vals []float64, dt DType, shape ...int) *Tensor {
	return wrap(array.FromFloat64s(vals, dt, shape...))
}

// Arange returns start, start+step, … below end (above it for a negative
// step), as torch.arange.
func Arange(start, end, step float64, dt DType) *Tensor {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if step == 0 || !finite(step) || !finite(start) || !finite(end) {
		throw("Arange", nil, "use a non-zero step and finite bounds", "arange(%g, %g, %g)", start, end, step)
	}
	count := math.Ceil((end - start) / step) // a float: it may be far beyond an int
	if count < 0 {
		throw("Arange", nil, "make the step's sign match the direction from start to end",
			"arange(%g, %g, %g) is empty in the wrong direction", start, end, step)
	}
	if !(count <= ir.MaxNumel) {
		throw("Arange", nil, "use a larger step or a shorter range",
			"arange(%g, %g, %g) has %g elements, more than a tensor may hold (%d)", start, end, step, count, ir.MaxNumel)
	}
	n := int(count)
	checkCreate("Arange", dt, []int{n})
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = start + float64(i)*step
	}
	return onDefault(fromFloat64s(vals, dt, n))
}

// Linspace returns steps values evenly spaced from start to end inclusive,
// computed as torch.linspace does (from both ends toward the middle).
func Linspace(start, end float64, steps int, dt DType) *Tensor {
	if steps < 0 {
		throw("Linspace", nil, "use a non-negative number of steps", "steps = %d", steps)
	}
	checkCreate("Linspace", dt, []int{steps})
	vals := make([]float64, steps)
	if steps == 1 {
		vals[0] = start
	} else if steps > 1 {
		step := (end - start) / float64(steps-1)
		half := steps / 2
		for i := range vals {
			if i < half {
				vals[i] = start + float64(i)*step
			} else {
				vals[i] = end - float64(steps-1-i)*step
			}
		}
	}
	return onDefault(fromFloat64s(vals, dt, steps))
}

// Eye returns the n×n identity matrix.
func Eye(dt DType, n int) *Tensor {
	checkCreate("Eye", dt, []int{n, n})
	vals := make([]float64, n*n)
	for i := range n {
		vals[i*n+i] = 1
	}
	return onDefault(fromFloat64s(vals, dt, n, n))
}

// Generator is a seeded source of random tensors: the same seed gives the
// same sequence of tensors on every machine and Go version (it uses PCG
// and its own transforms), and on every device (the values are drawn on
// the host). It is safe for concurrent use; each draw takes the next
// values of the one sequence.
type Generator struct {
	mu  sync.Mutex
	src *rand.PCG
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) *Generator {
	return &Generator{src: rand.NewPCG(seed, 0x9e3779b97f4a7c15)}
}

// must panics with an *Error unless g was made by NewGenerator.
func (g *Generator) must(op string) {
	if g == nil || g.src == nil {
		throw(op, nil, "make the generator with NewGenerator(seed)", "the generator is nil or a zero Generator{}")
	}
}

func (g *Generator) uniform() float64 { return float64(g.src.Uint64()>>11) / (1 << 53) }

// uniforms is n values uniform in [0, 1), drawn in order.
func (g *Generator) uniforms(n int) []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = g.uniform()
	}
	return vals
}

// Rand returns values uniform in [0, 1).
func (g *Generator) Rand(dt DType, shape ...int) *Tensor {
	g.must("Rand")
	checkCreate("Rand", dt, shape)
	return onDefault(fromFloat64s(g.uniforms(ir.Numel(shape)), dt, shape...))
}

// Randn returns standard normal values (Box–Muller).
func (g *Generator) Randn(dt DType, shape ...int) *Tensor {
	g.must("Randn")
	checkCreate("Randn", dt, shape)
	vals := make([]float64, ir.Numel(shape))
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := 0; i < len(vals); i += 2 {
		u1 := 1 - g.uniform() // in (0, 1]
		u2 := g.uniform()
		r := math.Sqrt(-2 * math.Log(u1))
		vals[i] = r * math.Cos(2*math.Pi*u2)
		if i+1 < len(vals) {
			vals[i+1] = r * math.Sin(2*math.Pi*u2)
		}
	}
	return onDefault(fromFloat64s(vals, dt, shape...))
}

// RandInt returns Int64 values uniform in [lo, hi).
func (g *Generator) RandInt(lo, hi int64, shape ...int) *Tensor {
	g.must("RandInt")
	if hi <= lo {
		throw("RandInt", nil, "use lo < hi", "empty range [%d, %d)", lo, hi)
	}
	checkShape("RandInt", Int64, shape)
	d := make([]int64, ir.Numel(shape))
	span := uint64(hi - lo)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range d {
		d[i] = lo + int64(g.src.Uint64()%span)
	}
	return onDefault(wrap(array.FromData(d, Int64, shape)))
}

// Rand returns values uniform in [0, 1) from a generator seeded with seed.
func Rand(seed uint64, dt DType, shape ...int) *Tensor { return NewGenerator(seed).Rand(dt, shape...) }

// Randn returns standard normal values from a generator seeded with seed.
func Randn(seed uint64, dt DType, shape ...int) *Tensor {
	return NewGenerator(seed).Randn(dt, shape...)
}

// Fill sets every element of t (and so of every view that shares them) to
// v, and returns t.
func (t *Tensor) Fill(v float64) *Tensor {
	defer rethrow()
	t.must("Fill")
	t.noInPlaceOnProxy("Fill")
	t.noInPlaceOnGrad("Fill")
	t.noOverlap("Fill")
	if tr := t.tracerHere(); tr != nil { // a write inside a traced function
		tr.write("Fill", t, t.scalarOf(v))
		return t
	}
	t.fill(v)
	return t
}

// scalarOf is v as a 0-d tensor of t's type on t's device: the value a
// traced Fill or Set writes.
func (t *Tensor) scalarOf(v float64) *Tensor { return scalarOn(v, t.dtype(), t.Device()) }

// scalarOn is v as a 0-d tensor of type dt made on device dev (Scalar
// makes it on the default device first).
func scalarOn(v float64, dt DType, dev Device) *Tensor {
	return wrap(array.FromFloat64s([]float64{v}, dt)).Reshape().ToDevice(dev)
}

// fill sets every element of t, a tensor just made, to v.
func (t *Tensor) fill(v float64) {
	array.CopyInto(t.v, array.FromFloat64s([]float64{v}, t.dtype()))
}

// Copy writes src (broadcast to t's shape, converted to t's type) into t's
// elements in place, and returns t. Views of the same storage see the
// change.
func (t *Tensor) Copy(src *Tensor) *Tensor {
	defer rethrow()
	mustOperands("Copy", t, src)
	t.noInPlaceOnProxy("Copy")
	if tr := writeTracer(t, src); tr != nil { // a write inside a traced function: a new version of t's storage
		if src.px == nil || t.px != nil { // captured tensors alone, or an argument: eager's checks
			t.noInPlaceOnGrad("Copy")
			t.noOverlap("Copy")
		}
		tr.write("Copy", t, src)
		return t
	}
	t.noInPlaceOnGrad("Copy")
	t.noOverlap("Copy")
	if !broadcastsTo(src.shape(), t.shape()) {
		throw("Copy", []*Tensor{t, src}, "the source must broadcast to the destination's shape",
			"cannot copy a tensor of shape %s into one of shape %s", ir.FormatShape(src.shape()), ir.FormatShape(t.shape()))
	}
	array.CopyInto(t.v, src.v) // from any device
	return t
}

// broadcastsTo reports whether shape from broadcasts to exactly shape to.
func broadcastsTo(from, to []int) bool {
	if len(from) > len(to) {
		return false
	}
	off := len(to) - len(from)
	for i, d := range from {
		if d != 1 && d != to[off+i] {
			return false
		}
	}
	return true
}

// Set writes v at the given index (one per dim; negative counts from the
// end).
func (t *Tensor) Set(v float64, index ...int) {
	defer rethrow()
	t.must("Set")
	t.noInPlaceOnProxy("Set")
	off := t.elementOffset("Set", index)
	if tr := t.tracerHere(); tr != nil { // a write inside a traced function: of the one element
		t.noInPlaceOnGrad("Set")
		elem := &Tensor{v: t.v.WithLayout(ir.Layout{Offset: off}), px: t.px}
		tr.write("Set", elem, t.scalarOf(v))
		return
	}
	t.v.Set(off, v)
}

// At reads the element at the given index as a float64.
func (t *Tensor) At(index ...int) float64 {
	defer rethrow()
	t.must("At")
	if t.px != nil {
		return t.materialize("At").At(index...)
	}
	flushWrites(t, "At")
	return t.v.At(t.elementOffset("At", index))
}

func (t *Tensor) elementOffset(op string, index []int) int {
	if len(index) != len(t.shape()) {
		throw(op, []*Tensor{t}, "give one index per dim", "%d indices for a rank-%d tensor", len(index), len(t.shape()))
	}
	off := t.v.Offset()
	for d, i := range index {
		if i < -t.shape()[d] || i >= t.shape()[d] {
			throw(op, []*Tensor{t}, "use an index in [-size, size)", "index %d is out of range for dim %d of size %d", i, d, t.shape()[d])
		}
		if i < 0 {
			i += t.shape()[d]
		}
		off += i * t.strides()[d]
	}
	return off
}

// noOverlap rejects in-place writes to a tensor in which several elements
// are one storage element (an Expand view), as PyTorch does: which value
// would win is undefined, and the parallel writers would race.
func (t *Tensor) noOverlap(op string) {
	for d, s := range t.shape() {
		if s > 1 && t.strides()[d] == 0 {
			throw(op, []*Tensor{t}, "write to a contiguous copy (Contiguous) instead",
				"dim %d of size %d repeats one element (stride 0): more than one element of the written-to tensor refers to a single memory location", d, s)
		}
	}
}

// noInPlaceOnProxy rejects in-place writes inside compiled functions into
// values computed there: only the function's arguments, the tensors it
// captures and views of them can be written.
func (t *Tensor) noInPlaceOnProxy(op string) {
	if t.px != nil && t.px.arg == nil {
		throw(op, []*Tensor{t}, "compute a new tensor instead (Where, MaskedFill, Cat, IndexPut …), or write into an argument or a captured tensor",
			"in-place writes inside a compiled function go to its arguments, the tensors it captures, and views of them; this tensor was computed inside the function")
	}
}

// tracerHere is the tracer of t, a traced tensor (an argument), or else
// the calling goroutine's.
func (t *Tensor) tracerHere() *tracer {
	if t.px != nil {
		return t.px.tr
	}
	return tracingHere()
}

// writeTracer is the tracer that records a write of dst from srcs: dst's
// when dst is traced (an argument), else theirs when one is traced, else
// the one writing dst's storage, else the calling goroutine's (a traced
// function writing a captured tensor).
func writeTracer(dst *Tensor, srcs ...ir.Value) *tracer {
	if dst.px != nil {
		return dst.px.tr
	}
	if tr := tracerOf(srcs); tr != nil {
		return tr
	}
	if tr := writerOf([]ir.Value{dst}); tr != nil {
		return tr
	}
	return tracingHere()
}
