package ir

import "math"

// primSig says how a primitive types its operands and result.
type primSig uint8

const (
	sigSame  primSig = iota // operands and result share one kind
	sigFloat                // like sigSame, floating kinds only
	sigCmp                  // operands share one kind; result is I64 0/1
	sigLogic                // operands and result are I64 0/1
	sigWhere                // I64 condition; values and result share one kind
)

// primInfo is the whole meaning of a primitive: its Go block loops are
// selected in evalPrim below; c is its C form (cf32 overrides it for F32).
type primInfo struct {
	name  string
	arity int
	sig   primSig
	c     string
	cf32  string
}

var prims = [numPrims]primInfo{
	PArg:   {name: "arg"},
	PConst: {name: "const"},
	PParam: {name: "param"},

	PNeg:   {"neg", 1, sigSame, "(-%s)", ""},
	PAbs:   {"abs", 1, sigSame, "gc_abs(%s)", ""},
	PRecip: {"recip", 1, sigFloat, "(1.0 / %s)", "gc_fdiv(1.0f, %s)"},
	PExp:   {"exp", 1, sigFloat, "exp(%s)", "gc_expf(%s)"},
	PLog:   {"log", 1, sigFloat, "log(%s)", "logf(%s)"},
	PSqrt:  {"sqrt", 1, sigFloat, "sqrt(%s)", "sqrtf(%s)"},
	PRsqrt: {"rsqrt", 1, sigFloat, "rsqrt(%s)", "rsqrtf(%s)"},
	PSin:   {"sin", 1, sigFloat, "sin(%s)", "sinf(%s)"},
	PCos:   {"cos", 1, sigFloat, "cos(%s)", "cosf(%s)"},
	PTanh:  {"tanh", 1, sigFloat, "tanh(%s)", "tanhf(%s)"},
	PErf:   {"erf", 1, sigFloat, "erf(%s)", "erff(%s)"},
	PFloor: {"floor", 1, sigSame, "gc_floor(%s)", ""},
	PCeil:  {"ceil", 1, sigSame, "gc_ceil(%s)", ""},
	PRound: {"round", 1, sigSame, "gc_round(%s)", ""},
	PSign:  {"sign", 1, sigSame, "gc_sign(%s)", ""},
	PNot:   {"not", 1, sigLogic, "(long long)(%s == 0)", ""},

	PAdd: {"add", 2, sigSame, "(%s + %s)", ""},
	PSub: {"sub", 2, sigSame, "(%s - %s)", ""},
	PMul: {"mul", 2, sigSame, "(%s * %s)", ""},
	PDiv: {"div", 2, sigFloat, "(%s / %s)", "gc_fdiv(%s, %s)"},
	PPow: {"pow", 2, sigSame, "gc_pow(%s, %s)", ""},
	PMax: {"max", 2, sigSame, "gc_max(%s, %s)", ""},
	PMin: {"min", 2, sigSame, "gc_min(%s, %s)", ""},
	PEq:  {"eq", 2, sigCmp, "(long long)(%s == %s)", ""},
	PNe:  {"ne", 2, sigCmp, "(long long)(%s != %s)", ""},
	PLt:  {"lt", 2, sigCmp, "(long long)(%s < %s)", ""},
	PLe:  {"le", 2, sigCmp, "(long long)(%s <= %s)", ""},
	PGt:  {"gt", 2, sigCmp, "(long long)(%s > %s)", ""},
	PGe:  {"ge", 2, sigCmp, "(long long)(%s >= %s)", ""},
	PAnd: {"and", 2, sigLogic, "(long long)((%s != 0) & (%s != 0))", ""},
	POr:  {"or", 2, sigLogic, "(long long)((%s != 0) | (%s != 0))", ""},

	PWhere: {"where", 3, sigWhere, "(%s ? %s : %s)", ""},
	PCast:  {name: "cast", arity: 1}, // typed and printed by its target kind
}

