package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Prim is a primitive scalar operation. Pointwise ops are expressions over
// prims; each prim's meaning is given once, in prims.go, both as Go block
// loops (for CPU kernels) and as C (for generated CUDA).
type Prim uint8

// The primitives.
const (
	PArg   Prim = iota // operand Index of the op
	PConst             // the literal Value
	PParam             // scalar parameter Index of the op (Attrs.Scalars)

	// unary
	PNeg
	PAbs
	PRecip
	PExp
	PLog
	PSqrt
	PRsqrt
	PSin
	PCos
	PTanh
	PErf
	PFloor
	PCeil
	PRound // half to even, as torch.round
	PSign  // -1, 0 or 1; 0 for NaN, as PyTorch
	PNot   // logical not of a 0/1 value

	// binary
	PAdd
	PSub
	PMul
	PDiv
	PPow
	PMax // NaN-propagating, as torch.maximum
	PMin // NaN-propagating, as torch.minimum
	PEq
	PNe
	PLt
	PLe
	PGt
	PGe
	PAnd
	POr

	// ternary
	PWhere // Args[0] ? Args[1] : Args[2]

	PCast // Args[0] converted to kind To, as a store and reload would (through Via when set)

	numPrims
)

// Expr is the scalar semantics of a pointwise op: a small expression tree
// over the op's operands and scalar parameters. Nodes may be shared (a DAG);
// evaluators compute a shared node once.
type Expr struct {
	Prim  Prim
	Args  []*Expr
	Index int     // PArg, PParam
	Value float64 // PConst
	To    Kind    // PCast
	// Via, on a PCast, is a 16-bit floating storage type (Float16 or
	// BFloat16) the value is rounded to on the way, as storing it in a
	// tensor of that type and loading it back would: fused kernels round
	// their float16 and bfloat16 intermediates so, giving eager's values.
	Via DType
}

// Arg is operand i of the op.
func Arg(i int) *Expr { return &Expr{Prim: PArg, Index: i} }

// Param is scalar parameter i of the op.
func Param(i int) *Expr { return &Expr{Prim: PParam, Index: i} }

// Const is a literal; it takes the kind of the values it meets.
func Const(v float64) *Expr { return &Expr{Prim: PConst, Value: v} }

func call(p Prim, args ...*Expr) *Expr { return &Expr{Prim: p, Args: args} }

// Expression builders, one per primitive.
func Neg(a *Expr) *Expr         { return call(PNeg, a) }
func Abs(a *Expr) *Expr         { return call(PAbs, a) }
func Recip(a *Expr) *Expr       { return call(PRecip, a) }
func Exp(a *Expr) *Expr         { return call(PExp, a) }
func Log(a *Expr) *Expr         { return call(PLog, a) }
func Sqrt(a *Expr) *Expr        { return call(PSqrt, a) }
func Rsqrt(a *Expr) *Expr       { return call(PRsqrt, a) }
func Sin(a *Expr) *Expr         { return call(PSin, a) }
func Cos(a *Expr) *Expr         { return call(PCos, a) }
func Tanh(a *Expr) *Expr        { return call(PTanh, a) }
func Erf(a *Expr) *Expr         { return call(PErf, a) }
func Floor(a *Expr) *Expr       { return call(PFloor, a) }
func Ceil(a *Expr) *Expr        { return call(PCeil, a) }
func Round(a *Expr) *Expr       { return call(PRound, a) }
func Sign(a *Expr) *Expr        { return call(PSign, a) }
func Not(a *Expr) *Expr         { return call(PNot, a) }
func Add(a, b *Expr) *Expr      { return call(PAdd, a, b) }
func Sub(a, b *Expr) *Expr      { return call(PSub, a, b) }
func Mul(a, b *Expr) *Expr      { return call(PMul, a, b) }
func Div(a, b *Expr) *Expr      { return call(PDiv, a, b) }
func Pow(a, b *Expr) *Expr      { return call(PPow, a, b) }
func Max(a, b *Expr) *Expr      { return call(PMax, a, b) }
func Min(a, b *Expr) *Expr      { return call(PMin, a, b) }
func Eq(a, b *Expr) *Expr       { return call(PEq, a, b) }
func Ne(a, b *Expr) *Expr       { return call(PNe, a, b) }
func Lt(a, b *Expr) *Expr       { return call(PLt, a, b) }
func Le(a, b *Expr) *Expr       { return call(PLe, a, b) }
func Gt(a, b *Expr) *Expr       { return call(PGt, a, b) }
func Ge(a, b *Expr) *Expr       { return call(PGe, a, b) }
func And(a, b *Expr) *Expr      { return call(PAnd, a, b) }
func Or(a, b *Expr) *Expr       { return call(POr, a, b) }
func Where(c, a, b *Expr) *Expr { return call(PWhere, c, a, b) }

