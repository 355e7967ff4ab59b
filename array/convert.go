package array

import "gocompile/ir"

// Conversions between storage types and compute kinds. Floating to integer
// truncates toward zero; anything to bool tests for non-zero; float16 and
// bfloat16 round to nearest even. These loops are the only place values
// change representation.

type storedNumber interface {
	float32 | float64 | int32 | int64
}

// aliasVec returns storage [lo, hi) as a Vec of kind k when no conversion
// is needed.
func aliasVec(data any, dt DType, k ir.Kind, lo, hi int) (ir.Vec, bool) {
	switch {
	case dt == ir.Float32 && k == ir.F32:
		return ir.Vec{F32: data.([]float32)[lo:hi]}, true
	case dt == ir.Float64 && k == ir.F64:
		return ir.Vec{F64: data.([]float64)[lo:hi]}, true
	case dt == ir.Int64 && k == ir.I64:
		return ir.Vec{I64: data.([]int64)[lo:hi]}, true
	}
	return ir.Vec{}, false
}

func cvt[D, S storedNumber](d []D, s []S) {
	if same, ok := any(d).([]S); ok { // no conversion: a block copy
		copy(same, s[:len(d)])
		return
	}
	s = s[:len(d)] // so the loop needs no bounds checks
	for i := range d {
		d[i] = D(s[i])
	}
}

func cvtBool[D storedNumber](d []D, s []bool) {
	for i := range d {
		if s[i] {
			d[i] = 1
		} else {
			d[i] = 0
		}
	}
}

func cvtHalf[D storedNumber](d []D, s []uint16, bf bool) {
	if f, ok := any(d).([]float32); ok { // the vectorised conversions
		if bf {
			ir.BF16sToF32s(f, s[:len(f)])
		} else {
			ir.F16sToF32s(f, s[:len(f)])
		}
		return
	}
	if bf {
		for i := range d {
			d[i] = D(ir.BF16ToF32(s[i]))
		}
		return
	}
	for i := range d {
		d[i] = D(ir.F16ToF32(s[i]))
	}
}

func loadInto[D storedNumber](d []D, data any, dt DType, lo int) {
	switch s := data.(type) {
	case []float32:
		cvt(d, s[lo:])
	case []float64:
		cvt(d, s[lo:])
	case []int32:
		cvt(d, s[lo:])
	case []int64:
		cvt(d, s[lo:])
	case []bool:
		cvtBool(d, s[lo:])
	case []uint16:
		cvtHalf(d, s[lo:], dt == ir.BFloat16)
	}
}

// convert loads n elements of storage starting at lo into buf, of kind k.
func convert(buf ir.Vec, k ir.Kind, data any, dt DType, lo, n int) {
	switch k {
	case ir.F32:
		loadInto(buf.F32[:n], data, dt, lo)
	case ir.F64:
		loadInto(buf.F64[:n], data, dt, lo)
	default:
		loadInto(buf.I64[:n], data, dt, lo)
	}
}

// fillFrom fills n values of buf with the one storage element at off.
func fillFrom(buf ir.Vec, k ir.Kind, data any, dt DType, off, n int) {
	switch k {
	case ir.F32:
		loadInto(buf.F32[:1], data, dt, off)
		fill(buf.F32[:n], buf.F32[0])
	case ir.F64:
		loadInto(buf.F64[:1], data, dt, off)
		fill(buf.F64[:n], buf.F64[0])
	default:
		loadInto(buf.I64[:1], data, dt, off)
		fill(buf.I64[:n], buf.I64[0])
	}
}

