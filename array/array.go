package array

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"gocompile/ir"
)

// The types an Array is described by; package tensor re-exports them.
type (
	DType  = ir.DType
	Device = ir.Device
)

// CPU is the host.
var CPU = ir.CPU

// Array is an n-dimensional value: a view (shape, strides and offset, in
// elements) of a storage that other arrays may share, with an element
// type. Kernels read arrays and write new ones; the in-place kernels
// (Copy, Fill, Set) write through a view into the storage it shares.
//
// An Array's shape and strides are not modified once it is made: methods
// that return them return the slices themselves, which callers must not
// change.
type Array struct {
	st      *storage
	shape   []int
	strides []int
	offset  int
	dtype   DType
}

// storage is where an array's elements live: on the CPU a typed slice
// ([]float32, []float64, []uint16 for float16 and bfloat16 bits, []int32,
// []int64 or []bool); on a GPU a block of device memory; for a
// placeholder (Meta), nothing.
type storage struct {
	dev     Device
	data    any
	gpu     *gpuBuffer
	version atomic.Uint64 // writes into it in place (CopyInto, IndexCopyInto)
}

// Version counts the in-place writes into t's storage through CopyInto
// and IndexCopyInto: autograd compares it to tell whether a value saved
// for a gradient was overwritten.
func (t *Array) Version() uint64 { return t.st.version.Load() }

// CountWrite counts a write into t's storage made by other means than
// CopyInto and IndexCopyInto: a compiled program's kernel writing a
// storage in place.
func (t *Array) CountWrite() { t.st.version.Add(1) }

// Shape is the array's sizes (not a copy).
func (t *Array) Shape() []int { return t.shape }

// Strides is the array's strides in elements (not a copy).
func (t *Array) Strides() []int { return t.strides }

// Offset is the index of the array's first element in its storage.
func (t *Array) Offset() int { return t.offset }

// DType is the element type.
func (t *Array) DType() DType { return t.dtype }

// Device is where the storage lives.
func (t *Array) Device() Device { return t.st.dev }

// Numel is the number of elements.
func (t *Array) Numel() int { return ir.Numel(t.shape) }

// Layout is the array's shape, strides and offset.
func (t *Array) Layout() ir.Layout {
	return ir.Layout{Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

// IsContiguous reports whether the elements are laid out in row-major
// order without gaps.
func (t *Array) IsContiguous() bool { return ir.IsContiguous(t.shape, t.strides) }

// SharesStorage reports whether t and u are views of the same storage.
func (t *Array) SharesStorage(u *Array) bool { return t.st == u.st }

// OnGPU reports whether the elements live in GPU memory.
func (t *Array) OnGPU() bool { return t.st.gpu != nil }

// WithLayout is a view of t's storage with layout l.
func (t *Array) WithLayout(l ir.Layout) *Array { return t.withLayout(l) }

// Meta is a placeholder array: the shape, strides, dtype and device of a
// value not computed (yet), with no storage behind it. Tracing uses them.
func Meta(dev Device, dt DType, shape, strides []int) *Array {
	return &Array{st: &storage{dev: dev}, shape: shape, strides: strides, dtype: dt}
}

// New allocates a contiguous array of the given type and shape on device d
// (zeros on the CPU, uninitialised on a GPU).
func New(d Device, dt DType, shape []int) *Array { return newOn(d, dt, shape) }

func (t *Array) layout() ir.Layout { return t.Layout() }

// newArray allocates a contiguous array of the given type and shape on the
// CPU, filled with zeros.
func newArray(dt DType, shape []int) *Array {
	shape = append([]int(nil), shape...)
	Check(AllocError("alloc", dt, shape), "alloc") // ops check shapes first: a backstop
	return &Array{
		st:      &storage{dev: CPU, data: allocData(dt, ir.Numel(shape))},
		shape:   shape,
		strides: ir.ContiguousStrides(shape),
		dtype:   dt,
	}
}

func allocData(dt DType, n int) any {
	if n < 0 || n > ir.MaxNumel { // callers check shapes first: a backstop
		Throw("alloc", nil, "use smaller sizes", "%d elements of %v cannot be allocated", n, dt)
	}
	switch dt {
	case ir.Float32:
		return make([]float32, n)
	case ir.Float64:
		return make([]float64, n)
	case ir.Float16, ir.BFloat16:
		return make([]uint16, n)
	case ir.Int32:
		return make([]int32, n)
	case ir.Int64:
		return make([]int64, n)
	case ir.Bool:
		return make([]bool, n)
	}
	panic(&ir.Error{Op: "alloc", Reason: fmt.Sprintf("invalid dtype %v", dt), Fix: "use one of the DType constants"})
}

// machineMemory is machineBytes, asked once.
var machineMemory = sync.OnceValue(machineBytes)

// AllocError says why an array of dt and shape cannot be allocated, naming
// op, or returns nil. Ops keep shapes within ir.MaxNumel elements, which
// Go's allocator accepts; but asking it for more memory than the machine
// has (RAM and swap) ends the process with a fatal error, not a panic, so
// such a request is refused here. Smaller requests that do not fit beside
// what is already allocated are beyond this check.
func AllocError(op string, dt DType, shape []int) error {
	if err := ir.CheckShape(op, [][]int{shape}, shape); err != nil {
		return err
	}
	bytes := uint64(ir.Numel(shape)) * uint64(max(dt.Size(), 1))
	if m := machineMemory(); m > 0 && bytes > m {
		return ir.Errorf(op, [][]int{shape}, "use smaller sizes, or a machine with more memory",
			"%d elements of %v take %d bytes, more than this machine's memory and swap (%d bytes)", ir.Numel(shape), dt, bytes, m)
	}
	return nil
}

func (t *Array) withLayout(l ir.Layout) *Array {
	return &Array{st: t.st, shape: l.Shape, strides: l.Strides, offset: l.Offset, dtype: t.dtype}
}

func (t *Array) normDim(op string, d int) int {
	n, err := ir.NormDim(op, t.shape, d)
	if err != nil {
		panic(err)
	}
	return n
}

func hostPointer(t *Array) unsafe.Pointer {
	switch d := t.st.data.(type) {
	case []float32:
		return unsafe.Pointer(unsafe.SliceData(d[t.offset:]))
	case []float64:
		return unsafe.Pointer(unsafe.SliceData(d[t.offset:]))
	case []uint16:
		return unsafe.Pointer(unsafe.SliceData(d[t.offset:]))
	case []int32:
		return unsafe.Pointer(unsafe.SliceData(d[t.offset:]))
	case []int64:
		return unsafe.Pointer(unsafe.SliceData(d[t.offset:]))
	case []bool:
		return unsafe.Pointer(unsafe.SliceData(d[t.offset:]))
	}
	return nil
}
