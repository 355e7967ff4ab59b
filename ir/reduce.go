package ir

import (
	"fmt"
	"math"
)

// Reducer is the meaning of a reduction: how values combine into an
// accumulator and how the accumulator becomes the result.
type Reducer uint8

// The reducers.
const (
	RSum Reducer = iota
	RMean
	RMax
	RMin
	RArgMax
	RArgMin
)

var reducerNames = [...]string{"sum", "mean", "amax", "amin", "argmax", "argmin"}

func (r Reducer) String() string {
	if int(r) < len(reducerNames) {
		return reducerNames[r]
	}
	return fmt.Sprintf("Reducer(%d)", int(r))
}

// IsArg reports whether the reducer yields an index rather than a value.
func (r Reducer) IsArg() bool { return r == RArgMax || r == RArgMin }

// Acc is a reduction's running state. Sums of floating values accumulate in
// float64 and of integers in int64; max, min and the arg reductions keep
// the best value and, for arg reductions, its index (the first one on ties;
// NaN counts as greater than everything for max and less for min, and the
// first NaN wins, as in PyTorch).
type Acc struct {
	F     float64
	I     int64
	Index int64
	Count int64 // values seen
	NaN   bool
}

// Init returns the identity accumulator.
func (r Reducer) Init() Acc { return Acc{Index: -1} }

// bestIn is the best value of x and its index by the vector loops, or an
// index of -1 when valueOnly and bestValue found the value without one;
// ok is false where neither applies (the slow path decides).
func bestIn[T floating](x []T, greater, valueOnly bool) (best float64, at int, ok bool) {
	if valueOnly { // a value reduction: the index is not kept
		if b, ok := bestValue(x, greater); ok {
			return float64(b), -1, true
		}
	}
	b, at, ok := bestFloat(x, greater)
	return float64(b), at, ok
}

// Accumulate folds the block x, whose first value has index base within the
// reduced range, into acc. A block of floats sums in sixteen float64 lanes
// combined pairwise (the order vector units run fast, the same on every
// platform); the block's sum is then added to acc.F.
func Accumulate[T number](r Reducer, acc *Acc, x []T, base int64) {
	if len(x) == 0 {
		return
	}
	first := acc.Count == 0
	acc.Count += int64(len(x))
	var zero T
	isInt := any(zero) == any(int64(0))
	switch r {
	case RSum, RMean:
		if isInt {
			var s int64
			for _, v := range x {
				s += int64(v)
			}
			acc.I += s
			return
		}
		switch any(zero).(type) { // any(x) would allocate
		case float32:
			acc.F += sumFloat(asFloat[float32](x))
		case float64:
			acc.F += sumFloat(asFloat[float64](x))
		}
	case RMax, RArgMax, RMin, RArgMin:
		if acc.NaN {
			return
		}
		greater := r == RMax || r == RArgMax
		if !isInt {
			var best float64
			var at int
			var ok bool
			switch any(zero).(type) {
			case float32:
				best, at, ok = bestIn(asFloat[float32](x), greater, !r.IsArg())
			case float64:
				best, at, ok = bestIn(asFloat[float64](x), greater, !r.IsArg())
			}
			if ok {
				if first || greater && best > acc.F || !greater && best < acc.F {
					acc.F = best
					if at >= 0 {
						acc.Index = base + int64(at)
					}
				}
				return
			}
		}
		if first {
			acc.Index = base
			if isInt {
				acc.I = int64(x[0])
			} else {
				acc.F = float64(x[0])
			}
		}
		for i, v := range x {
			if v != v {
				acc.NaN = true
				acc.F = math.NaN()
				acc.Index = base + int64(i)
				return
			}
			if isInt {
				iv := int64(v)
				if (greater && iv > acc.I) || (!greater && iv < acc.I) {
					acc.I, acc.Index = iv, base+int64(i)
				}
			} else {
				fv := float64(v)
				if (greater && fv > acc.F) || (!greater && fv < acc.F) {
					acc.F, acc.Index = fv, base+int64(i)
				}
			}
		}
	}
}

