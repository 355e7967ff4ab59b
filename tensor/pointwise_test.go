package tensor

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"gocompile/array"
)

// Tests of every pointwise op against an independent float64 reference.
//
// Expected values are computed here with plain Go loops and package math in
// float64 (or exactly in int64), from the values actually stored in the
// operands, which are read straight from storage by walking the strides
// (vals, ivals) rather than through any op. Inputs are written straight into
// storage too (build), with this file's own float16/bfloat16 rounding.

// ---------------------------------------------------------------------------
// Tolerances
// ---------------------------------------------------------------------------

type tolerance struct{ rtol, atol float64 }

// tolerances is the accuracy demanded of a floating result, by result dtype:
// |got - want| <= atol + rtol*|want|, where want is the float64 reference
// rounded to the result dtype (so overflow to ±Inf and subnormals are judged
// in the result's own format). For float32 and float64 a case's k scales both
// (expressions such as GELU round several times); float16 and bfloat16 are
// computed in float32 and rounded once, so their bound is about one ulp of
// the 16-bit format whatever the expression. Integer and bool results must be
// exact.
var tolerances = map[DType]tolerance{
	Float64:  {rtol: 1e-12, atol: 1e-14},
	Float32:  {rtol: 1e-6, atol: 1e-7},
	Float16:  {rtol: 1e-3, atol: 1e-5},
	BFloat16: {rtol: 8e-3, atol: 1e-5},
	Int32:    {},
	Int64:    {},
	Bool:     {},
}

func tolFor(dt DType, k float64) tolerance {
	tl := tolerances[dt]
	if k > 1 && (dt == Float32 || dt == Float64) {
		tl.rtol *= k
		tl.atol *= k
	}
	return tl
}

var (
	allTypes   = []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool}
	numTypes   = []DType{Float32, Float64, Float16, BFloat16, Int32, Int64}
	floatTypes = []DType{Float32, Float64, Float16, BFloat16}
	intTypes   = []DType{Int32, Int64}
)

func isIntType(dt DType) bool { return dt == Int32 || dt == Int64 }

// ---------------------------------------------------------------------------
// Reading and writing storage directly
// ---------------------------------------------------------------------------

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// offsets lists the storage offset of every element of x in row-major order.
func offsets(x *Tensor) []int {
	n := numel(x.shape())
	offs := make([]int, n)
	idx := make([]int, len(x.shape()))
	for i := range n {
		off := x.v.Offset()
		for d, v := range idx {
			off += v * x.strides()[d]
		}
		offs[i] = off
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < x.shape()[d] {
				break
			}
			idx[d] = 0
		}
	}
	return offs
}

// halfToFloat decodes IEEE binary16 bits.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * m * 0x1p-24
	case 31:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + m/1024) * math.Ldexp(1, e-15)
}

func bf16ToFloat(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

// vals returns the elements of x as float64, read from storage.
func vals(x *Tensor) []float64 {
	x = x.cpu() // the same elements, in the same order, readable from Go
	offs := offsets(x)
	out := make([]float64, len(offs))
	switch s := x.v.HostData().(type) {
	case []float32:
		for i, o := range offs {
			out[i] = float64(s[o])
		}
	case []float64:
		for i, o := range offs {
			out[i] = s[o]
		}
	case []int32:
		for i, o := range offs {
			out[i] = float64(s[o])
		}
	case []int64:
		for i, o := range offs {
			out[i] = float64(s[o])
		}
	case []bool:
		for i, o := range offs {
			out[i] = b2f(s[o])
		}
	case []uint16:
		for i, o := range offs {
			if x.dtype() == BFloat16 {
				out[i] = bf16ToFloat(s[o])
			} else {
				out[i] = halfToFloat(s[o])
			}
		}
	default:
		panic("unknown storage")
	}
	return out
}

// ivals returns the elements of an integer or bool tensor exactly.
func ivals(x *Tensor) []int64 {
	x = x.cpu()
	offs := offsets(x)
	out := make([]int64, len(offs))
	for i, o := range offs {
		switch s := x.v.HostData().(type) {
		case []int32:
			out[i] = int64(s[o])
		case []int64:
			out[i] = s[o]
		case []bool:
			if s[o] {
				out[i] = 1
			}
		default:
			panic("ivals of a floating tensor")
		}
	}
	return out
}

const bf16Max = 255 * 0x1p120 // (2 - 2^-7) * 2^127

// roundToFormat rounds v to nearest even in a binary format with p
// significand bits, minimum normal exponent emin and largest finite value
// maxFinite (gradual underflow, overflow to ±Inf).
func roundToFormat(v float64, p, emin int, maxFinite float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	_, exp := math.Frexp(v)
	e := max(exp-1, emin)
	q := math.Ldexp(1, e-(p-1))
	r := math.RoundToEven(v/q) * q
	if math.Abs(r) > maxFinite {
		return math.Copysign(math.Inf(1), v)
	}
	return r
}

// quantize is the value v takes when stored as dt: floats round to nearest
// even, integers truncate toward zero and wrap, bool tests for non-zero.
func quantize(v float64, dt DType) float64 {
	switch dt {
	case Float32:
		return float64(float32(v))
	case Float16:
		return roundToFormat(v, 11, -14, 65504)
	case BFloat16:
		return roundToFormat(v, 8, -126, bf16Max)
	case Int32:
		return float64(int32(int64(v)))
	case Int64:
		return math.Trunc(v) + 0 // +0 turns -0 into 0
	case Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// halfBits encodes a value exactly representable in binary16.
func halfBits(r float64) uint16 {
	var sign uint16
	if math.Signbit(r) {
		sign, r = 0x8000, -r
	}
	switch {
	case math.IsNaN(r):
		return 0x7e00
	case math.IsInf(r, 1):
		return sign | 0x7c00
	case r < 0x1p-14:
		return sign | uint16(r*0x1p24)
	}
	frac, exp := math.Frexp(r)
	return sign | uint16(exp-1+15)<<10 | uint16((2*frac-1)*1024)
}

// build writes v (rounded to dt) into a new contiguous tensor of dt.
func build(v []float64, dt DType, shape []int) *Tensor {
	x := newTensor(dt, shape)
	if len(v) != x.Numel() {
		panic(fmt.Sprintf("build: %d values for shape %v", len(v), shape))
	}
	switch d := x.v.HostData().(type) {
	case []float32:
		for i := range d {
			d[i] = float32(v[i])
		}
	case []float64:
		copy(d, v)
	case []int32:
		for i := range d {
			d[i] = int32(int64(v[i]))
		}
	case []int64:
		for i := range d {
			d[i] = int64(v[i])
		}
	case []bool:
		for i := range d {
			d[i] = v[i] != 0
		}
	case []uint16:
		for i := range d {
			r := quantize(v[i], dt)
			switch {
			case dt == Float16:
				d[i] = halfBits(r)
			case math.IsNaN(r):
				d[i] = 0x7fc0
			default:
				d[i] = uint16(math.Float32bits(float32(r)) >> 16)
			}
		}
	}
	return onDefault(x) // the tables run on whatever device GOCOMPILE_DEVICE names
}

// buildInts writes exact int64 values into a new Int32 (wrapping), Int64
// or Bool tensor.
func buildInts(v []int64, dt DType, shape []int) *Tensor {
	x := newTensor(dt, shape)
	switch d := x.v.HostData().(type) {
	case []int32:
		for i := range d {
			d[i] = int32(v[i])
		}
	case []int64:
		copy(d, v)
	case []bool:
		for i := range d {
			d[i] = v[i] != 0
		}
	default:
		panic("buildInts of a floating type")
	}
	return onDefault(x)
}

// ---------------------------------------------------------------------------
// Comparing
// ---------------------------------------------------------------------------

func shapeEq(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkClose checks that got has dtype dt and the given shape and that its
// elements equal want within the tolerance of dt (scaled by k): NaN must
// meet NaN and an infinity the same infinity; integer and bool results must
// be exact. It reports the first mismatching index and the mismatch count.
func checkClose(t *testing.T, what string, got *Tensor, dt DType, shape []int, want []float64, k float64) bool {
	t.Helper()
	if got.DType() != dt {
		t.Errorf("%s: dtype %v, want %v", what, got.DType(), dt)
		return false
	}
	if !shapeEq(got.Shape(), shape) {
		t.Errorf("%s: shape %v, want %v", what, got.Shape(), shape)
		return false
	}
	g := vals(got)
	tl := tolFor(dt, k)
	bad, first := 0, -1
	var fg, fw float64
	for i, w := range want {
		w = quantize(w, dt)
		ok := false
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g[i])
		case math.IsInf(w, 0) || !dt.IsFloat():
			ok = g[i] == w
		default:
			ok = math.Abs(g[i]-w) <= tl.atol+tl.rtol*math.Abs(w)
		}
		if !ok {
			if bad == 0 {
				first, fg, fw = i, g[i], w
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s (%v %v): %d of %d elements differ; first at flat index %d: got %v, want %v (rtol %g, atol %g)",
			what, dt, shape, bad, len(want), first, fg, fw, tl.rtol, tl.atol)
		return false
	}
	return true
}

// checkInts checks an integer or bool result exactly.
func checkInts(t *testing.T, what string, got *Tensor, dt DType, shape []int, want []int64) bool {
	t.Helper()
	if got.DType() != dt {
		t.Errorf("%s: dtype %v, want %v", what, got.DType(), dt)
		return false
	}
	if !shapeEq(got.Shape(), shape) {
		t.Errorf("%s: shape %v, want %v", what, got.Shape(), shape)
		return false
	}
	g := ivals(got)
	for i := range want {
		if g[i] != want[i] {
			bad := 0
			for j := range want {
				if g[j] != want[j] {
					bad++
				}
			}
			t.Errorf("%s (%v %v): %d of %d elements differ; first at flat index %d: got %d, want %d",
				what, dt, shape, bad, len(want), i, g[i], want[i])
			return false
		}
	}
	return true
}

// checkSame checks that a and b have one dtype and shape and identical
// elements, bit for bit (any NaN matches any NaN).
func checkSame(t *testing.T, what string, a, b *Tensor) {
	t.Helper()
	if a.DType() != b.DType() || !shapeEq(a.Shape(), b.Shape()) {
		t.Errorf("%s: %v %v vs %v %v", what, a.DType(), a.Shape(), b.DType(), b.Shape())
		return
	}
	if isIntType(a.DType()) || a.DType() == Bool {
		checkInts(t, what, a, b.DType(), b.Shape(), ivals(b))
		return
	}
	av, bv := vals(a), vals(b)
	for i := range av {
		if math.Float64bits(av[i]) != math.Float64bits(bv[i]) && !(math.IsNaN(av[i]) && math.IsNaN(bv[i])) {
			t.Errorf("%s: element %d is %v, %v on the contiguous copy", what, i, av[i], bv[i])
			return
		}
	}
}

// expectError checks that f panics with a *tensor.Error.
func expectError(t *testing.T, what string, f func()) {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s: panicked with %T %v, not a *tensor.Error", what, r, r)
			}
		}()
		err = Try(f)
	}()
	var e *Error
	if err == nil {
		t.Errorf("%s: no error", what)
	} else if !errors.As(err, &e) {
		t.Errorf("%s: error %T %v is not a *tensor.Error", what, err, err)
	}
}