// CPrelude defines the helper functions that the C forms of the primitives
// call. Their semantics match the Go loops in this file: max and min
// propagate NaN, integer pow is exact with wrap-around.
const CPrelude = `
// In kernels that store 16-bit values only (GC_FAST16 defined), float
// exp and division take the hardware's approximations, whose errors (a
// few float32 ulps) lie far below a 16-bit ulp; in every other kernel,
// and off the GPU, they are the correctly rounded ones.
#if defined(GC_FAST16) && defined(__CUDA_ARCH__)
__device__ __forceinline__ float gc_expf(float a) { return __expf(a); }
__device__ __forceinline__ float gc_fdiv(float a, float b) {
  // __fdividef is 0 for |b| > 2^126: those keep the division.
  return fabsf(b) <= 8.5070592e37f ? __fdividef(a, b) : a / b;
}
#else
__device__ __forceinline__ float gc_expf(float a) { return expf(a); }
__device__ __forceinline__ float gc_fdiv(float a, float b) { return a / b; }
#endif
__device__ __forceinline__ float gc_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double gc_abs(double a) { return fabs(a); }
__device__ __forceinline__ long long gc_abs(long long a) { return a < 0 ? -a : a; }
__device__ __forceinline__ float gc_floor(float a) { return floorf(a); }
__device__ __forceinline__ double gc_floor(double a) { return floor(a); }
__device__ __forceinline__ long long gc_floor(long long a) { return a; }
__device__ __forceinline__ float gc_ceil(float a) { return ceilf(a); }
__device__ __forceinline__ double gc_ceil(double a) { return ceil(a); }
__device__ __forceinline__ long long gc_ceil(long long a) { return a; }
__device__ __forceinline__ float gc_round(float a) { return rintf(a); }
__device__ __forceinline__ double gc_round(double a) { return rint(a); }
__device__ __forceinline__ long long gc_round(long long a) { return a; }
__device__ __forceinline__ float gc_sign(float a) { return (float)((a > 0.0f) - (a < 0.0f)); }
__device__ __forceinline__ double gc_sign(double a) { return (double)((a > 0.0) - (a < 0.0)); }
__device__ __forceinline__ long long gc_sign(long long a) { return (a > 0) - (a < 0); }
__device__ __forceinline__ float gc_max(float a, float b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double gc_max(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ long long gc_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ float gc_min(float a, float b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ double gc_min(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ long long gc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ float gc_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double gc_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ long long gc_pow(long long a, long long b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  long long r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
`

type number interface{ float32 | float64 | int64 }
type floating interface{ float32 | float64 }

// Vec is one block of values of a single kind; exactly the field of its
// kind is used.
type Vec struct {
	F32 []float32
	F64 []float64
	I64 []int64
}

// evalPrim computes dst = p(a, b, c) over n values. ak is the kind of the
// operands (for a where, of its values).
func evalPrim(p Prim, ak Kind, n int, dst, a, b, c *Vec) {
	switch ak {
	case F32:
		evalKind[float32](p, n, dst, a, b, c)
	case F64:
		evalKind[float64](p, n, dst, a, b, c)
	default:
		evalKind[int64](p, n, dst, a, b, c)
	}
}

// slice is the field of v that holds values of type T, cut to n (nil for a
// missing operand).
func slice[T number](v *Vec, n int) []T {
	if v == nil {
		return nil
	}
	var s any
	switch any(T(0)).(type) {
	case float32:
		s = v.F32
	case float64:
		s = v.F64
	default:
		s = v.I64
	}
	return s.([]T)[:n]
}

func evalKind[T number](p Prim, n int, dst, a, b, c *Vec) {
	switch p.signature() {
	case sigCmp:
		cmpLoop(p, dst.I64[:n], slice[T](a, n), slice[T](b, n))
	case sigWhere:
		whereLoop(slice[T](dst, n), a.I64[:n], slice[T](b, n), slice[T](c, n))
	case sigLogic:
		logicLoop(p, dst.I64[:n], a.I64[:n], slice[int64](b, n))
	default:
		switch d := any(slice[T](dst, n)).(type) {
		case []float32:
			floatLoop(p, d, slice[float32](a, n), slice[float32](b, n))
		case []float64:
			floatLoop(p, d, slice[float64](a, n), slice[float64](b, n))
		case []int64:
			intLoop(p, d, slice[int64](a, n), slice[int64](b, n))
		}
	}
}

