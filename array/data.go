package array

import (
	"fmt"

	"gocompile/ir"
)

// Moving elements between Go slices and arrays.

// FromData makes a contiguous CPU array of type dt and the given shape
// over data, without copying: data must be the slice type dt is stored in
// ([]float32, []float64, []uint16 for float16 and bfloat16, []int32,
// []int64, []bool) and hold exactly as many elements as the shape.
func FromData(data any, dt DType, shape []int) *Array {
	n := ir.Numel(shape)
	if l := dataLen(data); l != n || !storedAs(data, dt) {
		panic(fmt.Sprintf("array: FromData of %T (%d elements) as %v%v", data, l, dt, shape))
	}
	shape = append([]int(nil), shape...)
	return &Array{st: &storage{dev: CPU, data: data}, shape: shape, strides: ir.ContiguousStrides(shape), dtype: dt}
}

// FromFloat64s makes a contiguous CPU array of type dt from float64
// values, converted as casts convert.
func FromFloat64s(vals []float64, dt DType, shape ...int) *Array {
	t := newArray(dt, shape)
	storeFrom(t.st.data, dt, 0, vals)
	return t
}

// Float32s is a copy of the elements in row-major order, as float32.
func (t *Array) Float32s() []float32 { return copyAs[float32](t, ir.Float32) }

// Float64s is a copy of the elements in row-major order, as float64.
func (t *Array) Float64s() []float64 { return copyAs[float64](t, ir.Float64) }

// Int64s is a copy of the elements in row-major order, as int64 (floating
// values truncate toward zero).
func (t *Array) Int64s() []int64 { return copyAs[int64](t, ir.Int64) }

// Bools is a copy of the elements in row-major order, as bool (non-zero
// is true).
func (t *Array) Bools() []bool { return copyAs[bool](t, ir.Bool) }

func copyAs[T any](t *Array, dt DType) []T {
	c := asType(t.cpu(), dt)
	return append([]T(nil), c.st.data.([]T)[c.offset:c.offset+c.Numel()]...)
}

// element is the zero-dimensional view of the element at storage offset
// off.
func (t *Array) element(off int) *Array {
	return &Array{st: t.st, shape: []int{}, strides: []int{}, offset: off, dtype: t.dtype}
}

// At reads the element at storage offset off as a float64.
func (t *Array) At(off int) float64 {
	src := t
	if t.st.dev != CPU {
		src, off = t.element(off).cpu(), 0
	}
	var v [1]float64
	loadInto(v[:], src.st.data, src.dtype, off)
	return v[0]
}

// Set writes v, converted to t's type, at storage offset off.
func (t *Array) Set(off int, v float64) {
	if t.st.dev != CPU {
		copyInto(t.element(off), FromFloat64s([]float64{v}, t.dtype))
		return
	}
	storeFrom(t.st.data, t.dtype, off, []float64{v})
}

// CopyInto writes src, broadcast to dst's shape and converted to dst's
// type, into dst, which may be any view on any device.
func CopyInto(dst, src *Array) {
	dst.st.version.Add(1)
	copyInto(dst, src)
}

func dataLen(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []uint16:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	case []bool:
		return len(d)
	}
	return -1
}

func storedAs(data any, dt DType) bool {
	switch data.(type) {
	case []float32:
		return dt == ir.Float32
	case []float64:
		return dt == ir.Float64
	case []uint16:
		return dt == ir.Float16 || dt == ir.BFloat16
	case []int32:
		return dt == ir.Int32
	case []int64:
		return dt == ir.Int64
	case []bool:
		return dt == ir.Bool
	}
	return false
}

// HostData is the whole storage slice of a CPU array (see FromData for its
// type), which the array indexes with its offset and strides; nil on a
// GPU. Readers that walk a layout themselves (printing, file writers) use
// it; writing to it writes every view of the storage.
func (t *Array) HostData() any { return t.st.data }