// ---------------------------------------------------------------------------
// Broadcasting reference
// ---------------------------------------------------------------------------

func bshape(shapes ...[]int) []int {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for i, d := range s {
			j := r - len(s) + i
			if d != 1 {
				if out[j] != 1 && out[j] != d {
					panic(fmt.Sprintf("test shapes %v do not broadcast", shapes))
				}
				out[j] = d
			}
		}
	}
	return out
}

// bindex maps each flat index of out to the flat index of the operand of
// shape in that broadcasts to it.
func bindex(out, in []int) []int {
	n := numel(out)
	res := make([]int, n)
	idx := make([]int, len(out))
	off := len(out) - len(in)
	for f := range n {
		rem := f
		for d := len(out) - 1; d >= 0; d-- {
			idx[d] = rem % out[d]
			rem /= out[d]
		}
		k := 0
		for i, s := range in {
			v := idx[off+i]
			if s == 1 {
				v = 0
			}
			k = k*s + v
		}
		res[f] = k
	}
	return res
}

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------

type domain int

const (
	domNormal   domain = iota // floats 2·N(0,1); ints [-20, 20]
	domPositive               // floats [0.05, 4.05); ints [1, 59]
	domSmall                  // floats k/2 for k in [-6, 6]; ints [-3, 3]: ties and zeros occur
	domExponent               // floats [-2.5, 2.5); ints [-3, 7]
	domWide                   // floats 30·N(0,1); ints [-1000, 999]
)

// genVals returns n deterministic random values for a tensor of dt.
func genVals(seed uint64, n int, dt DType, d domain) []float64 {
	ints := func(lo, hi int64) []float64 {
		iv := ivals(NewGenerator(seed).RandInt(lo, hi, n))
		out := make([]float64, n)
		for i, v := range iv {
			out[i] = float64(v)
		}
		return out
	}
	scaled := func(v []float64, a, b float64) []float64 {
		for i := range v {
			v[i] = v[i]*a + b
		}
		return v
	}
	if dt == Bool {
		return ints(0, 2)
	}
	isInt := isIntType(dt)
	switch d {
	case domPositive:
		if isInt {
			return ints(1, 60)
		}
		return scaled(vals(Rand(seed, Float64, n)), 4, 0.05)
	case domSmall:
		if isInt {
			return ints(-3, 4)
		}
		return scaled(ints(-6, 7), 0.5, 0)
	case domExponent:
		if isInt {
			return ints(-3, 8)
		}
		return scaled(vals(Rand(seed, Float64, n)), 5, -2.5)
	case domWide:
		if isInt {
			return ints(-1000, 1000)
		}
		return scaled(vals(Randn(seed, Float64, n)), 30, 0)
	}
	if isInt {
		return ints(-20, 21)
	}
	return scaled(vals(Randn(seed, Float64, n)), 2, 0)
}

// layout makes an operand: a contiguous base tensor, then an optional view.
type layout struct {
	name    string
	base    []int
	view    func(*Tensor) *Tensor
	strided bool // the view is not contiguous
}

func (l layout) make(seed uint64, dt DType, d domain) *Tensor {
	x := build(genVals(seed, numel(l.base), dt, d), dt, l.base)
	if l.view != nil {
		x = l.view(x)
	}
	return x
}

func lay(base ...int) layout {
	if base == nil {
		base = []int{}
	}
	return layout{name: fmt.Sprint(base), base: base}
}

var (
	layTransposed   = layout{"T[1023,3]", []int{1023, 3}, (*Tensor).T, true}
	layTransposed33 = layout{"T[129,33]", []int{129, 33}, (*Tensor).T, true}
	layStep1D       = layout{"[8195][1::2]", []int{8195}, func(x *Tensor) *Tensor { return x.Slice(0, 1, 8195, 2) }, true}
	layStepRows     = layout{"[66,129][1::2]", []int{66, 129}, func(x *Tensor) *Tensor { return x.Slice(0, 1, 66, 2) }, true}
	layStepCols     = layout{"[33,258][:,::2]", []int{33, 258}, func(x *Tensor) *Tensor { return x.Slice(1, 0, 258, 2) }, true}
	layExpandRow    = layout{"[1,129]->[33,129]", []int{1, 129}, func(x *Tensor) *Tensor { return x.Expand(33, 129) }, true}
	layExpandCol    = layout{"[33,1]->[33,129]", []int{33, 1}, func(x *Tensor) *Tensor { return x.Expand(33, 129) }, true}
	layExpandLead   = layout{"[1023]->[3,1023]", []int{1023}, func(x *Tensor) *Tensor { return x.Expand(3, 1023) }, true}
	layTStep        = layout{"T[1023,6][::2]", []int{1023, 6}, func(x *Tensor) *Tensor { return x.T().Slice(0, 0, 6, 2) }, true}
)

// unaryLayouts are the operand layouts every unary case runs on.
var unaryLayouts = []layout{
	lay(1), lay(3), lay(1023), lay(4097), lay(3, 1023), lay(33, 129), lay(),
	layTransposed, layTransposed33, layStep1D, layStepRows, layStepCols,
	layExpandRow, layExpandCol, layExpandLead, layTStep,
}

// bigLayouts exceed the size at which kernels split work over goroutines,
// so that blocks start in the middle of rows; they run for a few dtypes.
// With -short (the race detector's run, where they take most of the time)
// they are about the smallest such: 129 rows are two ranges of work and
// part of a third.
func bigLayouts() []layout {
	rows := 300
	if testing.Short() {
		rows = 129
	}
	return []layout{
		lay(rows, 513),
		{fmt.Sprintf("T[513,%d]", rows), []int{513, rows}, (*Tensor).T, true},
	}
}

func bigDType(dt DType) bool { return dt == Float32 || dt == Int64 }

func unaryLayoutsFor(dt DType) []layout {
	if bigDType(dt) {
		return append(append([]layout(nil), unaryLayouts...), bigLayouts()...)
	}
	return unaryLayouts
}

type pairLayout struct{ a, b layout }

