package tensor

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gocompile/ir"
)

// DType is the element type of a tensor.
type DType = ir.DType

// The element types. Float16 and BFloat16 are stored in 16 bits and
// computed in float32.
const (
	Bool     = ir.Bool
	Int32    = ir.Int32
	Int64    = ir.Int64
	Float16  = ir.Float16
	BFloat16 = ir.BFloat16
	Float32  = ir.Float32
	Float64  = ir.Float64
)

// DeviceType says what kind of processor holds a tensor's storage.
type DeviceType = ir.DeviceType

// The device types.
const (
	DeviceCPU  = ir.DeviceCPU
	DeviceCUDA = ir.DeviceCUDA
)

// Device is where a tensor's storage lives and its ops run.
type Device = ir.Device

// CPU is the host.
var CPU = ir.CPU

// CUDA is GPU number i.
func CUDA(i int) Device { return ir.CUDA(i) }

// Target is a DType or a Device: what To converts a tensor to.
type Target = ir.Target

// Tensor is an n-dimensional array: a view (shape, strides and offset, in
// elements) of a storage that other tensors may share. Views made by
// Reshape, Transpose, Slice and the like alias their base: a write through
// one is seen by the other.
//
// Tensors are immutable except through the explicit in-place methods (Copy,
// Fill, Set); many goroutines may read one tensor at once.
type Tensor struct {
	st      *storage
	shape   []int
	strides []int
	offset  int
	dtype   DType
	px      *proxy // set while tracing: the tensor stands for a graph node
	dynDims uint64 // dims MarkDynamic asked to compile as dynamic
}

// storage is where a tensor's elements live: on the CPU a typed slice
// ([]float32, []float64, []uint16 for float16 and bfloat16 bits, []int32,
// []int64 or []bool); on a GPU a block of device memory.
type storage struct {
	dev  Device
	data any
	gpu  *gpuBuffer
}

// Shape returns a copy of the tensor's sizes.
func (t *Tensor) Shape() []int {
	t.must("Shape")
	if t.px != nil && t.px.tr.onShapeRead != nil {
		t.px.tr.onShapeRead(t.shape) // fn may compute with these numbers
	}
	return append([]int(nil), t.shape...)
}

// Strides returns a copy of the tensor's strides, in elements.
func (t *Tensor) Strides() []int {
	t.must("Strides")
	return append([]int(nil), t.strides...)
}

// Offset is the index of the tensor's first element in its storage.
func (t *Tensor) Offset() int {
	t.must("Offset")
	return t.offset
}

// DType returns the element type.
func (t *Tensor) DType() DType {
	t.must("DType")
	return t.dtype
}

// Device returns where the tensor's storage lives.
func (t *Tensor) Device() Device {
	t.must("Device")
	return t.st.dev
}

// Dim is the number of dimensions (the rank).
func (t *Tensor) Dim() int {
	t.must("Dim")
	return len(t.shape)
}

// Numel is the number of elements.
func (t *Tensor) Numel() int {
	t.must("Numel")
	return ir.Numel(t.shape)
}

// Size returns the size of dim d (negative d counts from the end).
func (t *Tensor) Size(d int) int {
	t.must("Size")
	d = t.normDim("Size", d)
	if len(t.shape) == 0 {
		return 1
	}
	if t.px != nil && t.px.tr.onShapeRead != nil {
		t.px.tr.onShapeRead(t.shape[d : d+1])
	}
	return t.shape[d]
}

// IsContiguous reports whether the elements are laid out in row-major order
// without gaps.
func (t *Tensor) IsContiguous() bool {
	t.must("IsContiguous")
	return ir.IsContiguous(t.shape, t.strides)
}

// SharesStorage reports whether t and u are views of the same storage.
func (t *Tensor) SharesStorage(u *Tensor) bool {
	mustOperands("SharesStorage", t, u)
	return t.st == u.st
}

func (t *Tensor) layout() ir.Layout {
	return ir.Layout{Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

// newTensor allocates a contiguous tensor of the given type and shape on the
// CPU, filled with zeros.
func newTensor(dt DType, shape []int) *Tensor {
	shape = append([]int(nil), shape...)
	check(allocError("alloc", dt, shape), "alloc") // ops check shapes first: a backstop
	return &Tensor{
		st:      &storage{dev: CPU, data: allocData(dt, ir.Numel(shape))},
		shape:   shape,
		strides: ir.ContiguousStrides(shape),
		dtype:   dt,
	}
}

func allocData(dt DType, n int) any {
	if n < 0 || n > ir.MaxNumel { // callers check shapes first: a backstop
		throw("alloc", nil, "use smaller sizes", "%d elements of %v cannot be allocated", n, dt)
	}
	switch dt {
	case Float32:
		return make([]float32, n)
	case Float64:
		return make([]float64, n)
	case Float16, BFloat16:
		return make([]uint16, n)
	case Int32:
		return make([]int32, n)
	case Int64:
		return make([]int64, n)
	case Bool:
		return make([]bool, n)
	}
	panic(&Error{Op: "alloc", Reason: fmt.Sprintf("invalid dtype %v", dt), Fix: "use one of the DType constants"})
}

// machineMemory is machineBytes, asked once.
var machineMemory = sync.OnceValue(machineBytes)

// allocError says why a tensor of dt and shape cannot be allocated, naming
// op, or returns nil. Ops keep shapes within ir.MaxNumel elements, which
// Go's allocator accepts; but asking it for more memory
// than the machine has (RAM and swap) ends the process with a fatal
// error, not a panic, so such a request is refused here. Smaller requests
// that do not fit beside what is already allocated are beyond this check.
func allocError(op string, dt DType, shape []int) error {
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

func (t *Tensor) withLayout(l ir.Layout) *Tensor {
	return &Tensor{st: t.st, shape: l.Shape, strides: l.Strides, offset: l.Offset, dtype: t.dtype}
}

func (t *Tensor) normDim(op string, d int) int {
	n, err := ir.NormDim(op, t.shape, d)
	if err != nil {
		panic(err)
	}
	return n
}

// hostPointer is the address of the first element of a CPU tensor.
func hostPointer(t *Tensor) unsafe.Pointer {
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

// freeWhenUnreachable returns buf to its allocator once st is unreachable.
// Work queued on the stream may still use the memory: reuse is ordered on
// the same stream, so that is safe.
func freeWhenUnreachable(st *storage, buf *gpuBuffer) {
	runtime.AddCleanup(st, func(b *gpuBuffer) { b.g.alloc.Free(b.block) }, buf)
}