// Substitute copies e with Arg(i) replaced by args[i] and Param(j) by the
// literal params[j], keeping shared subexpressions shared: an expression
// over other operands, or with an op's parameters filled in.
func Substitute(e *Expr, args []*Expr, params []float64) *Expr {
	return substitute(e, args, params, map[*Expr]*Expr{})
}

// substitute copies e with Arg(i) replaced by args[i] and Param(j) by the
// literal params[j], keeping shared subexpressions shared.
func substitute(e *Expr, args []*Expr, params []float64, memo map[*Expr]*Expr) *Expr {
	if c, ok := memo[e]; ok {
		return c
	}
	var out *Expr
	switch e.Prim {
	case PArg:
		out = args[e.Index]
	case PParam:
		out = Const(params[e.Index])
	case PConst:
		out = Const(e.Value)
	default:
		c := *e
		c.Args = make([]*Expr, len(e.Args))
		for i, a := range e.Args {
			c.Args[i] = substitute(a, args, params, memo)
		}
		out = &c
	}
	memo[e] = out
	return out
}

// Cast converts a to kind k (floating to integer truncates toward zero).
func Cast(a *Expr, k Kind) *Expr { return &Expr{Prim: PCast, Args: []*Expr{a}, To: k} }

// CastVia converts a to kind k through the 16-bit floating type via: the
// value is rounded to float32 and then to via (to nearest even), as a
// store to a tensor of type via does, and widened to k, as a load does.
func CastVia(a *Expr, via DType, k Kind) *Expr {
	return &Expr{Prim: PCast, Args: []*Expr{a}, To: k, Via: via}
}

// roundsVia reports whether a cast rounds through a 16-bit type.
func (e *Expr) roundsVia() bool { return e.Via == Float16 || e.Via == BFloat16 }
func (p Prim) String() string {
	if p >= numPrims {
		return fmt.Sprintf("Prim(%d)", uint8(p))
	}
	return prims[p].name
}
func (p Prim) arity() int         { return prims[p].arity }
func (p Prim) signature() primSig { return prims[p].sig }

// String prints the expression in prefix form, e.g. mul(arg0, sigmoid …).
func (e *Expr) String() string {
	switch e.Prim {
	case PArg:
		return "x" + strconv.Itoa(e.Index)
	case PParam:
		return "p" + strconv.Itoa(e.Index)
	case PConst:
		return strconv.FormatFloat(e.Value, 'g', -1, 64)
	}
	parts := make([]string, len(e.Args))
	for i, a := range e.Args {
		parts[i] = a.String()
	}
	name := e.Prim.String()
	if e.Prim == PCast { // the target matters: kernels are named by this string
		name += "_" + e.To.String()
		if e.roundsVia() {
			name += "_via_" + e.Via.String()
		}
	}
	return name + "(" + strings.Join(parts, ", ") + ")"
}

// typing assigns a compute kind to every node of an expression, given the
// kinds operands are loaded in and the kind the op computes in. Constants and
// parameters are untyped and take the kind of the values they meet.
type typing struct {
	args    []Kind
	compute Kind
	kinds   map[*Expr]Kind
}

func typeExpr(e *Expr, args []Kind, compute Kind) (map[*Expr]Kind, error) {
	t := &typing{args: args, compute: compute, kinds: map[*Expr]Kind{}}
	if err := t.assign(e, compute); err != nil {
		return nil, err
	}
	return t.kinds, nil
}

// natural is the kind a node has regardless of context, if it has one.
func (t *typing) natural(e *Expr) (Kind, bool) {
	switch e.Prim {
	case PArg:
		if e.Index >= len(t.args) {
			return 0, false
		}
		return t.args[e.Index], true
	case PConst, PParam:
		return 0, false
	case PCast:
		return e.To, true
	}
	switch e.Prim.signature() {
	case sigCmp, sigLogic:
		return I64, true
	case sigWhere:
		if k, ok := t.natural(e.Args[1]); ok {
			return k, true
		}
		return t.natural(e.Args[2])
	}
	for _, a := range e.Args {
		if k, ok := t.natural(a); ok {
			return k, true
		}
	}
	return 0, false
}

func (t *typing) operandKind(args []*Expr, want Kind) Kind {
	for _, a := range args {
		if k, ok := t.natural(a); ok {
			return k
		}
	}
	return want
}