var binaryLayouts = []pairLayout{
	// same shapes, contiguous
	{lay(1), lay(1)}, {lay(3), lay(3)}, {lay(1023), lay(1023)}, {lay(4097), lay(4097)},
	{lay(3, 1023), lay(3, 1023)}, {lay(33, 129), lay(33, 129)}, {lay(), lay()},
	// broadcasting
	{lay(4097), lay(1)}, {lay(1), lay(4097)}, {lay(3, 1), lay(1, 5)}, {lay(2, 3, 4), lay(3, 1)},
	{lay(5), lay()}, {lay(), lay(5)}, {lay(33, 129), lay(129)}, {lay(3, 1023), lay(3, 1)},
	{lay(4097), lay()},
	// non-contiguous operands
	{layTransposed, lay(3, 1023)}, {lay(33, 129), layTransposed33}, {layStep1D, lay(4097)},
	{layExpandRow, layStepRows}, {layStepCols, lay(33, 1)}, {layTransposed, lay(1023)},
	{layExpandCol, layTransposed33}, {layTStep, layExpandLead},
}

func binaryLayoutsFor(dt DType) []pairLayout {
	if bigDType(dt) {
		return append(append([]pairLayout(nil), binaryLayouts...), pairLayout{bigLayouts()[1], lay(513)})
	}
	return binaryLayouts
}

// ---------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------

func nanMax(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Max(a, b)
}

func nanMin(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Min(a, b)
}

// refIntPow is integer exponentiation by repeated multiplication, wrapping
// as int64 does; a negative exponent gives 0 except for bases 1 and -1
// (PyTorch's integer pow).
func refIntPow(a, b int64) int64 {
	if b < 0 {
		switch a {
		case 1:
			return 1
		case -1:
			if b%2 != 0 {
				return -1
			}
			return 1
		}
		return 0
	}
	r := int64(1)
	for range b {
		r *= a
	}
	return r
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func refSigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func refGELU(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

func refGELUTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// ---------------------------------------------------------------------------
// The table of pointwise ops
// ---------------------------------------------------------------------------

// pwCase is one op: its reference, the dtypes it supports and those it
// must reject.
type pwCase struct {
	name  string
	arity int
	apply func(x ...*Tensor) *Tensor
	// ref is the float64 reference; for Bool results it returns non-zero for
	// true.
	ref func(v ...float64) float64
	// iref is the exact reference for integer operands of ops that keep
	// integer types; nil where integers promote to Float32.
	iref   func(v ...int64) int64
	out    func(in DType) DType // result dtype for operands of dtype in
	dtypes []DType              // supported operand dtypes
	bad    []DType              // operand dtypes that must panic with *Error
	dom    domain               // operand values for floating dtypes
	idom   domain               // operand values for integer dtypes
	// dom2/idom2, when set, are the domains of the second operand.
	dom2, idom2 *domain
	k           float64 // tolerance multiplier (float32/float64)
}

func sameType(dt DType) DType { return dt }

func floatType(dt DType) DType {
	if dt.IsFloat() {
		return dt
	}
	return Float32
}

func boolType(DType) DType { return Bool }

func dp(d domain) *domain { return &d }

func un(f func(*Tensor) *Tensor) func(...*Tensor) *Tensor {
	return func(x ...*Tensor) *Tensor { return f(x[0]) }
}

func bin(f func(a, b *Tensor) *Tensor) func(...*Tensor) *Tensor {
	return func(x ...*Tensor) *Tensor { return f(x[0], x[1]) }
}

func uref(f func(float64) float64) func(...float64) float64 {
	return func(v ...float64) float64 { return f(v[0]) }
}

func cmpRef(f func(a, b float64) bool) func(...float64) float64 {
	return func(v ...float64) float64 { return b2f(f(v[0], v[1])) }
}

var pointwiseCases = []pwCase{
	{name: "Add", arity: 2, apply: bin((*Tensor).Add), out: sameType, dtypes: allTypes,
		ref: func(v ...float64) float64 { return v[0] + v[1] }, iref: func(v ...int64) int64 { return v[0] + v[1] }},
	{name: "Sub", arity: 2, apply: bin((*Tensor).Sub), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: func(v ...float64) float64 { return v[0] - v[1] }, iref: func(v ...int64) int64 { return v[0] - v[1] }},
	{name: "Mul", arity: 2, apply: bin((*Tensor).Mul), out: sameType, dtypes: allTypes,
		ref: func(v ...float64) float64 { return v[0] * v[1] }, iref: func(v ...int64) int64 { return v[0] * v[1] }},
	{name: "Div", arity: 2, apply: bin((*Tensor).Div), out: floatType, dtypes: allTypes,
		ref: func(v ...float64) float64 { return v[0] / v[1] }},
	{name: "Pow", arity: 2, apply: bin((*Tensor).Pow), out: sameType, dtypes: numTypes, k: 4,
		dom: domPositive, dom2: dp(domExponent), idom: domSmall, idom2: dp(domExponent),
		ref: func(v ...float64) float64 { return math.Pow(v[0], v[1]) }, iref: func(v ...int64) int64 { return refIntPow(v[0], v[1]) }},
	{name: "Maximum", arity: 2, apply: bin((*Tensor).Maximum), out: sameType, dtypes: allTypes,
		ref: func(v ...float64) float64 { return nanMax(v[0], v[1]) }, iref: func(v ...int64) int64 { return max(v[0], v[1]) }},
	{name: "Minimum", arity: 2, apply: bin((*Tensor).Minimum), out: sameType, dtypes: allTypes,
		ref: func(v ...float64) float64 { return nanMin(v[0], v[1]) }, iref: func(v ...int64) int64 { return min(v[0], v[1]) }},

	{name: "Neg", arity: 1, apply: un((*Tensor).Neg), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: uref(func(x float64) float64 { return -x }), iref: func(v ...int64) int64 { return -v[0] }},
	{name: "Abs", arity: 1, apply: un((*Tensor).Abs), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: uref(math.Abs), iref: func(v ...int64) int64 { return max(v[0], -v[0]) }},
	{name: "Floor", arity: 1, apply: un((*Tensor).Floor), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: uref(math.Floor), iref: func(v ...int64) int64 { return v[0] }},
	{name: "Ceil", arity: 1, apply: un((*Tensor).Ceil), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: uref(math.Ceil), iref: func(v ...int64) int64 { return v[0] }},
	{name: "Round", arity: 1, apply: un((*Tensor).Round), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: uref(math.RoundToEven), iref: func(v ...int64) int64 { return v[0] }},
	{name: "Sign", arity: 1, apply: un((*Tensor).Sign), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: func(v ...float64) float64 {
			switch {
			case v[0] > 0:
				return 1
			case v[0] < 0:
				return -1
			}
			return 0 // zero and NaN, as torch.sign
		},
		iref: func(v ...int64) int64 { return int64(cmp.Compare(v[0], 0)) }},
	{name: "Exp", arity: 1, apply: un((*Tensor).Exp), out: floatType, dtypes: allTypes, ref: uref(math.Exp), k: 2},
	{name: "Log", arity: 1, apply: un((*Tensor).Log), out: floatType, dtypes: allTypes, ref: uref(math.Log),
		dom: domPositive, idom: domPositive},
	{name: "Sqrt", arity: 1, apply: un((*Tensor).Sqrt), out: floatType, dtypes: allTypes, ref: uref(math.Sqrt),
		dom: domPositive, idom: domPositive},
	{name: "Rsqrt", arity: 1, apply: un((*Tensor).Rsqrt), out: floatType, dtypes: allTypes, k: 2,
		ref: uref(func(x float64) float64 { return 1 / math.Sqrt(x) }), dom: domPositive, idom: domPositive},
	{name: "Sin", arity: 1, apply: un((*Tensor).Sin), out: floatType, dtypes: allTypes, ref: uref(math.Sin)},
	{name: "Cos", arity: 1, apply: un((*Tensor).Cos), out: floatType, dtypes: allTypes, ref: uref(math.Cos)},
	{name: "Tanh", arity: 1, apply: un((*Tensor).Tanh), out: floatType, dtypes: allTypes, ref: uref(math.Tanh)},
	{name: "Erf", arity: 1, apply: un((*Tensor).Erf), out: floatType, dtypes: allTypes, ref: uref(math.Erf)},
	{name: "Sigmoid", arity: 1, apply: un((*Tensor).Sigmoid), out: floatType, dtypes: allTypes, ref: uref(refSigmoid), k: 4},
	{name: "ReLU", arity: 1, apply: un((*Tensor).ReLU), out: sameType, dtypes: numTypes, bad: []DType{Bool},
		ref: uref(func(x float64) float64 { return nanMax(x, 0) }), iref: func(v ...int64) int64 { return max(v[0], 0) }},
	{name: "GELU", arity: 1, apply: un((*Tensor).GELU), out: sameType, dtypes: floatTypes, bad: []DType{Int32, Int64, Bool},
		ref: uref(refGELU), k: 8},
	{name: "GELUTanh", arity: 1, apply: un((*Tensor).GELUTanh), out: sameType, dtypes: floatTypes, bad: []DType{Int32, Int64, Bool},
		ref: uref(refGELUTanh), k: 8},
	{name: "SiLU", arity: 1, apply: un((*Tensor).SiLU), out: sameType, dtypes: floatTypes, bad: []DType{Int32, Int64, Bool},
		ref: uref(func(x float64) float64 { return x * refSigmoid(x) }), k: 8},

	{name: "Eq", arity: 2, apply: bin((*Tensor).Eq), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a == b })},
	{name: "Ne", arity: 2, apply: bin((*Tensor).Ne), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a != b })},
	{name: "Lt", arity: 2, apply: bin((*Tensor).Lt), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a < b })},
	{name: "Le", arity: 2, apply: bin((*Tensor).Le), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a <= b })},
	{name: "Gt", arity: 2, apply: bin((*Tensor).Gt), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a > b })},
	{name: "Ge", arity: 2, apply: bin((*Tensor).Ge), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a >= b })},
	{name: "Lt/normal", arity: 2, apply: bin((*Tensor).Lt), out: boolType, dtypes: floatTypes,
		ref: cmpRef(func(a, b float64) bool { return a < b })},

	{name: "LogicalNot", arity: 1, apply: un((*Tensor).LogicalNot), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: uref(func(x float64) float64 { return b2f(x == 0) })},
	{name: "LogicalAnd", arity: 2, apply: bin((*Tensor).LogicalAnd), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a != 0 && b != 0 })},
	{name: "LogicalOr", arity: 2, apply: bin((*Tensor).LogicalOr), out: boolType, dtypes: allTypes, dom: domSmall, idom: domSmall,
		ref: cmpRef(func(a, b float64) bool { return a != 0 || b != 0 })},
}