func fill[T any](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

func storeFrom[S storedNumber](data any, dt DType, lo int, s []S) {
	switch d := data.(type) {
	case []float32:
		cvt(d[lo:lo+len(s)], s)
	case []float64:
		cvt(d[lo:lo+len(s)], s)
	case []int32:
		storeInt32(d[lo:lo+len(s)], s)
	case []int64:
		cvt(d[lo:lo+len(s)], s)
	case []bool:
		d = d[lo : lo+len(s)]
		for i, v := range s {
			d[i] = v != 0
		}
	case []uint16:
		d = d[lo : lo+len(s)]
		if f, ok := any(s).([]float32); ok { // the vectorised conversions
			if dt == ir.BFloat16 {
				ir.F32sToBF16s(d, f)
			} else {
				ir.F32sToF16s(d, f)
			}
			return
		}
		if dt == ir.BFloat16 {
			for i, v := range s {
				d[i] = ir.F32ToBF16(float32(v))
			}
		} else {
			for i, v := range s {
				d[i] = ir.F32ToF16(float32(v))
			}
		}
	}
}

// storeInt32 goes through int64 so that values wrap as integers do.
func storeInt32[S storedNumber](d []int32, s []S) {
	for i, v := range s {
		d[i] = int32(int64(v))
	}
}

// store writes n values of v (kind k) to storage starting at lo.
func store(data any, dt DType, lo int, v ir.Vec, k ir.Kind, n int) {
	switch k {
	case ir.F32:
		storeFrom(data, dt, lo, v.F32[:n])
	case ir.F64:
		storeFrom(data, dt, lo, v.F64[:n])
	default:
		storeFrom(data, dt, lo, v.I64[:n])
	}
}

// vecOf wraps a slice of storage as a Vec when its type is a compute kind.
func sameKind(dt DType, k ir.Kind) bool {
	return (dt == ir.Float32 && k == ir.F32) || (dt == ir.Float64 && k == ir.F64) || (dt == ir.Int64 && k == ir.I64)
}

// Rounder gives a stage's value as storing it in the stage node's dtype
// and reading it back in the stage's kind gives (a row kernel keeps it in
// registers, but eager code would have stored it): the storage's own
// conversions, through a one-element cell. One per goroutine.
type Rounder struct {
	dt      DType
	kind    ir.Kind
	cell    any
	f       [1]float64
	many    any // Results' and Values' cells
	manyLen int
}

// NewRounder rounds values of kind k through dtype dt.
func NewRounder(dt DType, k ir.Kind) *Rounder {
	return &Rounder{dt: dt, kind: k, cell: allocData(dt, 1)}
}

// Result rounds the floating result of a reduction over n values into v.
func (r *Rounder) Result(red ir.Reducer, acc ir.Acc, n int, v ir.Vec) {
	r.f[0] = red.ResultF(acc, n)
	storeFrom(r.cell, r.dt, 0, r.f[:])
	convert(v, r.kind, r.cell, r.dt, 0, 1)
}

// Value rounds x[0], of kind k, into v.
func (r *Rounder) Value(x ir.Vec, k ir.Kind, v ir.Vec) {
	store(r.cell, r.dt, 0, x, k, 1)
	convert(v, r.kind, r.cell, r.dt, 0, 1)
}

// Results rounds the floating results fs of reductions into v's first
// len(fs) values: Result's rounding, for many values at once.
func (r *Rounder) Results(fs []float64, v ir.Vec) {
	cell := r.cells(len(fs))
	storeFrom(cell, r.dt, 0, fs)
	convert(v, r.kind, cell, r.dt, 0, len(fs))
}

// Values rounds the first n values of x, of kind k, into v: Value's
// rounding, for many values at once.
func (r *Rounder) Values(x ir.Vec, k ir.Kind, v ir.Vec, n int) {
	cell := r.cells(n)
	store(cell, r.dt, 0, x, k, n)
	convert(v, r.kind, cell, r.dt, 0, n)
}

// cells is storage of the rounder's dtype for n values, kept for the
// next call.
func (r *Rounder) cells(n int) any {
	if r.many == nil || r.manyLen < n {
		r.many, r.manyLen = allocData(r.dt, n), n
	}
	return r.many
}

// Store writes n values of v (kind k) into t's storage from storage
// offset off, converted to t's type.
func (t *Array) Store(off int, v ir.Vec, k ir.Kind, n int) { store(t.st.data, t.dtype, off, v, k, n) }