// Merge combines b, the accumulator of a later part of the reduced range,
// into a.
func (r Reducer) Merge(a *Acc, b Acc, isInt bool) {
	if b.Count == 0 {
		return
	}
	if a.Count == 0 {
		*a = b
		return
	}
	a.Count += b.Count
	switch r {
	case RSum, RMean:
		a.F += b.F
		a.I += b.I
		return
	}
	if a.NaN {
		return
	}
	if b.NaN {
		a.NaN, a.F, a.Index = true, b.F, b.Index
		return
	}
	greater := r == RMax || r == RArgMax
	var better bool
	if isInt {
		better = (greater && b.I > a.I) || (!greater && b.I < a.I)
	} else {
		better = (greater && b.F > a.F) || (!greater && b.F < a.F)
	}
	if better {
		a.F, a.I, a.Index = b.F, b.I, b.Index
	}
}

// CMerge is Merge in C, for generated CUDA reductions: a function
// merge(Acc a, Acc b) over struct Acc { T v; long long i; } (i, the index
// of v, is -1 for an empty accumulator), with the same rules as Merge and
// Accumulate: sums add; max, min and the arg reductions keep the first NaN,
// else the better value, else the lower index.
func (r Reducer) CMerge() string {
	if r == RSum || r == RMean {
		return "__device__ __forceinline__ Acc merge(Acc a, Acc b) { a.v += b.v; a.i = a.i < 0 ? b.i : a.i; return a; }\n"
	}
	cmp, word := ">", "greater"
	if r == RMin || r == RArgMin {
		cmp, word = "<", "lesser"
	}
	return fmt.Sprintf(`// The better of two: NaN first, then the %[1]s value, then the lower index.
__device__ __forceinline__ Acc merge(Acc a, Acc b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  bool an = a.v != a.v, bn = b.v != b.v;
  if (an || bn) { if (an && bn) return a.i < b.i ? a : b; return an ? a : b; }
  if (a.v %[2]s b.v) return a;
  if (b.v %[2]s a.v) return b;
  return a.i < b.i ? a : b;
}
`, word, cmp)
}

// ResultF is the floating result of a value reduction over n values.
func (r Reducer) ResultF(a Acc, n int) float64 {
	if r == RMean {
		return a.F / float64(n)
	}
	return a.F
}

// ResultI is the integer result: the value for integer inputs, the index for
// arg reductions.
func (r Reducer) ResultI(a Acc) int64 {
	if r.IsArg() {
		return a.Index
	}
	return a.I
}

// CCombine is the C expression that combines two values a and b of a value
// reduction (not an arg reduction) without indices, for fused kernels that
// reduce in registers: sums add; max and min propagate NaN, as Accumulate
// does.
func (r Reducer) CCombine(a, b string) string {
	switch r {
	case RSum, RMean:
		return fmt.Sprintf("%s + %s", a, b)
	case RMax:
		return fmt.Sprintf("(%[1]s != %[1]s || %[1]s > %[2]s) ? %[1]s : %[2]s", a, b)
	case RMin:
		return fmt.Sprintf("(%[1]s != %[1]s || %[1]s < %[2]s) ? %[1]s : %[2]s", a, b)
	}
	panic(fmt.Sprintf("ir: %v has no value-only combine", r))
}

// CIdentity is the C value a fused reduction in kind k starts from: the
// combine's identity (-inf for max, +inf for min).
func (r Reducer) CIdentity(k Kind) string {
	switch r {
	case RSum, RMean:
		return cLiteral(0, k)
	case RMax:
		return cLiteral(math.Inf(-1), k)
	case RMin:
		return cLiteral(math.Inf(1), k)
	}
	panic(fmt.Sprintf("ir: %v has no value-only combine", r))
}