func (c *pwCase) domain(i int, dt DType) domain {
	if isIntType(dt) {
		if i == 1 && c.idom2 != nil {
			return *c.idom2
		}
		return c.idom
	}
	if i == 1 && c.dom2 != nil {
		return *c.dom2
	}
	return c.dom
}

func layoutNames(ls []layout) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.name
	}
	return strings.Join(names, " & ")
}

// runCase applies c to operands of dt in the given layouts, checks the
// result against the reference and against c on contiguous copies.
func runCase(t *testing.T, c *pwCase, dt DType, ls []layout, seed uint64) {
	t.Helper()
	what := c.name + " on " + layoutNames(ls)
	args := make([]*Tensor, len(ls))
	in := make([][]float64, len(ls))
	shapes := make([][]int, len(ls))
	strided := false
	for i, l := range ls {
		args[i] = l.make(seed+uint64(i)*7919, dt, c.domain(i, dt))
		if l.strided {
			strided = true
			if args[i].IsContiguous() {
				t.Fatalf("%s: layout %s is contiguous", what, l.name)
			}
		}
		in[i] = vals(args[i])
		shapes[i] = args[i].Shape()
	}
	got := c.apply(args...)
	out := bshape(shapes...)
	idx := make([][]int, len(ls))
	for i := range ls {
		idx[i] = bindex(out, shapes[i])
	}
	odt := c.out(dt)
	n := numel(out)
	if isIntType(odt) {
		iin := make([][]int64, len(ls))
		for i := range args {
			iin[i] = ivals(args[i])
		}
		want := make([]int64, n)
		op := make([]int64, len(ls))
		for j := range want {
			for i := range op {
				op[i] = iin[i][idx[i][j]]
			}
			want[j] = c.iref(op...)
			if odt == Int32 {
				want[j] = int64(int32(want[j]))
			}
		}
		checkInts(t, what, got, odt, out, want)
	} else {
		want := make([]float64, n)
		op := make([]float64, len(ls))
		for j := range want {
			for i := range op {
				op[i] = in[i][idx[i][j]]
			}
			want[j] = c.ref(op...)
		}
		checkClose(t, what, got, odt, out, want, c.k)
	}
	// Each compiled case builds a kernel; on a GPU (NVRTC, without a kernel
	// cache yet) the contiguous layouts cover the kernels' arithmetic.
	if !strided || got.Device() == CPU {
		checkCompiledCase(t, c, args, got)
	}
	if strided {
		contig := make([]*Tensor, len(args))
		for i := range args {
			contig[i] = build(in[i], dt, shapes[i])
		}
		checkSame(t, what+" vs contiguous copies", got, c.apply(contig...))
	}
}

// checkCompiledCase runs c compiled, as one fused kernel with an add of
// zeros after it (an input, so the passes cannot fold it away), and checks
// it against the eager result: within a few ulps for floating results
// (fused kernels may contract into FMAs or use fast float32
// transcendentals), exactly for integers and bools.
func checkCompiledCase(t *testing.T, c *pwCase, args []*Tensor, eager *Tensor) {
	t.Helper()
	zero := Zeros(eager.DType(), eager.Shape()...).ToDevice(eager.Device())
	f := Compile(func(args []*Tensor, zero *Tensor) *Tensor { return c.apply(args...).Add(zero) })
	got := f(args, zero)
	if got.DType() != eager.DType() || !shapeEq(got.Shape(), eager.Shape()) {
		t.Errorf("%s compiled: %v%v, eager %v%v", c.name, got.DType(), got.Shape(), eager.DType(), eager.Shape())
		return
	}
	want := vals(eager)
	checkClose(t, c.name+" compiled vs eager", got, eager.DType(), eager.Shape(), want, 4*c.k)
}

// splits reports whether an op on operands of these base shapes splits its
// work across goroutines. With -short, the parity sweeps keep only such
// operands: the race detector's run (.ci/run) needs them, and the other
// layouts of the sweep run in the full run without -short.
func splits(bases ...[]int) bool {
	n := 0
	for _, b := range bases {
		n = max(n, numel(b))
	}
	return n >= 2*array.MinParallel
}

func TestPointwiseOps(t *testing.T) {
	if l := bigLayouts()[0]; !splits(l.base) {
		t.Fatalf("layout %s no longer splits across goroutines: the sweep needs a larger one", l.name)
	}
	for ci := range pointwiseCases {
		c := &pointwiseCases[ci]
		for _, dt := range c.dtypes {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				seed := uint64(1000*ci) + uint64(dt)
				ran := false
				if c.arity == 1 {
					for li, l := range unaryLayoutsFor(dt) {
						if !testing.Short() || splits(l.base) {
							runCase(t, c, dt, []layout{l}, seed+uint64(li)*31)
							ran = true
						}
					}
				} else {
					for li, pl := range binaryLayoutsFor(dt) {
						if !testing.Short() || splits(pl.a.base, pl.b.base) {
							runCase(t, c, dt, []layout{pl.a, pl.b}, seed+uint64(li)*31)
							ran = true
						}
					}
				}
				if !ran {
					t.Skip("-short: no operand of this dtype splits across goroutines")
				}
			})
		}
		for _, dt := range c.bad {
			t.Run(c.name+"/"+dt.String()+"/unsupported", func(t *testing.T) {
				args := make([]*Tensor, c.arity)
				for i := range args {
					args[i] = build([]float64{1, 0, 1}, dt, []int{3})
				}
				expectError(t, fmt.Sprintf("%s on %v", c.name, dt), func() { c.apply(args...) })
			})
		}
	}
}

// ---------------------------------------------------------------------------
// Scalar variants
// ---------------------------------------------------------------------------

type scalarCase struct {
	name  string
	apply func(*Tensor, float64) *Tensor
	ref   func(a, s float64) float64
	// iref is exact for integer results; nil where integers give Float32.
	iref      func(a, s int64) int64
	cmp       bool
	scalars   []float64
	dom, idom domain
}

// scalarOut is the result dtype of a tensor of dt with a Go scalar s, as
// PyTorch types a Python literal: an integral scalar keeps integer tensors
// integral (and makes bool ones Int64), a fractional one makes them
// Float32; floating tensors keep their type.
func scalarOut(c *scalarCase, dt DType, s float64) DType {
	integral := s == math.Trunc(s) && !math.IsInf(s, 0)
	switch {
	case c.cmp:
		return Bool
	case dt.IsFloat():
		return dt
	case !integral || c.iref == nil:
		return Float32
	case dt == Bool:
		return Int64
	}
	return dt
}

var arithScalars = []float64{2, -1, 0.5, -1.5}

