package ir

import "fmt"

// DType is the element type of a tensor.
//
// Float16 and BFloat16 are stored as 16-bit values and computed in float32;
// Int32 is computed in int64 and wraps on store; Bool is stored as one byte and
// computed as int64 0 or 1.
type DType uint8

// The element types, ordered within each category from narrow to wide.
const (
	Invalid DType = iota
	Bool
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
)

// DefaultFloat is the type integer operands are promoted to by ops that need a
// floating result (true division, exp, mean …), as torch.get_default_dtype().
const DefaultFloat = Float32

// DTypes lists every valid element type.
var DTypes = []DType{Bool, Int32, Int64, Float16, BFloat16, Float32, Float64}

var dtypeNames = [...]string{"invalid", "bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the number of bytes one element occupies in storage.
func (d DType) Size() int {
	switch d {
	case Bool:
		return 1
	case Float16, BFloat16:
		return 2
	case Int32, Float32:
		return 4
	case Int64, Float64:
		return 8
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d >= Float16 && d <= Float64 }

// IsInt reports whether d is a (non-bool) integer type.
func (d DType) IsInt() bool { return d == Int32 || d == Int64 }

// Valid reports whether d names an element type.
func (d DType) Valid() bool { return d >= Bool && d <= Float64 }

// Compute is the kind of value d is computed in.
func (d DType) Compute() Kind {
	switch d {
	case Float64:
		return F64
	case Float16, BFloat16, Float32:
		return F32
	}
	return I64
}

// category orders bool < integer < floating, the axis of PyTorch's promotion.
func (d DType) category() int {
	switch {
	case d == Bool:
		return 0
	case d.IsInt():
		return 1
	}
	return 2
}

// PromoteTypes returns the type two tensor operands are computed in, following
// torch.promote_types: a wider category wins (bool < int < float); within a
// category the wider type wins; float16 with bfloat16 gives float32.
func PromoteTypes(a, b DType) DType {
	if a == b {
		return a
	}
	if ca, cb := a.category(), b.category(); ca != cb {
		if ca > cb {
			return a
		}
		return b
	}
	if (a == Float16 && b == BFloat16) || (a == BFloat16 && b == Float16) {
		return Float32
	}
	return max(a, b)
}

// Operand describes one input of an op for type promotion.
type Operand struct {
	DType DType
	// Rank0 marks a zero-dimensional tensor, which takes part in promotion
	// only when its category is higher than that of the dimensioned operands.
	Rank0 bool
	// Scalar marks a Go scalar (weakly typed): Int64 stands for an integral
	// scalar, Float64 for a floating one, Bool for a boolean.
	Scalar bool
}

// ResultType returns the promoted type of operands as torch.result_type does:
// dimensioned tensors decide first; zero-dimensional tensors and then scalars
// only raise the category (a float scalar turns an integer tensor into
// DefaultFloat, an integral scalar turns a bool tensor into Int64).
func ResultType(ops ...Operand) DType {
	var dim, zero, scal DType
	for _, o := range ops {
		switch {
		case o.Scalar:
			if scal == Invalid {
				scal = o.DType
			} else {
				scal = PromoteTypes(scal, o.DType)
			}
		case o.Rank0:
			if zero == Invalid {
				zero = o.DType
			} else {
				zero = PromoteTypes(zero, o.DType)
			}
		default:
			if dim == Invalid {
				dim = o.DType
			} else {
				dim = PromoteTypes(dim, o.DType)
			}
		}
	}
	out := dim
	if zero != Invalid && (out == Invalid || zero.category() > out.category()) {
		out = zero
	}
	if scal != Invalid && (out == Invalid || scal.category() > out.category()) {
		switch scal.category() {
		case 2:
			out = DefaultFloat
		case 1:
			out = Int64
		default:
			out = Bool
		}
	}
	return out
}

// Kind is the machine type a value is computed in: every DType maps to one.
type Kind uint8

// The compute kinds.
const (
	F32 Kind = iota
	F64
	I64
)

func (k Kind) String() string {
	switch k {
	case F32:
		return "f32"
	case F64:
		return "f64"
	}
	return "i64"
}
