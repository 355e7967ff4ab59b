package ir

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// OpKind classifies ops by how backends treat them.
type OpKind uint8

const (
	// Pointwise ops compute each output element from the elements of their
	// (broadcast) operands at the same index: Expr gives the semantics.
	Pointwise OpKind = iota
	// Reduction ops combine the elements along some dims: Reducer gives the
	// semantics.
	Reduction
	// View ops present the same storage under another shape and strides:
	// View gives the layout rule. No data moves.
	View
	// Extern ops have dedicated kernels (matmul, concatenation, gathers).
	Extern
	// Composite ops are defined by Decompose in terms of other ops.
	Composite
)

func (k OpKind) String() string {
	names := [...]string{"pointwise", "reduction", "view", "extern", "composite"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// TypeRule says how an op's compute and result types follow from its
// operands' types.
type TypeRule uint8

const (
	// Promote: result and compute type are the promoted operand type.
	Promote TypeRule = iota
	// PromoteNoBool: as Promote, but bool operands are an error.
	PromoteNoBool
	// PromoteFloat: as Promote, but integral results become DefaultFloat.
	PromoteFloat
	// FloatOnly: as Promote, but the promoted type must be floating.
	FloatOnly
	// Compare: computed in the promoted type, the result is Bool.
	Compare
	// SameAsFirst: result and compute type are those of the first operand
	// that is neither indices nor a mask.
	SameAsFirst
	// CastTo: the result type is Attrs.DType.
	CastTo
	// SumType: floating types are kept, integral and bool become Int64.
	SumType
	// IndexType: the result is Int64 (indices).
	IndexType
)

// Attrs are the non-tensor arguments of an op.
type Attrs struct {
	Dims    []int     // reduced dims, a permutation, a new shape, normalized shape …
	Dim     int       // a single dim (softmax, cat, transpose's first …)
	Dim2    int       // a second dim (transpose)
	Start   int       // slice start
	Stop    int       // slice stop (exclusive)
	Step    int       // slice step
	KeepDim bool      // reductions keep reduced dims with size 1
	Scalars []float64 // scalar parameters of a pointwise op; eps, correction …
	DType   DType     // the target of a cast
}

// Layout is how a tensor's elements sit in its storage.
type Layout struct {
	Shape   []int
	Strides []int
	Offset  int
}

// Same reports whether l and m address the same elements in the same
// order.
func (l Layout) Same(m Layout) bool {
	return l.Offset == m.Offset && SameShape(l.Shape, m.Shape) && slices.Equal(l.Strides, m.Strides)
}

// Scalar is a Go number passed where an op takes a tensor operand.
type Scalar struct {
	Value float64
	DType DType // Bool, Int64 or Float64: its category for promotion
}

// ScalarOf types a Go number the way Python types a literal: integral
// values that int64 can hold are int scalars, others float scalars. An
// integer tensor plus 2 stays integral; plus 0.5 it becomes DefaultFloat.
func ScalarOf(v float64) Scalar {
	if v == math.Trunc(v) && v >= -0x1p63 && v < 0x1p63 {
		return Scalar{Value: v, DType: Int64}
	}
	return Scalar{Value: v, DType: Float64}
}

// Value is a tensor as a Builder knows it, or a Scalar.
type Value any

// Builder applies ops to values: package tensor computes them eagerly, a
// tracer records them. Decompositions are written once against it.
type Builder interface {
	Apply(op *Op, attrs Attrs, args ...Value) Value
	Shape(v Value) []int
	DType(v Value) DType
}

// GradNeeder is implemented by Builders that know which operands need a
// gradient (eager backward: those that require one): a derivative may
// skip the others, returning nil for them, rather than compute what would
// be dropped. Graph builders need not: dead-code elimination drops it.
type GradNeeder interface {
	NeedsGrad(v Value) bool
}

// NeedsGrad reports whether b wants operand v's gradient: true unless b
// is a GradNeeder that says otherwise.
func NeedsGrad(b Builder, v Value) bool {
	if gn, ok := b.(GradNeeder); ok {
		return gn.NeedsGrad(v)
	}
	return true
}

// Op is everything the library knows about one op. It is the single place an
// op's meaning lives: eager CPU kernels, generated kernels and reference
// evaluators all derive from it.
type Op struct {
	Name  string // registry name: "add", "softmax" …
	Title string // the user-facing method, used in errors: "Add", "Softmax" …
	Kind  OpKind
	// Arity is the number of operands (tensors or scalars); -1 means any.
	Arity int
	// Masks lists operands that are boolean masks: they must be Bool and do
	// not take part in type promotion.
	Masks []int
	// Indices lists operands that hold indices: they must be Int32 or Int64
	// and do not take part in type promotion.
	Indices []int
	// Params is the number of scalar parameters (Attrs.Scalars) it takes.
	Params int
	Rule   TypeRule
	// Expr is the scalar semantics of a Pointwise op.
	Expr *Expr
	// Reducer is the semantics of a Reduction op.
	Reducer Reducer
	// View is the layout rule of a View op.
	View func(in Layout, a *Attrs) (Layout, error)
	// Shape is the result-shape rule of an Extern op.
	Shape func(in [][]int, a *Attrs) ([]int, error)
	// Decompose defines a Composite op in terms of other ops.
	Decompose func(b Builder, a Attrs, args ...Value) (Value, error)
	// Math defines an Extern op that has one kernel per device in terms
	// of other ops, for what needs its meaning as ops (gradients).
	Math func(b Builder, a Attrs, args ...Value) (Value, error)
	// VJP is the op's derivative (grad.go); nil for ops without one.
	VJP VJPFunc
	// Fresh marks an Extern op whose result is always a new buffer, never
	// one of its operands or a view of one: a write may follow it in place
	// (Compile's markInPlace) without following its readers.
	Fresh bool
	Doc   string
}

func (op *Op) String() string { return op.Name }

// Types returns the type an op computes in and the type of its result for
// operands of the given types (scalar parameters that take part in
// promotion, like Clamp's bounds, are passed as Scalar operands too).
func (op *Op) Types(operands []Operand, a *Attrs) (compute, out DType, err error) {
	vals := make([]Operand, 0, len(operands))
	for i, o := range operands {
		if contains(op.Indices, i) {
			if !o.DType.IsInt() {
				return 0, 0, Errorf(op.Title, nil, "cast the indices with To(Int64)",
					"operand %d holds indices and must be int32 or int64, not %v", i, o.DType)
			}
			continue
		}
		if contains(op.Masks, i) {
			if o.DType != Bool {
				return 0, 0, Errorf(op.Title, nil, "build the mask with a comparison, or cast it with To(Bool)",
					"operand %d must be a bool mask, not %v", i, o.DType)
			}
			continue
		}
		vals = append(vals, o)
	}
	t := ResultType(vals...)
	switch op.Rule {
	case Promote:
		return t, t, nil
	case PromoteNoBool:
		if t == Bool {
			return 0, 0, Errorf(op.Title, nil, "cast the operands to an integer or floating type first",
				"not defined for bool tensors")
		}
		return t, t, nil
	case PromoteFloat:
		if !t.IsFloat() {
			t = DefaultFloat
		}
		return t, t, nil
	case FloatOnly:
		if !t.IsFloat() {
			return 0, 0, Errorf(op.Title, nil, "cast the input to a floating type first, e.g. x.To(tensor.Float32)",
				"needs a floating-point input, got %v", t)
		}
		return t, t, nil
	case Compare:
		return t, Bool, nil
	case SameAsFirst: // the first operand that holds values, not indices or a mask
		for i, o := range operands {
			if !contains(op.Indices, i) && !contains(op.Masks, i) {
				return o.DType, o.DType, nil
			}
		}
		return operands[0].DType, operands[0].DType, nil
	case CastTo:
		if !a.DType.Valid() {
			return 0, 0, Errorf(op.Title, nil, "name one of the dtypes", "invalid target dtype %v", a.DType)
		}
		if a.DType == Bool {
			return operands[0].DType, Bool, nil
		}
		return a.DType, a.DType, nil
	case SumType:
		if !t.IsFloat() {
			return Int64, Int64, nil
		}
		return t, t, nil
	case IndexType:
		return t, Int64, nil
	}
	return 0, 0, fmt.Errorf("%s: unknown type rule %d", op.Name, op.Rule)
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

var (
	registryMu sync.RWMutex
	registry   = map[string]*Op{}
)

// Register adds op to the registry and returns it; registering a name twice
// panics (it is a programming error in the package that does it).
func Register(op *Op) *Op {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[op.Name]; dup {
		panic("ir: op " + op.Name + " registered twice")
	}
	if op.Kind == Pointwise && op.Expr == nil {
		panic("ir: pointwise op " + op.Name + " has no Expr")
	}
	registry[op.Name] = op
	return op
}

// Lookup returns the op registered under name.
func Lookup(name string) (*Op, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	op, ok := registry[name]
	return op, ok
}

// Ops returns every registered op, sorted by name.
func Ops() []*Op {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]*Op, 0, len(registry))
	for _, op := range registry {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func unary(name, title string, rule TypeRule, e *Expr, doc string) *Op {
	return Register(&Op{Name: name, Title: title, Kind: Pointwise, Arity: 1, Rule: rule, Expr: e, Doc: doc})
}

func binary(name, title string, rule TypeRule, e *Expr, doc string) *Op {
	return Register(&Op{Name: name, Title: title, Kind: Pointwise, Arity: 2, Rule: rule, Expr: e, Doc: doc})
}

var x, y = Arg(0), Arg(1)

// sigmoidOf is 1 / (1 + exp(-v)); exp overflowing to +Inf gives 0, as it should.
func sigmoidOf(v *Expr) *Expr { return Recip(Add(Const(1), Exp(Neg(v)))) }

// The pointwise ops.
var (
	OpAdd     = binary("add", "Add", Promote, Add(x, y), "x + y")
	OpSub     = binary("sub", "Sub", PromoteNoBool, Sub(x, y), "x - y")
	OpMul     = binary("mul", "Mul", Promote, Mul(x, y), "x * y")
	OpDiv     = binary("div", "Div", PromoteFloat, Div(x, y), "true division x / y")
	OpPow     = binary("pow", "Pow", Promote, Pow(x, y), "x ** y")
	OpMaximum = binary("maximum", "Maximum", Promote, Max(x, y), "elementwise maximum; NaN propagates")
	OpMinimum = binary("minimum", "Minimum", Promote, Min(x, y), "elementwise minimum; NaN propagates")

	OpNeg     = unary("neg", "Neg", PromoteNoBool, Neg(x), "-x")
	OpAbs     = unary("abs", "Abs", PromoteNoBool, Abs(x), "|x|")
	OpExp     = unary("exp", "Exp", PromoteFloat, Exp(x), "e**x")
	OpLog     = unary("log", "Log", PromoteFloat, Log(x), "natural logarithm")
	OpSqrt    = unary("sqrt", "Sqrt", PromoteFloat, Sqrt(x), "square root")
	OpRsqrt   = unary("rsqrt", "Rsqrt", PromoteFloat, Rsqrt(x), "1 / sqrt(x)")
	OpSin     = unary("sin", "Sin", PromoteFloat, Sin(x), "sine")
	OpCos     = unary("cos", "Cos", PromoteFloat, Cos(x), "cosine")
	OpTanh    = unary("tanh", "Tanh", PromoteFloat, Tanh(x), "hyperbolic tangent")
	OpErf     = unary("erf", "Erf", PromoteFloat, Erf(x), "error function")
	OpFloor   = unary("floor", "Floor", PromoteNoBool, Floor(x), "largest integer not above x (integers unchanged)")
	OpCeil    = unary("ceil", "Ceil", PromoteNoBool, Ceil(x), "smallest integer not below x (integers unchanged)")
	OpRound   = unary("round", "Round", PromoteNoBool, Round(x), "nearest integer, halves to even (integers unchanged)")
	OpSign    = unary("sign", "Sign", PromoteNoBool, Sign(x), "-1, 0 or 1 as x is negative, zero or positive; 0 for NaN, as PyTorch")
	OpSigmoid = unary("sigmoid", "Sigmoid", PromoteFloat, sigmoidOf(x), "1 / (1 + exp(-x))")
	OpReLU    = unary("relu", "ReLU", PromoteNoBool, Max(x, Const(0)), "max(x, 0); NaN propagates")
	OpGELU    = unary("gelu", "GELU", FloatOnly,
		Mul(Mul(Const(0.5), x), Add(Const(1), Erf(Mul(x, Const(1/math.Sqrt2))))),
		"exact GELU: x/2 * (1 + erf(x/sqrt(2)))")
	OpGELUTanh = unary("gelu_tanh", "GELU", FloatOnly,
		Mul(Mul(Const(0.5), x), Add(Const(1), Tanh(Mul(Const(math.Sqrt(2/math.Pi)),
			Add(x, Mul(Const(0.044715), Mul(x, Mul(x, x)))))))),
		"tanh-approximate GELU: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))")
	OpSiLU = unary("silu", "SiLU", FloatOnly, Mul(x, sigmoidOf(x)), "x * sigmoid(x)")

	OpEq = binary("eq", "Eq", Compare, Eq(x, y), "x == y")
	OpNe = binary("ne", "Ne", Compare, Ne(x, y), "x != y")
	OpLt = binary("lt", "Lt", Compare, Lt(x, y), "x < y")
	OpLe = binary("le", "Le", Compare, Le(x, y), "x <= y")
	OpGt = binary("gt", "Gt", Compare, Gt(x, y), "x > y")
	OpGe = binary("ge", "Ge", Compare, Ge(x, y), "x >= y")

	OpLogicalNot = unary("logical_not", "LogicalNot", Compare, Eq(x, Const(0)), "x == 0")
	OpLogicalAnd = binary("logical_and", "LogicalAnd", Compare, And(Ne(x, Const(0)), Ne(y, Const(0))), "x != 0 && y != 0")
	OpLogicalOr  = binary("logical_or", "LogicalOr", Compare, Or(Ne(x, Const(0)), Ne(y, Const(0))), "x != 0 || y != 0")

	OpWhere = Register(&Op{Name: "where", Title: "Where", Kind: Pointwise, Arity: 3, Masks: []int{0},
		Rule: Promote, Expr: Where(Arg(0), Arg(1), Arg(2)), Doc: "cond ? x : y"})
	OpMaskedFill = Register(&Op{Name: "masked_fill", Title: "MaskedFill", Kind: Pointwise, Arity: 2, Masks: []int{1},
		Params: 1, Rule: SameAsFirst, Expr: Where(Arg(1), Param(0), Arg(0)), Doc: "mask ? value : x"})
	OpClamp = Register(&Op{Name: "clamp", Title: "Clamp", Kind: Pointwise, Arity: 1, Params: 2, Rule: Promote,
		Expr: Min(Max(x, Param(0)), Param(1)), Doc: "min(max(x, lo), hi); NaN propagates"})
	OpClampMin = Register(&Op{Name: "clamp_min", Title: "Clamp", Kind: Pointwise, Arity: 1, Params: 1, Rule: Promote,
		Expr: Max(x, Param(0)), Doc: "max(x, lo)"})
	OpClampMax = Register(&Op{Name: "clamp_max", Title: "Clamp", Kind: Pointwise, Arity: 1, Params: 1, Rule: Promote,
		Expr: Min(x, Param(0)), Doc: "min(x, hi)"})
	// OpCast converts between dtypes: the conversion happens as operands are
	// loaded and results stored (floating to integer truncates toward zero,
	// anything to bool tests for non-zero).
	OpCast = Register(&Op{Name: "cast", Title: "To", Kind: Pointwise, Arity: 1, Rule: CastTo, Expr: x,
		Doc: "conversion to Attrs.DType"})
	// OpAfter is an ordering edge: Compile writes a storage in place after
	// a reader of its old contents that the written value does not depend
	// on by making the value After(value, token), where the token is a
	// single element of the reader's result (never read). Compile adds it
	// to graphs after tracing, so it needs no derivative.
	OpAfter = Register(&Op{Name: "after", Title: "After", Kind: Pointwise, Arity: 2, Rule: SameAsFirst, Expr: x,
		Doc: "x, computed once y is (y is not read)"})
)

func reduction(name, title string, r Reducer, rule TypeRule, doc string) *Op {
	return Register(&Op{Name: name, Title: title, Kind: Reduction, Arity: 1, Rule: rule, Reducer: r, Doc: doc})
}

// The reductions, over Attrs.Dims (all dims when empty), keeping reduced
// dims when Attrs.KeepDim.
var (
	OpSum    = reduction("sum", "Sum", RSum, SumType, "sum; integers sum in int64")
	OpMean   = reduction("mean", "Mean", RMean, FloatOnly, "arithmetic mean")
	OpAMax   = reduction("amax", "Max", RMax, Promote, "maximum; NaN propagates")
	OpAMin   = reduction("amin", "Min", RMin, Promote, "minimum; NaN propagates")
	OpArgMax = reduction("argmax", "ArgMax", RArgMax, IndexType, "index of the first maximum (of the first NaN, if any)")
	OpArgMin = reduction("argmin", "ArgMin", RArgMin, IndexType, "index of the first minimum (of the first NaN, if any)")
)