var scalarCases = []scalarCase{
	{name: "AddScalar", apply: (*Tensor).AddScalar, scalars: arithScalars,
		ref: func(a, s float64) float64 { return a + s }, iref: func(a, s int64) int64 { return a + s }},
	{name: "SubScalar", apply: (*Tensor).SubScalar, scalars: arithScalars,
		ref: func(a, s float64) float64 { return a - s }, iref: func(a, s int64) int64 { return a - s }},
	{name: "MulScalar", apply: (*Tensor).MulScalar, scalars: arithScalars,
		ref: func(a, s float64) float64 { return a * s }, iref: func(a, s int64) int64 { return a * s }},
	{name: "DivScalar", apply: (*Tensor).DivScalar, scalars: append([]float64{0}, arithScalars...),
		ref: func(a, s float64) float64 { return a / s }},
	{name: "PowScalar", apply: (*Tensor).PowScalar, scalars: []float64{2, 3, 0, 0.5, -1, -2, -1.5},
		dom: domPositive, idom: domSmall,
		ref: func(a, s float64) float64 { return math.Pow(a, s) }, iref: refIntPow},
	{name: "MaximumScalar", apply: (*Tensor).MaximumScalar, scalars: []float64{0, 1, -1.5, 0.5},
		ref: nanMax, iref: func(a, s int64) int64 { return max(a, s) }},
	{name: "MinimumScalar", apply: (*Tensor).MinimumScalar, scalars: []float64{0, 1, -1.5, 0.5},
		ref: nanMin, iref: func(a, s int64) int64 { return min(a, s) }},
	{name: "EqScalar", apply: (*Tensor).EqScalar, cmp: true, scalars: []float64{1, 0, -2, 0.5}, dom: domSmall, idom: domSmall,
		ref: func(a, s float64) float64 { return b2f(a == s) }},
	{name: "NeScalar", apply: (*Tensor).NeScalar, cmp: true, scalars: []float64{1, 0, -2, 0.5}, dom: domSmall, idom: domSmall,
		ref: func(a, s float64) float64 { return b2f(a != s) }},
	{name: "LtScalar", apply: (*Tensor).LtScalar, cmp: true, scalars: []float64{1, 0, -2, 0.5}, dom: domSmall, idom: domSmall,
		ref: func(a, s float64) float64 { return b2f(a < s) }},
	{name: "LeScalar", apply: (*Tensor).LeScalar, cmp: true, scalars: []float64{1, 0, -2, 0.5}, dom: domSmall, idom: domSmall,
		ref: func(a, s float64) float64 { return b2f(a <= s) }},
	{name: "GtScalar", apply: (*Tensor).GtScalar, cmp: true, scalars: []float64{1, 0, -2, 0.5}, dom: domSmall, idom: domSmall,
		ref: func(a, s float64) float64 { return b2f(a > s) }},
	{name: "GeScalar", apply: (*Tensor).GeScalar, cmp: true, scalars: []float64{1, 0, -2, 0.5}, dom: domSmall, idom: domSmall,
		ref: func(a, s float64) float64 { return b2f(a >= s) }},
}

var scalarLayouts = []layout{lay(1), lay(4097), lay(33, 129), lay(), layTransposed, layStep1D, layExpandRow, layStepCols}