func floatLoop[T floating](p Prim, d, a, b []T) {
	if b == nil {
		b = a // unary: b is not read
	}
	a, b = a[:len(d)], b[:len(d)] // so the loops below need no bounds checks
	switch p {
	case PNeg:
		for i := range d {
			d[i] = -a[i]
		}
	case PAbs:
		for i := range d {
			d[i] = T(math.Abs(float64(a[i])))
		}
	case PRecip:
		for i := range d {
			d[i] = 1 / a[i]
		}
	case PExp:
		mapF(d, a, math.Exp)
	case PLog:
		mapF(d, a, math.Log)
	case PSqrt:
		mapF(d, a, math.Sqrt)
	case PRsqrt:
		for i := range d {
			d[i] = T(1 / math.Sqrt(float64(a[i])))
		}
	case PSin:
		mapF(d, a, math.Sin)
	case PCos:
		mapF(d, a, math.Cos)
	case PTanh:
		mapF(d, a, math.Tanh)
	case PErf:
		mapF(d, a, math.Erf)
	case PFloor:
		mapF(d, a, math.Floor)
	case PCeil:
		mapF(d, a, math.Ceil)
	case PRound:
		mapF(d, a, math.RoundToEven)
	case PSign:
		for i := range d {
			switch v := a[i]; {
			case v > 0:
				d[i] = 1
			case v < 0:
				d[i] = -1
			default:
				d[i] = 0 // also for NaN, as PyTorch's kernels compute it
			}
		}
	case PAdd:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case PSub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case PMul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case PDiv:
		for i := range d {
			d[i] = a[i] / b[i]
		}
	case PPow:
		for i := range d {
			d[i] = T(math.Pow(float64(a[i]), float64(b[i])))
		}
	case PMax:
		for i := range d {
			x, y := a[i], b[i]
			if x != x || x > y {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	case PMin:
		for i := range d {
			x, y := a[i], b[i]
			if x != x || x < y {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	default:
		panic("ir: " + p.String() + " has no floating loop")
	}
}

// mapF applies a float64 library function; float32 values are widened, which
// gives results within one ulp of the float32 libm.
func mapF[T floating](d, a []T, f func(float64) float64) {
	a = a[:len(d)]
	for i := range d {
		d[i] = T(f(float64(a[i])))
	}
}

func intLoop(p Prim, d, a, b []int64) {
	if b == nil {
		b = a
	}
	a, b = a[:len(d)], b[:len(d)]
	switch p {
	case PNeg:
		for i := range d {
			d[i] = -a[i]
		}
	case PAbs:
		for i := range d {
			if a[i] < 0 {
				d[i] = -a[i]
			} else {
				d[i] = a[i]
			}
		}
	case PFloor, PCeil, PRound:
		copy(d, a) // integers are whole already
	case PSign:
		for i := range d {
			switch {
			case a[i] > 0:
				d[i] = 1
			case a[i] < 0:
				d[i] = -1
			default:
				d[i] = 0
			}
		}
	case PAdd:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case PSub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case PMul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case PPow:
		for i := range d {
			d[i] = IntPow(a[i], b[i])
		}
	case PMax:
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	case PMin:
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	default:
		panic("ir: " + p.String() + " has no integer loop")
	}
}

// IntPow is integer exponentiation with wrap-around; a negative exponent
// gives 0 except for bases 1 and -1.
func IntPow(a, b int64) int64 {
	if b < 0 {
		switch a {
		case 1:
			return 1
		case -1:
			if b&1 != 0 {
				return -1
			}
			return 1
		}
		return 0
	}
	r := int64(1)
	for b != 0 {
		if b&1 != 0 {
			r *= a
		}
		a *= a
		b >>= 1
	}
	return r
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmpLoop[T number](p Prim, d []int64, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch p {
	case PEq:
		for i := range d {
			d[i] = b2i(a[i] == b[i])
		}
	case PNe:
		for i := range d {
			d[i] = b2i(a[i] != b[i])
		}
	case PLt:
		for i := range d {
			d[i] = b2i(a[i] < b[i])
		}
	case PLe:
		for i := range d {
			d[i] = b2i(a[i] <= b[i])
		}
	case PGt:
		for i := range d {
			d[i] = b2i(a[i] > b[i])
		}
	case PGe:
		for i := range d {
			d[i] = b2i(a[i] >= b[i])
		}
	}
}

func logicLoop(p Prim, d, a, b []int64) {
	switch p {
	case PNot:
		for i := range d {
			d[i] = b2i(a[i] == 0)
		}
	case PAnd:
		for i := range d {
			d[i] = b2i(a[i] != 0 && b[i] != 0)
		}
	case POr:
		for i := range d {
			d[i] = b2i(a[i] != 0 || b[i] != 0)
		}
	}
}

func whereLoop[T number](d []T, c []int64, a, b []T) {
	c, a, b = c[:len(d)], a[:len(d)], b[:len(d)]
	for i := range d {
		if c[i] != 0 {
			d[i] = a[i]
		} else {
			d[i] = b[i]
		}
	}
}