func (t *typing) assign(e *Expr, want Kind) error {
	if _, done := t.kinds[e]; done {
		return nil // a shared node is typed once; its users check it below
	}
	if e.Prim >= numPrims {
		return fmt.Errorf("unknown primitive %d", e.Prim)
	}
	if len(e.Args) != e.Prim.arity() {
		return fmt.Errorf("%v takes %d operands, not %d", e.Prim, e.Prim.arity(), len(e.Args))
	}
	switch e.Prim {
	case PArg:
		if e.Index >= len(t.args) {
			return fmt.Errorf("operand %d used but the op has %d", e.Index, len(t.args))
		}
		t.kinds[e] = t.args[e.Index]
		return nil
	case PConst, PParam:
		t.kinds[e] = want
		return nil
	case PCast:
		if err := t.assign(e.Args[0], e.To); err != nil {
			return err
		}
		t.kinds[e] = e.To
		return nil
	}
	// operands is the kind every operand (after a where's condition) must have.
	var k, operands Kind
	args := e.Args
	switch e.Prim.signature() {
	case sigSame:
		operands = t.operandKind(args, want)
		k = operands
	case sigFloat:
		operands = t.operandKind(args, want)
		if operands == I64 {
			return fmt.Errorf("%v needs floating operands; promote integers first", e.Prim)
		}
		k = operands
	case sigCmp:
		operands = t.operandKind(args, t.compute)
		k = I64
	case sigLogic:
		operands, k = I64, I64
	case sigWhere:
		if err := t.assign(args[0], I64); err != nil {
			return err
		}
		if t.kinds[args[0]] != I64 {
			return fmt.Errorf("where needs a boolean condition, got %v", t.kinds[args[0]])
		}
		args = args[1:]
		operands = t.operandKind(args, want)
		k = operands
	}
	for _, a := range args {
		if err := t.assign(a, operands); err != nil {
			return err
		}
		if ak := t.kinds[a]; ak != operands {
			return fmt.Errorf("%v mixes %v and %v operands; load operands in one kind", e.Prim, ak, operands)
		}
	}
	t.kinds[e] = k
	return nil
}

// C prints e as a C expression for generated CUDA code. arg and param name
// the operands and parameters; args gives operand kinds and compute the op's
// compute kind, as for evaluation. Helper functions it calls (gc_max, …) are
// defined in CPrelude.
func (e *Expr) C(arg, param func(i int) string, args []Kind, compute Kind) (string, error) {
	kinds, err := typeExpr(e, args, compute)
	if err != nil {
		return "", err
	}
	var walk func(e *Expr) string
	walk = func(e *Expr) string {
		k := kinds[e]
		switch e.Prim {
		case PArg:
			return arg(e.Index)
		case PParam:
			return param(e.Index)
		case PConst:
			return cLiteral(e.Value, k)
		}
		ops := make([]any, len(e.Args))
		for i, a := range e.Args {
			ops[i] = walk(a)
		}
		if e.Prim == PCast {
			if e.roundsVia() { // a store to the 16-bit type and a load, as eager kernels do
				ld, st := "gc_ld_bf16", "gc_st_bf16"
				if e.Via == Float16 {
					ld, st = "gc_ld_half", "gc_st_half"
				}
				return fmt.Sprintf("((%s)%s(%s((float)(%s))))", cType(e.To), ld, st, ops[0])
			}
			return fmt.Sprintf("((%s)(%s))", cType(e.To), ops[0])
		}
		info := prims[e.Prim]
		tmpl := info.c
		if e.Prim.signature() == sigCmp {
			k = kinds[e.Args[0]]
		}
		if k == F32 && info.cf32 != "" {
			tmpl = info.cf32
		}
		return fmt.Sprintf(tmpl, ops...)
	}
	return walk(e), nil
}

func cLiteral(v float64, k Kind) string {
	if k != I64 && (math.IsInf(v, 0) || math.IsNaN(v)) {
		// C has no literals for these: build them from their bits.
		if k == F32 {
			return fmt.Sprintf("__uint_as_float(0x%08xu)", math.Float32bits(float32(v)))
		}
		return fmt.Sprintf("__longlong_as_double(0x%016xLL)", math.Float64bits(v))
	}
	switch k {
	case I64:
		return strconv.FormatInt(int64(v), 10) + "LL"
	case F32:
		s := strconv.FormatFloat(v, 'g', 9, 32)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s + "f"
	}
	s := strconv.FormatFloat(v, 'g', 17, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// ParamKinds returns the kind each scalar parameter of e is used in (so a
// code generator can declare it), indexed by parameter number, and the
// kind of the result.
func (e *Expr) ParamKinds(args []Kind, compute Kind) (params []Kind, out Kind, err error) {
	kinds, err := typeExpr(e, args, compute)
	if err != nil {
		return nil, 0, err
	}
	for n, k := range kinds {
		if n.Prim == PParam {
			for len(params) <= n.Index {
				params = append(params, compute)
			}
			params[n.Index] = k
		}
	}
	return params, kinds[e], nil
}

// cType is the C type values of kind k live in.
func cType(k Kind) string {
	switch k {
	case F32:
		return "float"
	case F64:
		return "double"
	}
	return "long long"
}