func TestScalarOps(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no operand of the sweep splits across goroutines")
	}
	for ci := range scalarCases {
		c := &scalarCases[ci]
		for _, dt := range allTypes {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				d := c.dom
				if isIntType(dt) {
					d = c.idom
				}
				for li, l := range scalarLayouts {
					x := l.make(uint64(500*ci+10*li)+uint64(dt), dt, d)
					xv := vals(x)
					for _, s := range c.scalars {
						what := fmt.Sprintf("%s(%g) on %s", c.name, s, l.name)
						got := c.apply(x, s)
						odt := scalarOut(c, dt, s)
						if isIntType(odt) {
							xi := ivals(x)
							want := make([]int64, len(xi))
							for i, a := range xi {
								want[i] = c.iref(a, int64(s))
								if odt == Int32 {
									want[i] = int64(int32(want[i]))
								}
							}
							checkInts(t, what, got, odt, x.Shape(), want)
						} else {
							want := make([]float64, len(xv))
							for i, a := range xv {
								want[i] = c.ref(a, s)
							}
							checkClose(t, what, got, odt, x.Shape(), want, 4)
						}
						if l.strided {
							checkSame(t, what+" vs contiguous copy", got, c.apply(build(xv, dt, x.Shape()), s))
						}
					}
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// Where, Clamp, MaskedFill
// ---------------------------------------------------------------------------

func TestWhere(t *testing.T) {
	type triple struct{ c, x, y layout }
	boolT := layout{"T[129,33]", []int{129, 33}, (*Tensor).T, true}
	cases := []triple{
		{lay(4097), lay(4097), lay(4097)},
		{lay(1), lay(3), lay(3)},
		{lay(3, 1), lay(1, 5), lay()},
		{lay(33, 129), layTransposed33, layExpandRow},
		{boolT, lay(33, 129), layStepRows},
		{lay(2, 3, 4), lay(3, 1), lay(4)},
		{lay(), lay(5), lay(5)},
		{lay(1023), layTransposed, lay(3, 1)},
		{lay(), lay(), lay()},
	}
	for _, dt := range allTypes {
		t.Run(dt.String(), func(t *testing.T) {
			for i, tc := range cases {
				what := "Where on " + layoutNames([]layout{tc.c, tc.x, tc.y})
				seed := uint64(77*i) + uint64(dt)
				cond := tc.c.make(seed, Bool, domNormal)
				x := tc.x.make(seed+1, dt, domWide)
				y := tc.y.make(seed+2, dt, domWide)
				got := Where(cond, x, y)
				cs, xs, ys := cond.Shape(), x.Shape(), y.Shape()
				out := bshape(cs, xs, ys)
				ci, xi, yi := bindex(out, cs), bindex(out, xs), bindex(out, ys)
				cv, xv, yv := vals(cond), vals(x), vals(y)
				want := make([]float64, len(ci))
				for j := range want {
					if cv[ci[j]] != 0 {
						want[j] = xv[xi[j]]
					} else {
						want[j] = yv[yi[j]]
					}
				}
				checkClose(t, what, got, dt, out, want, 0)
				checkSame(t, what+" vs contiguous copies", got,
					Where(build(cv, Bool, cs), build(xv, dt, xs), build(yv, dt, ys)))
			}
		})
	}
	t.Run("promotion", func(t *testing.T) {
		cond := build([]float64{1, 0, 1, 0}, Bool, []int{4})
		x := build([]float64{1, 2, 3, 4}, Int32, []int{4})
		y := build([]float64{0.5, -1.5, 2.25, 8}, Float16, []int{4})
		checkClose(t, "Where(int32, float16)", Where(cond, x, y), Float16, []int{4}, []float64{1, -1.5, 3, 8}, 0)
		z := build([]float64{10, 20, 30, 40}, Int64, []int{4})
		checkClose(t, "Where(int32, int64)", Where(cond, x, z), Int64, []int{4}, []float64{1, 20, 3, 40}, 0)
	})
	t.Run("errors", func(t *testing.T) {
		x := build([]float64{1, 2, 3}, Float32, []int{3})
		for _, dt := range []DType{Float32, Int64, Int32, Float16} {
			expectError(t, "Where with a "+dt.String()+" condition", func() {
				Where(build([]float64{1, 0, 1}, dt, []int{3}), x, x)
			})
		}
		expectError(t, "Where with unbroadcastable shapes", func() {
			Where(build([]float64{1, 0, 1, 1}, Bool, []int{4}), x, x)
		})
	})
}

func refClamp(x, lo, hi float64) float64 {
	if math.IsNaN(x) {
		return x
	}
	return math.Min(math.Max(x, lo), hi)
}

func TestClamp(t *testing.T) {
	inf := math.Inf(1)
	bounds := [][2]float64{
		{-0.5, 0.5}, {-inf, 0.25}, {-0.25, inf}, {-inf, inf}, {1, -1}, {0, 0}, {-3, 2}, {-1.5, 2.5}, {-inf, -2}, {2, inf},
	}
	layouts := []layout{lay(1), lay(3), lay(4097), lay(33, 129), lay(), layTransposed, layStep1D, layExpandCol, layStepCols}
	for _, dt := range numTypes {
		t.Run(dt.String(), func(t *testing.T) {
			for li, l := range layouts {
				x := l.make(uint64(li*13)+uint64(dt), dt, domNormal)
				xv := vals(x)
				for _, b := range bounds {
					lo, hi := b[0], b[1]
					what := fmt.Sprintf("Clamp(%g, %g) on %s", lo, hi, l.name)
					got := x.Clamp(lo, hi)
					odt := dt
					if isIntType(dt) && (lo != math.Trunc(lo) && !math.IsInf(lo, 0) || hi != math.Trunc(hi) && !math.IsInf(hi, 0)) {
						odt = Float32 // a fractional bound promotes, as torch.clamp does
					}
					want := make([]float64, len(xv))
					for i, v := range xv {
						want[i] = refClamp(v, lo, hi)
					}
					checkClose(t, what, got, odt, x.Shape(), want, 0)
					if l.strided {
						checkSame(t, what+" vs contiguous copy", got, build(xv, dt, x.Shape()).Clamp(lo, hi))
					}
				}
			}
		})
	}
	t.Run("NaN", func(t *testing.T) {
		for _, dt := range floatTypes {
			x := build([]float64{math.NaN(), -2, 0.5, math.NaN(), inf, -inf}, dt, []int{6})
			for _, b := range bounds {
				want := make([]float64, 6)
				for i, v := range vals(x) {
					want[i] = refClamp(v, b[0], b[1])
				}
				checkClose(t, fmt.Sprintf("Clamp(%g, %g) with NaN", b[0], b[1]), x.Clamp(b[0], b[1]), dt, []int{6}, want, 0)
			}
		}
	})
	t.Run("huge integral bound on ints", func(t *testing.T) {
		// 1e30 is integral but no int64 holds it: the clamp must still
		// leave the values alone, as torch.clamp(int_tensor, max=1e30).
		x := build([]float64{-5, 0, 7}, Int32, []int{3})
		// A bound beyond the int64 range is a float scalar, so the result
		// is Float32.
		want := []float64{-5, 0, 7}
		checkClose(t, "Clamp(-1e30, 1e30) on int32", x.Clamp(-1e30, 1e30), Float32, []int{3}, want, 0)
		checkClose(t, "Clamp(-2, 1e30) on int32", x.Clamp(-2, 1e30), Float32, []int{3}, []float64{-2, 0, 7}, 0)
		checkClose(t, "Clamp(-1e19, 3) on int64", build(want, Int64, []int{3}).Clamp(-1e19, 3), Float32, []int{3},
			[]float64{-5, 0, 3}, 0)
		checkClose(t, "AddScalar(1e30) on int32", x.AddScalar(1e30), Float32, []int{3}, []float64{1e30, 1e30, 1e30}, 0)
		checkClose(t, "MaximumScalar(-1e20) on int64", build(want, Int64, []int{3}).MaximumScalar(-1e20), Float32, []int{3},
			want, 0)
		// the largest integral scalars an int64 holds stay integral
		checkInts(t, "AddScalar(-2^63) on int64", buildInts([]int64{5}, Int64, []int{1}).AddScalar(-0x1p63), Int64,
			[]int{1}, []int64{math.MinInt64 + 5})
	})
}

func TestMaskedFill(t *testing.T) {
	type pair struct{ x, m layout }
	boolT := layout{"T[129,33]", []int{129, 33}, (*Tensor).T, true}
	cases := []pair{
		{lay(4097), lay(4097)}, {lay(1), lay(1)}, {lay(3), lay()}, {lay(33, 129), lay(33, 1)},
		{lay(33, 129), lay(129)}, {layTransposed33, boolT}, {layStepRows, lay(33, 129)},
		{layExpandRow, lay(33, 1)}, {lay(), lay()}, {layTransposed, lay(1023)},
	}
	for _, dt := range allTypes {
		fills := []float64{2, 0, -1}
		if dt.IsFloat() {
			fills = append(fills, -1.5, math.NaN(), math.Inf(-1), 0.1)
		}
		if dt == Bool {
			fills = []float64{1, 0}
		}
		t.Run(dt.String(), func(t *testing.T) {
			for i, tc := range cases {
				x := tc.x.make(uint64(i*5)+uint64(dt), dt, domNormal)
				m := tc.m.make(uint64(i*5+1)+uint64(dt), Bool, domNormal)
				xv, mv := vals(x), vals(m)
				for _, v := range fills {
					what := fmt.Sprintf("MaskedFill(%g) on %s", v, layoutNames([]layout{tc.x, tc.m}))
					got := x.MaskedFill(m, v)
					xs := x.Shape()
					xi, mi := bindex(xs, xs), bindex(xs, m.Shape())
					want := make([]float64, len(xi))
					for j := range want {
						if mv[mi[j]] != 0 {
							want[j] = v
						} else {
							want[j] = xv[xi[j]]
						}
					}
					checkClose(t, what, got, dt, xs, want, 0)
					checkSame(t, what+" vs contiguous copies", got, build(xv, dt, xs).MaskedFill(build(mv, Bool, m.Shape()), v))
				}
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		x := build([]float64{1, 2, 3}, Float32, []int{3})
		for _, dt := range []DType{Float32, Int64, Int32} {
			expectError(t, "MaskedFill with a "+dt.String()+" mask", func() {
				x.MaskedFill(build([]float64{1, 0, 1}, dt, []int{3}), 0)
			})
		}
		expectError(t, "MaskedFill with an unbroadcastable mask", func() {
			x.MaskedFill(build([]float64{1, 0}, Bool, []int{2}), 0)
		})
	})
}

// ---------------------------------------------------------------------------
// Casts
// ---------------------------------------------------------------------------

// refCast is the value v (stored as src) takes as dst. Conversions to
// float16 and bfloat16 round through float32 first, as PyTorch's
// c10::Half(float) and c10::BFloat16(float) do.
func refCast(v float64, dst DType) float64 {
	switch dst {
	case Float16, BFloat16:
		return quantize(float64(float32(v)), dst)
	}
	return quantize(v, dst)
}

func TestTo(t *testing.T) {
	special := []float64{0, math.Copysign(0, -1), 1, -1, 0.3, -0.3, 0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, -2.7,
		3.99, -3.99, 100.6, -100.6, 255.5, 1000.49, -1024.5, 2049, 4097, 65504, 65519, 65520, -70000, 1e-8, 6e-5,
		1e6 + 0.5, 16777217, 2147483000.5, -2147483000.5}
	nonFinite := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e39, -1e39}
	intSpecial := []int64{0, 1, -1, 7, -7, 1000, -1000, 65504, 65520, 70000, -70000, 16777217, 1 << 31, 1<<31 + 5,
		-(1 << 31) - 1, 1<<40 + 3, math.MaxInt32, math.MinInt32, 1 << 53}
	for _, src := range allTypes {
		for _, dst := range allTypes {
			t.Run(src.String()+"->"+dst.String(), func(t *testing.T) {
				var x *Tensor
				switch {
				case src == Bool:
					x = build(genVals(uint64(dst), 4097, Bool, domNormal), Bool, []int{4097})
				case isIntType(src):
					iv := append([]int64(nil), intSpecial...)
					for _, v := range genVals(uint64(dst), 4000, Int64, domWide) {
						iv = append(iv, int64(v))
					}
					if src == Int32 {
						iv = iv[:0]
						for _, v := range intSpecial {
							if v == int64(int32(v)) {
								iv = append(iv, v)
							}
						}
						for _, v := range genVals(uint64(dst), 4000, Int32, domWide) {
							iv = append(iv, int64(v))
						}
					}
					x = buildInts(iv, src, []int{len(iv)})
				default:
					v := append([]float64(nil), special...)
					for _, s := range special {
						v = append(v, s*1.0000001, s*0.999999)
					}
					v = append(v, genVals(uint64(dst)+uint64(src)*8, 3000, src, domWide)...)
					if !isIntType(dst) {
						v = append(v, nonFinite...)
					}
					x = build(v, src, []int{len(v)})
					if isIntType(dst) {
						// keep the values the target can hold: out of range,
						// float-to-int conversion is undefined (in C++ too)
						limit := 0x1p31
						if dst == Int64 {
							limit = 0x1p63
						}
						var in []float64
						for _, s := range vals(x) {
							if math.Abs(s) < limit {
								in = append(in, s)
							}
						}
						x = build(in, src, []int{len(in)})
					}
				}
				what := fmt.Sprintf("To(%v) from %v", dst, src)
				if src == dst {
					if x.To(dst) != x {
						t.Errorf("%s: To the same dtype should return the tensor itself", what)
					}
					return
				}
				got := x.To(dst)
				if isIntType(src) && (isIntType(dst) || dst == Bool) || src == Bool && isIntType(dst) {
					iv := ivals(x)
					want := make([]int64, len(iv))
					for i, v := range iv {
						switch dst {
						case Int32:
							want[i] = int64(int32(v))
						case Bool:
							want[i] = int64(b2f(v != 0))
						default:
							want[i] = v
						}
					}
					checkInts(t, what, got, dst, x.Shape(), want)
				} else {
					xv := vals(x)
					if isIntType(src) {
						iv := ivals(x)
						for i := range xv {
							// float64(int64) is exact for every value used (<= 2^53)
							xv[i] = float64(iv[i])
						}
					}
					want := make([]float64, len(xv))
					for i, v := range xv {
						want[i] = refCast(v, dst)
					}
					checkExact(t, what, got, dst, want)
				}
				// a transposed (non-contiguous) source gives the same values
				if n := x.Numel(); n >= 6 {
					n -= n % 6
					v := x.Slice(0, 0, n, 1).Reshape(n/6, 6)
					if !v.IsContiguous() {
						t.Fatalf("reshape of a slice is not contiguous")
					}
					tv := v.T()
					checkSame(t, what+" on a transposed source", tv.To(dst), build(vals(tv), src, tv.Shape()).To(dst))
				}
			})
		}
	}
}

// checkExact compares a cast result bit for bit (zeros by sign as well,
// any NaN matching NaN).
func checkExact(t *testing.T, what string, got *Tensor, dt DType, want []float64) {
	t.Helper()
	if got.DType() != dt {
		t.Errorf("%s: dtype %v, want %v", what, got.DType(), dt)
		return
	}
	g := vals(got)
	for i, w := range want {
		if math.Float64bits(g[i]) != math.Float64bits(w) && !(math.IsNaN(g[i]) && math.IsNaN(w)) {
			t.Errorf("%s: element %d is %v, want %v", what, i, g[i], w)
			return
		}
	}
}

func TestToBoolNonZero(t *testing.T) {
	for _, dt := range floatTypes {
		x := build([]float64{0, math.Copysign(0, -1), 0.3, -1e-3, math.NaN(), math.Inf(-1), 2}, dt, []int{7})
		checkInts(t, "To(Bool) from "+dt.String(), x.To(Bool), Bool, []int{7}, []int64{0, 0, 1, 1, 1, 1, 1})
	}
	for _, dt := range intTypes {
		x := buildInts([]int64{0, 1, -1, 256, 1 << 20}, dt, []int{5})
		checkInts(t, "To(Bool) from "+dt.String(), x.To(Bool), Bool, []int{5}, []int64{0, 1, 1, 1, 1})
	}
	x := build([]float64{-2.7, -0.5, 0.5, 2.7, 1e9}, Float32, []int{5})
	checkInts(t, "To(Int64) truncates", x.To(Int64), Int64, []int{5}, []int64{-2, 0, 0, 2, 1000000000})
	checkInts(t, "To(Int32) truncates", x.To(Int32), Int32, []int{5}, []int64{-2, 0, 0, 2, 1000000000})
	if got := x.To(Float64).Float64s(); got[0] != float64(float32(-2.7)) {
		t.Errorf("To(Float64) from float32 is %v", got)
	}
}

// ---------------------------------------------------------------------------
// Edge values
// ---------------------------------------------------------------------------

func TestNaNPropagation(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	a := []float64{nan, 1, nan, -inf, 3, nan, 0}
	b := []float64{1, nan, nan, 2, -inf, -inf, nan}
	for _, dt := range floatTypes {
		x, y := build(a, dt, []int{7}), build(b, dt, []int{7})
		mx, mn := make([]float64, 7), make([]float64, 7)
		for i := range a {
			mx[i], mn[i] = nanMax(a[i], b[i]), nanMin(a[i], b[i])
		}
		checkClose(t, "Maximum with NaN", x.Maximum(y), dt, []int{7}, mx, 0)
		checkClose(t, "Minimum with NaN", x.Minimum(y), dt, []int{7}, mn, 0)
		// NaN in the second operand, and a broadcast NaN
		checkClose(t, "Maximum(y, x)", y.Maximum(x), dt, []int{7}, mx, 0)
		checkClose(t, "Minimum(y, x)", y.Minimum(x), dt, []int{7}, mn, 0)
		n1 := build([]float64{nan}, dt, []int{1})
		allNaN := []float64{nan, nan, nan, nan, nan, nan, nan}
		checkClose(t, "Maximum with broadcast NaN", x.Maximum(n1), dt, []int{7}, allNaN, 0)
		checkClose(t, "Minimum with broadcast NaN", n1.Minimum(x), dt, []int{7}, allNaN, 0)
		checkClose(t, "MaximumScalar(0) with NaN", x.MaximumScalar(0), dt, []int{7},
			[]float64{nan, 1, nan, 0, 3, nan, 0}, 0)
		checkClose(t, "MaximumScalar(NaN)", x.MaximumScalar(nan), dt, []int{7}, allNaN, 0)
		checkClose(t, "ReLU with NaN", x.ReLU(), dt, []int{7}, []float64{nan, 1, nan, 0, 3, nan, 0}, 0)
		checkClose(t, "Clamp(-1, 1) with NaN", x.Clamp(-1, 1), dt, []int{7}, []float64{nan, 1, nan, -1, 1, nan, 0}, 0)
		checkClose(t, "Clamp(-inf, 1) with NaN", x.Clamp(math.Inf(-1), 1), dt, []int{7}, []float64{nan, 1, nan, -inf, 1, nan, 0}, 0)
		checkClose(t, "Clamp(0, inf) with NaN", x.Clamp(0, inf), dt, []int{7}, []float64{nan, 1, nan, 0, 3, nan, 0}, 0)
		checkClose(t, "Add with NaN", x.Add(y), dt, []int{7}, []float64{nan, nan, nan, -inf, -inf, nan, nan}, 0)
		checkInts(t, "Eq with NaN", x.Eq(x), Bool, []int{7}, []int64{0, 1, 0, 1, 1, 0, 1})
		checkInts(t, "Ne with NaN", x.Ne(x), Bool, []int{7}, []int64{1, 0, 1, 0, 0, 1, 0})
		checkInts(t, "Lt with NaN", x.Lt(y), Bool, []int{7}, []int64{0, 0, 0, 1, 0, 0, 0})
		checkInts(t, "Ge with NaN", x.Ge(y), Bool, []int{7}, []int64{0, 0, 0, 0, 1, 0, 0})
		checkInts(t, "LogicalNot with NaN", x.LogicalNot(), Bool, []int{7}, []int64{0, 0, 0, 0, 0, 0, 1})
		checkInts(t, "LogicalAnd with NaN", x.LogicalAnd(y), Bool, []int{7}, []int64{1, 1, 1, 1, 1, 1, 0})
	}
}

func TestSpecialValues(t *testing.T) {
	nan, inf, negZero := math.NaN(), math.Inf(1), math.Copysign(0, -1)
	type special struct {
		name string
		f    func(*Tensor) *Tensor
		in   []float64
		want []float64
	}
	cases := []special{
		{"Exp", (*Tensor).Exp, []float64{inf, -inf, 0, nan}, []float64{inf, 0, 1, nan}},
		{"Log", (*Tensor).Log, []float64{0, negZero, -1, inf, 1}, []float64{-inf, -inf, nan, inf, 0}},
		{"Sqrt", (*Tensor).Sqrt, []float64{0, -1, inf, 4}, []float64{0, nan, inf, 2}},
		{"Rsqrt", (*Tensor).Rsqrt, []float64{0, inf, -1, 4}, []float64{inf, 0, nan, 0.5}},
		{"Tanh", (*Tensor).Tanh, []float64{inf, -inf, 1000, -1000, 20}, []float64{1, -1, 1, -1, 1}},
		{"Erf", (*Tensor).Erf, []float64{inf, -inf, 10, -10}, []float64{1, -1, 1, -1}},
		{"Sigmoid", (*Tensor).Sigmoid, []float64{inf, -inf, 1000, -1000, 60000, -60000, 100, -100},
			[]float64{1, 0, 1, 0, 1, 0, 1, refSigmoid(-100)}},
		{"ReLU", (*Tensor).ReLU, []float64{inf, -inf, negZero, 60000, -60000}, []float64{inf, 0, 0, 60000, 0}},
		{"GELU", (*Tensor).GELU, []float64{inf, 1000, -1000, 60000, -60000, 10, -10},
			[]float64{inf, 1000, 0, 60000, 0, 10, refGELU(-10)}},
		{"GELUTanh", (*Tensor).GELUTanh, []float64{inf, 1000, -1000, 60000, -60000, 10},
			[]float64{inf, 1000, 0, 60000, 0, 10}},
		{"SiLU", (*Tensor).SiLU, []float64{inf, 1000, -1000, 60000, -60000, 100},
			[]float64{inf, 1000, 0, 60000, 0, 100}},
		{"Abs", (*Tensor).Abs, []float64{-inf, negZero, nan}, []float64{inf, 0, nan}},
		{"Neg", (*Tensor).Neg, []float64{inf, 0, nan}, []float64{-inf, negZero, nan}},
	}
	for _, c := range cases {
		for _, dt := range floatTypes {
			x := build(c.in, dt, []int{len(c.in)})
			got := c.f(x)
			what := c.name + " of special values"
			checkClose(t, what, got, dt, x.Shape(), c.want, 4)
			g := vals(got)
			for i, w := range c.want {
				if math.IsNaN(g[i]) && !math.IsNaN(w) {
					t.Errorf("%s %v: NaN at %d for input %v", what, dt, i, c.in[i])
				}
			}
		}
	}
	// exp overflows to +Inf in the narrow types without NaN, and sigmoid/silu
	// of large negative inputs are 0 (not NaN) in every float type
	for _, dt := range floatTypes {
		x := build([]float64{100, -100, 700, -700}, dt, []int{4})
		e := vals(x.Exp())
		for i, v := range e {
			if math.IsNaN(v) || v < 0 {
				t.Errorf("Exp(%v) in %v = %v", c4(i), dt, v)
			}
		}
		for _, f := range []func(*Tensor) *Tensor{(*Tensor).Sigmoid, (*Tensor).SiLU, (*Tensor).GELU, (*Tensor).GELUTanh, (*Tensor).Tanh} {
			for i, v := range vals(f(x)) {
				if math.IsNaN(v) {
					t.Errorf("NaN from a large input %v in %v", c4(i), dt)
				}
			}
		}
	}
}

func c4(i int) float64 { return []float64{100, -100, 700, -700}[i] }

func TestSignedZero(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, dt := range floatTypes {
		z := build([]float64{0, negZero}, dt, []int{2})
		signs := func(x *Tensor) [2]bool {
			v := vals(x)
			return [2]bool{math.Signbit(v[0]), math.Signbit(v[1])}
		}
		if s := signs(z.Neg()); s != [2]bool{true, false} {
			t.Errorf("Neg(0, -0) signs %v in %v", s, dt)
		}
		if s := signs(z.Abs()); s != [2]bool{false, false} {
			t.Errorf("Abs(0, -0) signs %v in %v", s, dt)
		}
		if s := signs(z.Sqrt()); s != [2]bool{false, true} {
			t.Errorf("Sqrt(0, -0) signs %v in %v", s, dt)
		}
		if s := signs(z.MulScalar(5)); s != [2]bool{false, true} {
			t.Errorf("(0, -0)*5 signs %v in %v", s, dt)
		}
		if s := signs(z.MulScalar(-1)); s != [2]bool{true, false} {
			t.Errorf("(0, -0)*-1 signs %v in %v", s, dt)
		}
		if r := vals(build([]float64{1}, dt, []int{1}).Div(z)); !math.IsInf(r[0], 1) || !math.IsInf(r[1], -1) {
			t.Errorf("1/(0, -0) = %v in %v", r, dt)
		}
		checkInts(t, "Eq(0, -0)", z.Eq(build([]float64{negZero, 0}, dt, []int{2})), Bool, []int{2}, []int64{1, 1})
		checkInts(t, "LogicalNot(0, -0)", z.LogicalNot(), Bool, []int{2}, []int64{1, 1})
	}
}

// ---------------------------------------------------------------------------
// Integer arithmetic: wrap-around and Pow
// ---------------------------------------------------------------------------

func TestIntegerWrap(t *testing.T) {
	const maxI32, minI32 = math.MaxInt32, math.MinInt32
	a := []int64{maxI32, minI32, maxI32, 65536, 46341, -46341, minI32, 123456789}
	b := []int64{1, -1, maxI32, 65536, 46341, 46341, -1, 987654321}
	n := []int{len(a)}
	x, y := buildInts(a, Int32, n), buildInts(b, Int32, n)
	wrap := func(f func(p, q int64) int64) []int64 {
		out := make([]int64, len(a))
		for i := range a {
			out[i] = int64(int32(f(a[i], b[i])))
		}
		return out
	}
	checkInts(t, "int32 Add wraps", x.Add(y), Int32, n, wrap(func(p, q int64) int64 { return p + q }))
	checkInts(t, "int32 Sub wraps", x.Sub(y), Int32, n, wrap(func(p, q int64) int64 { return p - q }))
	checkInts(t, "int32 Mul wraps", x.Mul(y), Int32, n, wrap(func(p, q int64) int64 { return p * q }))
	checkInts(t, "int32 AddScalar wraps", x.AddScalar(1), Int32, n, func() []int64 {
		out := make([]int64, len(a))
		for i := range a {
			out[i] = int64(int32(a[i] + 1))
		}
		return out
	}())
	checkInts(t, "int32 Neg of MinInt32", buildInts([]int64{minI32, maxI32}, Int32, []int{2}).Neg(), Int32, []int{2},
		[]int64{minI32, -maxI32})
	checkInts(t, "int32 Abs of MinInt32", buildInts([]int64{minI32, -5}, Int32, []int{2}).Abs(), Int32, []int{2},
		[]int64{minI32, 5})

	// int64 wraps as int64 and is computed exactly beyond 2^53
	const maxI64, minI64 = math.MaxInt64, math.MinInt64
	a64 := []int64{maxI64, minI64, 1<<53 + 1, 1 << 62, 3037000500, -(1 << 60) - 7}
	b64 := []int64{1, -1, 2, 4, 3037000500, 3}
	n64 := []int{len(a64)}
	x64, y64 := buildInts(a64, Int64, n64), buildInts(b64, Int64, n64)
	sum, prod := make([]int64, len(a64)), make([]int64, len(a64))
	for i := range a64 {
		sum[i], prod[i] = a64[i]+b64[i], a64[i]*b64[i]
	}
	checkInts(t, "int64 Add wraps", x64.Add(y64), Int64, n64, sum)
	checkInts(t, "int64 Mul wraps", x64.Mul(y64), Int64, n64, prod)
	checkInts(t, "int64 Maximum is exact", x64.Maximum(buildInts([]int64{maxI64 - 1, minI64 + 1, 1<<53 + 2, 1<<62 + 1, 0, 0},
		Int64, n64)), Int64, n64, []int64{maxI64, minI64 + 1, 1<<53 + 2, 1<<62 + 1, 3037000500, 0})
	checkInts(t, "int64 Eq is exact", x64.Eq(buildInts([]int64{maxI64 - 1, minI64, 1<<53 + 1, 1 << 62, 0, 0}, Int64, n64)),
		Bool, n64, []int64{0, 1, 1, 1, 0, 0})
}

func TestIntegerPow(t *testing.T) {
	var bases, exps []int64
	for a := int64(-3); a <= 3; a++ {
		for b := int64(-4); b <= 5; b++ {
			bases, exps = append(bases, a), append(exps, b)
		}
	}
	// overflow: 3^25 wraps in int32, 3^41 and 2^63 in int64, 7^30 in both
	bases, exps = append(bases, 3, 3, 2, 7, -2, 10), append(exps, 25, 41, 63, 30, 31, 18)
	n := []int{len(bases)}
	for _, dt := range intTypes {
		got := buildInts(bases, dt, n).Pow(buildInts(exps, dt, n))
		want := make([]int64, len(bases))
		for i := range bases {
			b, e := bases[i], exps[i]
			if dt == Int32 {
				b, e = int64(int32(b)), int64(int32(e))
			}
			want[i] = refIntPow(b, e)
			if dt == Int32 {
				want[i] = int64(int32(want[i]))
			}
		}
		checkInts(t, "Pow on "+dt.String(), got, dt, n, want)
		// a negative integral scalar exponent keeps the integer rule
		x := buildInts([]int64{-2, -1, 0, 1, 2, 3}, dt, []int{6})
		checkInts(t, "PowScalar(-1) on "+dt.String(), x.PowScalar(-1), dt, []int{6}, []int64{0, -1, 0, 1, 0, 0})
		checkInts(t, "PowScalar(-2) on "+dt.String(), x.PowScalar(-2), dt, []int{6}, []int64{0, 1, 0, 1, 0, 0})
		checkInts(t, "PowScalar(0) on "+dt.String(), x.PowScalar(0), dt, []int{6}, []int64{1, 1, 1, 1, 1, 1})
		// an integer base with a float exponent tensor gives float
		f := build([]float64{0.5, 0.5, 2, -1, 2, 0.5}, Float32, []int{6})
		want32 := []float64{math.NaN(), math.NaN(), 0, 1, 4, math.Sqrt(3)}
		checkClose(t, "Pow(int, float32)", x.Pow(f), Float32, []int{6}, want32, 2)
	}
}

func TestBroadcastErrors(t *testing.T) {
	x := build([]float64{1, 2, 3}, Float32, []int{3})
	y := build([]float64{1, 2, 3, 4}, Float32, []int{4})
	z := build(make([]float64, 6), Float32, []int{2, 3})
	w := build(make([]float64, 6), Float32, []int{3, 2})
	ops := map[string]func(a, b *Tensor) *Tensor{
		"Add": (*Tensor).Add, "Sub": (*Tensor).Sub, "Mul": (*Tensor).Mul, "Div": (*Tensor).Div, "Pow": (*Tensor).Pow,
		"Maximum": (*Tensor).Maximum, "Eq": (*Tensor).Eq, "Lt": (*Tensor).Lt, "LogicalAnd": (*Tensor).LogicalAnd,
	}
	for name, f := range ops {
		expectError(t, name+" on [3] and [4]", func() { f(x, y) })
		expectError(t, name+" on [2,3] and [3,2]", func() { f(z, w) })
	}
	// nil operands are an error, not a crash
	expectError(t, "Add(nil)", func() { x.Add(nil) })
}
