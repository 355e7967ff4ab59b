package tensor

import (
	"gocompile/array"
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
//
// A Tensor is the user's handle on an array.Array, the value kernels and
// compiled programs compute on; while a compiled function is traced it
// stands for a graph node instead (a proxy, with a placeholder array).
type Tensor struct {
	v       *array.Array
	px      *proxy     // set while tracing: the tensor stands for a graph node
	dynDims uint64     // dims MarkDynamic asked to compile as dynamic
	ag      *gradState // autograd: whether it requires gradients, its gradient, the op that made it
}

// wrap makes a tensor of an array.
func wrap(a *array.Array) *Tensor { return &Tensor{v: a} }

// arrays gives the arrays of args' tensors, leaving scalars as they are.
func arrays(args []ir.Value) []ir.Value {
	out := make([]ir.Value, len(args))
	for i, a := range args {
		if t, ok := a.(*Tensor); ok {
			out[i] = t.v // apply checked it is a tensor
		} else {
			out[i] = a
		}
	}
	return out
}

// Shape returns a copy of the tensor's sizes.
func (t *Tensor) Shape() []int {
	t.must("Shape")
	if t.px != nil && t.px.tr.onShapeRead != nil {
		t.px.tr.onShapeRead(t.v.Shape()) // fn may compute with these numbers
	}
	return append([]int(nil), t.v.Shape()...)
}

// Strides returns a copy of the tensor's strides, in elements.
func (t *Tensor) Strides() []int {
	t.must("Strides")
	return append([]int(nil), t.v.Strides()...)
}

// Offset is the index of the tensor's first element in its storage.
func (t *Tensor) Offset() int {
	t.must("Offset")
	return t.v.Offset()
}

// DType returns the element type.
func (t *Tensor) DType() DType {
	t.must("DType")
	return t.v.DType()
}

// Device returns where the tensor's storage lives.
func (t *Tensor) Device() Device {
	t.must("Device")
	return t.v.Device()
}

// Dim is the number of dimensions (the rank).
func (t *Tensor) Dim() int {
	t.must("Dim")
	return len(t.v.Shape())
}

// Numel is the number of elements.
func (t *Tensor) Numel() int {
	t.must("Numel")
	return t.v.Numel()
}

// Size returns the size of dim d (negative d counts from the end).
func (t *Tensor) Size(d int) int {
	t.must("Size")
	d = t.normDim("Size", d)
	shape := t.v.Shape()
	if len(shape) == 0 {
		return 1
	}
	if t.px != nil && t.px.tr.onShapeRead != nil {
		t.px.tr.onShapeRead(shape[d : d+1])
	}
	return shape[d]
}

// IsContiguous reports whether the elements are laid out in row-major order
// without gaps.
func (t *Tensor) IsContiguous() bool {
	t.must("IsContiguous")
	return t.v.IsContiguous()
}

// SharesStorage reports whether t and u are views of the same storage.
func (t *Tensor) SharesStorage(u *Tensor) bool {
	mustOperands("SharesStorage", t, u)
	return t.v.SharesStorage(u.v)
}

// shape, strides and dtype read the array's metadata without copying.
func (t *Tensor) shape() []int   { return t.v.Shape() }
func (t *Tensor) strides() []int { return t.v.Strides() }
func (t *Tensor) dtype() DType   { return t.v.DType() }

func (t *Tensor) normDim(op string, d int) int {
	n, err := ir.NormDim(op, t.v.Shape(), d)
	if err != nil {
		panic(err)
	}
	return n
}
