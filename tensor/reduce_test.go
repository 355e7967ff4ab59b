package tensor

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Shared test helpers (used by the other *_test.go files of this package).
// Expected values are always computed here, in float64 with plain loops, from
// the values actually stored in the inputs (read back with Float64s).

// refTolerance is the relative tolerance per dtype. A value passes when
// |got-want| <= tol * (|want| + scale), where scale is a per-test magnitude:
// 1 for values of order one, the sum of |terms| for sums and dot products
// (the rounding error of a sum grows with its terms, not with its result).
var refTolerance = map[DType]float64{
	Float64:  1e-10,
	Float32:  1e-5,
	Float16:  1e-2,
	BFloat16: 5e-2,
	Int32:    0,
	Int64:    0,
	Bool:     0,
}

var refFloatTypes = []DType{Float32, Float64, Float16, BFloat16}

func refSameFloat(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

// checkValues checks got's dtype, shape and values. scale is nil (0), one
// value for every element, or one per element.
func checkValues(t testing.TB, label string, got *Tensor, dt DType, shape []int, want []float64, tol float64, scale []float64) {
	t.Helper()
	if got.DType() != dt {
		t.Errorf("%s: dtype %v, want %v", label, got.DType(), dt)
		return
	}
	if !refSameShape(got.Shape(), shape) {
		t.Errorf("%s: shape %v, want %v", label, got.Shape(), shape)
		return
	}
	vals := got.Float64s()
	if len(vals) != len(want) {
		t.Errorf("%s: %d values, want %d", label, len(vals), len(want))
		return
	}
	for i, w := range want {
		g := vals[i]
		if refSameFloat(g, w) {
			continue
		}
		s := 0.0
		switch {
		case len(scale) == 1:
			s = scale[0]
		case len(scale) > i:
			s = scale[i]
		}
		if math.IsNaN(g) || math.IsNaN(w) || math.IsInf(g, 0) || math.IsInf(w, 0) ||
			math.Abs(g-w) > tol*(math.Abs(w)+s) {
			t.Errorf("%s: first mismatch at flat index %d (of %d): got %v, want %v (tol %g, scale %g)",
				label, i, len(want), g, w, tol, s)
			return
		}
	}
}

func refSameShape(a, b []int) bool {
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

// checkOpError runs f and checks that it panics with a *tensor.Error whose
// message contains every fragment.
func checkOpError(t testing.TB, label string, f func(), fragments ...string) {
	t.Helper()
	err := Try(f)
	if err == nil {
		t.Errorf("%s: no error", label)
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %T is not *tensor.Error", label, err)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q does not mention %q", label, err.Error(), f)
		}
	}
}

// refFromValues builds a tensor of type dt and any shape (a scalar shape too,
// which FromSlice cannot express) from float64 values.
func refFromValues(vals []float64, dt DType, shape ...int) *Tensor {
	return Zeros(dt, shape...).Copy(FromSlice(vals).Reshape(shape...))
}

// refNumel is the element count of a shape.
func refNumel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// refRandInput returns a deterministic random tensor of any dtype: normal
// values for floating types, integers in [-20, 20) for integer types,
// random booleans for Bool.
func refRandInput(seed uint64, dt DType, shape ...int) *Tensor {
	switch dt {
	case Int32, Int64:
		iv := NewGenerator(seed).RandInt(-20, 20, shape...).Int64s()
		if dt == Int64 {
			return FromSlice(iv).Reshape(shape...)
		}
		v := make([]int32, len(iv))
		for i, x := range iv {
			v[i] = int32(x)
		}
		return FromSlice(v).Reshape(shape...)
	case Bool:
		iv := NewGenerator(seed).RandInt(0, 2, shape...).Int64s()
		v := make([]bool, len(iv))
		for i, x := range iv {
			v[i] = x == 1
		}
		return FromSlice(v).Reshape(shape...)
	}
	return Randn(seed, dt, shape...)
}

// refReduce groups the values of a row-major tensor by output element (the
// reduced dims in row-major order within each group) and applies f.
func refReduce(vals []float64, shape, dims []int, keepDim bool, f func([]float64) float64) ([]int, []float64) {
	red := make([]bool, len(shape))
	if len(dims) == 0 {
		for i := range red {
			red[i] = true
		}
	}
	for _, d := range dims {
		if d < 0 {
			d += len(shape)
		}
		red[d] = true
	}
	var outShape, keptSizes []int
	for i, s := range shape {
		switch {
		case !red[i]:
			outShape = append(outShape, s)
			keptSizes = append(keptSizes, s)
		case keepDim:
			outShape = append(outShape, 1)
		}
	}
	if outShape == nil {
		outShape = []int{}
	}
	nOut := refNumel(keptSizes)
	groups := make([][]float64, nOut)
	idx := make([]int, len(shape))
	for flat, v := range vals {
		rem := flat
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = rem % shape[d]
			rem /= shape[d]
		}
		o := 0
		for d := range shape {
			if !red[d] {
				o = o*shape[d] + idx[d]
			}
		}
		groups[o] = append(groups[o], v)
	}
	out := make([]float64, nOut)
	for i, g := range groups {
		out[i] = f(g)
	}
	return outShape, out
}

func refRedSum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

func refRedAbsSum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += math.Abs(x)
	}
	return s
}

func refRedMean(v []float64) float64 { return refRedSum(v) / float64(len(v)) }

func refRedMax(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		if math.IsNaN(x) {
			return x
		}
		if x > m {
			m = x
		}
	}
	return m
}

func refRedMin(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		if math.IsNaN(x) {
			return x
		}
		if x < m {
			m = x
		}
	}
	return m
}

func refRedArgMax(v []float64) float64 {
	best := 0
	for i, x := range v {
		if math.IsNaN(x) {
			return float64(i)
		}
		if x > v[best] {
			best = i
		}
	}
	return float64(best)
}

func refRedArgMin(v []float64) float64 {
	best := 0
	for i, x := range v {
		if math.IsNaN(x) {
			return float64(i)
		}
		if x < v[best] {
			best = i
		}
	}
	return float64(best)
}

func refRedVar(correction float64) func([]float64) float64 {
	return func(v []float64) float64 {
		m := refRedMean(v)
		ss := 0.0
		for _, x := range v {
			ss += (x - m) * (x - m)
		}
		return ss / math.Max(float64(len(v))-correction, 0)
	}
}

// ---------------------------------------------------------------------------

type redCase struct {
	shape []int
	dims  []int
	keep  bool
}

func (c redCase) String() string { return fmt.Sprintf("%v/dims%v/keep=%v", c.shape, c.dims, c.keep) }

var redCases = []redCase{
	{[]int{1}, nil, false},
	{[]int{3}, nil, false},
	{[]int{1023}, nil, true},
	{[]int{4097}, nil, false},
	{[]int{4097}, []int{0}, true},
	{[]int{3, 1023}, []int{1}, false},
	{[]int{3, 1023}, []int{-1}, true},
	{[]int{4097, 3}, []int{0}, false}, // column reduction, long
	{[]int{4097, 3}, []int{1}, false}, // many short rows
	{[]int{3, 4097}, []int{1}, true},  // few long rows
	{[]int{3, 4097}, []int{0}, false}, // columns of 3
	{[]int{2, 3, 4}, []int{0, 2}, false},
	{[]int{2, 3, 4}, []int{0, 2}, true},
	{[]int{2, 3, 4}, []int{-1, -3}, false},
	{[]int{2, 3, 4}, []int{1}, true},
	{[]int{2, 3, 4}, []int{0, 1, 2}, false},
	{[]int{5, 1, 7}, []int{1}, false},
	{[]int{4, 5, 6}, []int{2, 0}, true},
	{[]int{}, nil, false}, // a scalar
}

func TestReduceValues(t *testing.T) {
	type red struct {
		name  string
		f     func(x *Tensor, dims []int, keep bool) *Tensor
		ref   func([]float64) float64
		exact bool // result is one of the inputs
		sum   bool // tolerance scales with sum |x|
	}
	reds := []red{
		{"Sum", func(x *Tensor, d []int, k bool) *Tensor {
			if k {
				return x.SumKeepDim(d...)
			}
			return x.Sum(d...)
		}, refRedSum, false, true},
		{"Mean", func(x *Tensor, d []int, k bool) *Tensor {
			if k {
				return x.MeanKeepDim(d...)
			}
			return x.Mean(d...)
		}, refRedMean, false, true},
		{"Max", func(x *Tensor, d []int, k bool) *Tensor {
			if k {
				return x.MaxKeepDim(d...)
			}
			return x.Max(d...)
		}, refRedMax, true, false},
		{"Min", func(x *Tensor, d []int, k bool) *Tensor {
			if k {
				return x.MinKeepDim(d...)
			}
			return x.Min(d...)
		}, refRedMin, true, false},
	}
	for _, dt := range refFloatTypes {
		for ci, c := range redCases {
			x := refRandInput(uint64(100+ci), dt, c.shape...)
			xv := x.Float64s()
			for _, r := range reds {
				label := fmt.Sprintf("%s %v %v", r.name, dt, c)
				got := r.f(x, c.dims, c.keep)
				shape, want := refReduce(xv, c.shape, c.dims, c.keep, r.ref)
				tol := refTolerance[dt]
				var scale []float64
				if r.exact {
					tol = 0
				} else if r.sum {
					// The rounding error of a sum grows with its terms, not
					// its result: allow 1% of tol per unit of sum |x|.
					div := 1.0
					if r.name == "Mean" {
						div = float64(max(refNumel(c.shape)/max(len(want), 1), 1))
					}
					_, scale = refReduce(xv, c.shape, c.dims, c.keep, func(v []float64) float64 { return 0.01 * refRedAbsSum(v) / div })
				}
				checkValues(t, label, got, dt, shape, want, tol, scale)
			}
		}
		// Integer-valued inputs are exact in every floating type and their
		// sums are exact in the accumulator: only the final rounding to dt
		// remains, so a dropped or doubled element cannot hide in the
		// tolerance.
		for ci, c := range redCases {
			iv := NewGenerator(uint64(150+ci)).RandInt(-20, 20, c.shape...).Int64s()
			fv := make([]float64, len(iv))
			for i, v := range iv {
				fv[i] = float64(v)
			}
			x := refFromValues(fv, dt, c.shape...)
			label := fmt.Sprintf("%v %v integer-valued", dt, c)
			shape, want := refReduce(fv, c.shape, c.dims, c.keep, refRedSum)
			checkValues(t, "Sum "+label, reds[0].f(x, c.dims, c.keep), dt, shape, want, refTolerance[dt], nil)
			shape, want = refReduce(fv, c.shape, c.dims, c.keep, refRedMean)
			checkValues(t, "Mean "+label, reds[1].f(x, c.dims, c.keep), dt, shape, want, refTolerance[dt], nil)
		}
	}
}

func TestReduceIntegerTypes(t *testing.T) {
	for _, dt := range []DType{Int32, Int64, Bool} {
		for ci, c := range redCases {
			x := refRandInput(uint64(200+ci), dt, c.shape...)
			xv := x.Float64s()
			label := fmt.Sprintf("%v %v", dt, c)
			var got *Tensor
			if c.keep {
				got = x.SumKeepDim(c.dims...)
			} else {
				got = x.Sum(c.dims...)
			}
			shape, want := refReduce(xv, c.shape, c.dims, c.keep, refRedSum)
			checkValues(t, "Sum "+label, got, Int64, shape, want, 0, nil)
			if c.keep {
				got = x.MaxKeepDim(c.dims...)
			} else {
				got = x.Max(c.dims...)
			}
			shape, want = refReduce(xv, c.shape, c.dims, c.keep, refRedMax)
			checkValues(t, "Max "+label, got, dt, shape, want, 0, nil)
			if c.keep {
				got = x.MinKeepDim(c.dims...)
			} else {
				got = x.Min(c.dims...)
			}
			shape, want = refReduce(xv, c.shape, c.dims, c.keep, refRedMin)
			checkValues(t, "Min "+label, got, dt, shape, want, 0, nil)
		}
	}
	// Integer sums do not overflow int32: they accumulate and return int64.
	big := make([]int32, 4)
	for i := range big {
		big[i] = math.MaxInt32
	}
	checkValues(t, "Sum int32 overflow", FromSlice(big).Sum(), Int64, []int{}, []float64{4 * math.MaxInt32}, 0, nil)
}

func TestArgMaxArgMin(t *testing.T) {
	type argCase struct {
		shape []int
		dim   int
		keep  bool
	}
	cases := []argCase{
		{[]int{1}, 0, false},
		{[]int{3}, 0, false},
		{[]int{1023}, -1, true},
		{[]int{4097}, 0, false},
		{[]int{3, 4097}, 1, false},
		{[]int{4097, 3}, 0, true},
		{[]int{4097, 3}, -1, false},
		{[]int{2, 3, 4}, 1, false},
		{[]int{2, 3, 4}, -3, true},
	}
	for _, dt := range append(append([]DType{}, refFloatTypes...), Int32, Int64, Bool) {
		for ci, c := range cases {
			// Few distinct values, so that ties are common: the first index wins.
			iv := NewGenerator(uint64(300+ci)).RandInt(-3, 4, c.shape...).Int64s()
			fv := make([]float64, len(iv))
			for i, v := range iv {
				fv[i] = float64(v)
				if dt == Bool {
					fv[i] = float64(v & 1)
				}
			}
			x := refFromValues(fv, dt, c.shape...)
			xv := x.Float64s()
			label := fmt.Sprintf("%v %v dim %d keep %v", dt, c.shape, c.dim, c.keep)
			shape, want := refReduce(xv, c.shape, []int{c.dim}, c.keep, refRedArgMax)
			checkValues(t, "ArgMax "+label, x.ArgMax(c.dim, c.keep), Int64, shape, want, 0, nil)
			shape, want = refReduce(xv, c.shape, []int{c.dim}, c.keep, refRedArgMin)
			checkValues(t, "ArgMin "+label, x.ArgMin(c.dim, c.keep), Int64, shape, want, 0, nil)
		}
	}
	// ArgMaxAll / ArgMinAll index the flattened tensor, also when it is a
	// transposed view.
	x := FromSlice([]float32{1, 9, 3, 9, -4, 0}, 2, 3).T()
	checkValues(t, "ArgMaxAll", x.ArgMaxAll(), Int64, []int{}, []float64{1}, 0, nil) // [1 9 | 9 -4 | 3 0]: the first 9
	checkValues(t, "ArgMinAll", x.ArgMinAll(), Int64, []int{}, []float64{3}, 0, nil)
}

func TestReduceNaN(t *testing.T) {
	for _, dt := range refFloatTypes {
		for _, n := range []int{3, 1023, 4097} {
			x := refRandInput(7, dt, 2, n)
			// Row 0: NaN at two positions, the first must win; row 1: none.
			x.Set(math.NaN(), 0, n-1)
			x.Set(math.NaN(), 0, n/2)
			xv := x.Float64s()
			label := fmt.Sprintf("%v n=%d", dt, n)
			shape, want := refReduce(xv, []int{2, n}, []int{1}, false, refRedArgMax)
			if want[0] != float64(n/2) {
				t.Fatalf("reference argmax with NaN: %v", want[0])
			}
			checkValues(t, "ArgMax NaN "+label, x.ArgMax(1, false), Int64, shape, want, 0, nil)
			shape, want = refReduce(xv, []int{2, n}, []int{1}, false, refRedArgMin)
			checkValues(t, "ArgMin NaN "+label, x.ArgMin(1, false), Int64, shape, want, 0, nil)
			shape, want = refReduce(xv, []int{2, n}, []int{1}, false, refRedMax)
			checkValues(t, "Max NaN "+label, x.Max(1), dt, shape, want, 0, nil)
			shape, want = refReduce(xv, []int{2, n}, []int{1}, false, refRedMin)
			checkValues(t, "Min NaN "+label, x.Min(1), dt, shape, want, 0, nil)
			// Along dim 0 (column reduction), NaN only in some columns.
			shape, want = refReduce(xv, []int{2, n}, []int{0}, false, refRedArgMax)
			checkValues(t, "ArgMax NaN dim0 "+label, x.ArgMax(0, false), Int64, shape, want, 0, nil)
			if s := x.Sum().Item(); !math.IsNaN(s) {
				t.Errorf("Sum with NaN %s = %v", label, s)
			}
		}
	}
}

// TestReduceLong exercises the path that splits one long row across
// goroutines and merges the parts in order.
func TestReduceLong(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	const n = 1 << 17
	for _, dt := range refFloatTypes {
		x := refRandInput(11, dt, n)
		xv := x.Float64s()
		tol := refTolerance[dt]
		label := fmt.Sprint(dt)
		checkValues(t, "Sum long "+label, x.Sum(), dt, []int{}, []float64{refRedSum(xv)}, tol, []float64{refRedAbsSum(xv)})
		checkValues(t, "Mean long "+label, x.Mean(), dt, []int{}, []float64{refRedMean(xv)}, tol, []float64{refRedAbsSum(xv) / n})
		checkValues(t, "Max long "+label, x.Max(), dt, []int{}, []float64{refRedMax(xv)}, 0, nil)
		checkValues(t, "Min long "+label, x.Min(), dt, []int{}, []float64{refRedMin(xv)}, 0, nil)
		checkValues(t, "Var long "+label, x.Var(nil, 1, false), dt, []int{}, []float64{refRedVar(1)(xv)}, tol, []float64{1})

		// Ties across the parts: the same maximum early and late; the
		// first must win. Then a NaN in the last part, then one earlier.
		y := Zeros(dt, n)
		y.Copy(x)
		y.Set(100, n-5)
		y.Set(100, n/3)
		y.Set(-100, n-3)
		y.Set(-100, n/2+7)
		checkValues(t, "ArgMax ties long "+label, y.ArgMax(0, false), Int64, []int{}, []float64{n / 3}, 0, nil)
		checkValues(t, "ArgMin ties long "+label, y.ArgMin(0, false), Int64, []int{}, []float64{n/2 + 7}, 0, nil)
		y.Set(math.NaN(), n-2)
		checkValues(t, "ArgMax late NaN "+label, y.ArgMax(0, false), Int64, []int{}, []float64{n - 2}, 0, nil)
		y.Set(math.NaN(), 5000)
		checkValues(t, "ArgMin NaN long "+label, y.ArgMin(0, false), Int64, []int{}, []float64{5000}, 0, nil)
		checkValues(t, "Max NaN long "+label, y.Max(), dt, []int{}, []float64{math.NaN()}, 0, nil)
	}
	for _, dt := range []DType{Int32, Int64, Bool} {
		x := refRandInput(12, dt, n)
		xv := x.Float64s()
		checkValues(t, fmt.Sprint("Sum long ", dt), x.Sum(), Int64, []int{}, []float64{refRedSum(xv)}, 0, nil)
		checkValues(t, fmt.Sprint("Max long ", dt), x.Max(), dt, []int{}, []float64{refRedMax(xv)}, 0, nil)
		checkValues(t, fmt.Sprint("ArgMin long ", dt), x.ArgMin(0, false), Int64, []int{}, []float64{refRedArgMin(xv)}, 0, nil)
	}
	// Two long rows (fewer rows than workers), and a strided long row.
	x := refRandInput(13, Float32, 2, n)
	xv := x.Float64s()
	shape, want := refReduce(xv, []int{2, n}, []int{1}, false, refRedSum)
	_, scale := refReduce(xv, []int{2, n}, []int{1}, false, refRedAbsSum)
	checkValues(t, "Sum 2 long rows", x.Sum(1), Float32, shape, want, 1e-5, scale)
	xt := x.T() // [n, 2], reduce dim 0: stride-2 reads
	checkValues(t, "Sum long strided", xt.Sum(0), Float32, shape, want, 1e-5, scale)
	shape, want = refReduce(xv, []int{2, n}, []int{1}, false, refRedArgMax)
	checkValues(t, "ArgMax long strided", xt.ArgMax(0, false), Int64, shape, want, 0, nil)
}

func TestReduceNonContiguous(t *testing.T) {
	for _, dt := range refFloatTypes {
		base := refRandInput(21, dt, 6, 5, 7)
		// A permuted, sliced view; the reference reads its values in
		// row-major order of the view.
		v := base.Permute(2, 0, 1).Slice(1, 1, 6, 2) // [7, 3, 5]
		vv := v.Float64s()
		shape := v.Shape()
		for _, dims := range [][]int{nil, {0}, {1}, {2}, {0, 2}, {-1, -2}} {
			label := fmt.Sprintf("%v view dims %v", dt, dims)
			s, want := refReduce(vv, shape, dims, false, refRedSum)
			_, scale := refReduce(vv, shape, dims, false, refRedAbsSum)
			checkValues(t, "Sum "+label, v.Sum(dims...), dt, s, want, refTolerance[dt], scale)
			s, want = refReduce(vv, shape, dims, true, refRedMax)
			checkValues(t, "MaxKeepDim "+label, v.MaxKeepDim(dims...), dt, s, want, 0, nil)
		}
		s, want := refReduce(vv, shape, []int{1}, false, refRedArgMin)
		checkValues(t, "ArgMin view", v.ArgMin(1, false), Int64, s, want, 0, nil)
		// An expanded operand (stride 0).
		e := refRandInput(22, dt, 1, 5).Expand(4, 5)
		ev := e.Float64s()
		s, want = refReduce(ev, []int{4, 5}, []int{0}, false, refRedSum)
		checkValues(t, "Sum expanded "+dt.String(), e.Sum(0), dt, s, want, refTolerance[dt], []float64{4 * 5})
	}
}

func TestVar(t *testing.T) {
	cases := []redCase{
		{[]int{3}, nil, false},
		{[]int{1023}, nil, false},
		{[]int{4097}, []int{0}, true},
		{[]int{3, 1023}, []int{1}, false},
		{[]int{4097, 3}, []int{0}, true},
		{[]int{2, 3, 4}, []int{0, 2}, false},
		{[]int{2, 3, 4}, []int{-1}, true},
	}
	for _, dt := range refFloatTypes {
		for ci, c := range cases {
			x := refRandInput(uint64(400+ci), dt, c.shape...)
			xv := x.Float64s()
			for _, corr := range []float64{0, 1} {
				label := fmt.Sprintf("Var %v %v corr %v", dt, c, corr)
				shape, want := refReduce(xv, c.shape, c.dims, c.keep, refRedVar(corr))
				checkValues(t, label, x.Var(c.dims, corr, c.keep), dt, shape, want, refTolerance[dt], []float64{1})
			}
		}
	}
	// One element with correction 1 divides by zero: NaN, as in PyTorch
	// (0/0). With correction 0 it is 0.
	one := FromSlice([]float64{3})
	if v := one.Var(nil, 1, false).Item(); !math.IsNaN(v) {
		t.Errorf("Var of one element, correction 1 = %v, want NaN", v)
	}
	if v := one.Var(nil, 0, false).Item(); v != 0 {
		t.Errorf("Var of one element, correction 0 = %v, want 0", v)
	}
	checkValues(t, "Var known", FromSlice([]float64{1, 2, 3, 4}).Var(nil, 1, false), Float64, []int{}, []float64{5.0 / 3}, 1e-12, nil)
}

func TestReduceIntErrors(t *testing.T) {
	for _, dt := range []DType{Int32, Int64, Bool} {
		x := refRandInput(1, dt, 3, 4)
		checkOpError(t, "Mean "+dt.String(), func() { x.Mean() }, "Mean", dt.String())
		checkOpError(t, "Var "+dt.String(), func() { x.Var(nil, 1, false) }, "Var")
		checkOpError(t, "Softmax "+dt.String(), func() { x.Softmax(-1) }, "Softmax")
		checkOpError(t, "LogSoftmax "+dt.String(), func() { x.LogSoftmax(-1) }, "LogSoftmax")
		checkOpError(t, "LayerNorm "+dt.String(), func() { x.LayerNorm([]int{4}, nil, nil, 1e-5) }, "LayerNorm")
		checkOpError(t, "RMSNorm "+dt.String(), func() { x.RMSNorm([]int{4}, nil, 1e-5) }, "RMSNorm")
	}
	x := refRandInput(1, Float32, 3, 4)
	checkOpError(t, "Sum dim out of range", func() { x.Sum(2) }, "Sum", "[3, 4]", "dim 2")
	checkOpError(t, "Sum repeated dim", func() { x.Sum(1, -1) }, "Sum", "more than once")
	checkOpError(t, "ArgMax dim out of range", func() { x.ArgMax(-3, false) }, "ArgMax")
	checkOpError(t, "Softmax dim", func() { x.Softmax(2) }, "Softmax")
	checkOpError(t, "LayerNorm shape", func() { x.LayerNorm([]int{3}, nil, nil, 1e-5) }, "LayerNorm", "normalized shape")
	checkOpError(t, "LayerNorm weight", func() { x.LayerNorm([]int{4}, Ones(Float32, 3), nil, 1e-5) }, "LayerNorm")
}

func TestReduceEmpty(t *testing.T) {
	for _, dt := range append(append([]DType{}, refFloatTypes...), Int32, Int64, Bool) {
		x := Zeros(dt, 0)
		sumType := dt
		if !dt.IsFloat() {
			sumType = Int64
		}
		checkValues(t, "Sum empty "+dt.String(), x.Sum(), sumType, []int{}, []float64{0}, 0, nil)
		checkOpError(t, "Max empty "+dt.String(), func() { x.Max() }, "Max", "zero elements")
		checkOpError(t, "Min empty "+dt.String(), func() { x.Min() }, "Min")
		checkOpError(t, "ArgMax empty "+dt.String(), func() { x.ArgMax(0, false) }, "ArgMax")
		checkOpError(t, "ArgMin empty "+dt.String(), func() { x.ArgMin(0, false) }, "ArgMin")
	}
	// Reducing a zero-size dim gives zeros for Sum; reducing another dim of
	// a tensor with a zero-size dim gives an empty result.
	x := Zeros(Float32, 3, 0)
	checkValues(t, "Sum over empty dim", x.Sum(1), Float32, []int{3}, []float64{0, 0, 0}, 0, nil)
	checkValues(t, "Sum keeping empty dim", x.Sum(0), Float32, []int{0}, []float64{}, 0, nil)
	checkValues(t, "Max keeping empty dim", x.Max(0), Float32, []int{0}, []float64{}, 0, nil)
	checkOpError(t, "Max over empty dim", func() { x.Max(1) }, "Max")
	if m := Zeros(Float32, 0).Mean().Item(); !math.IsNaN(m) {
		t.Errorf("Mean of empty = %v, want NaN", m)
	}
}

// ---------------------------------------------------------------------------
// Composites.

func refSoftmaxRows(v []float64, log bool) []float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - m)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		if log {
			out[i] = x - m - math.Log(s)
		} else {
			out[i] = math.Exp(x-m) / s
		}
	}
	return out
}

// refAlongDim applies f to every 1-D line of a row-major tensor along dim and
// returns the results in the tensor's row-major order.
func refAlongDim(vals []float64, shape []int, dim int, f func([]float64) []float64) []float64 {
	if dim < 0 {
		dim += len(shape)
	}
	inner := refNumel(shape[dim+1:])
	outer := refNumel(shape[:dim])
	n := shape[dim]
	out := make([]float64, len(vals))
	line := make([]float64, n)
	for o := range outer {
		for i := range inner {
			for k := range n {
				line[k] = vals[(o*n+k)*inner+i]
			}
			res := f(line)
			for k := range n {
				out[(o*n+k)*inner+i] = res[k]
			}
		}
	}
	return out
}

func TestSoftmax(t *testing.T) {
	type smCase struct {
		shape []int
		dim   int
	}
	cases := []smCase{
		{[]int{1}, 0},
		{[]int{3}, 0},
		{[]int{1023}, -1},
		{[]int{4097}, 0},
		{[]int{3, 4097}, 1},
		{[]int{4097, 3}, 0},
		{[]int{4097, 3}, -1},
		{[]int{2, 3, 4}, 1},
		{[]int{2, 3, 4}, -3},
	}
	for _, dt := range refFloatTypes {
		for ci, c := range cases {
			x := refRandInput(uint64(500+ci), dt, c.shape...).MulScalar(3)
			xv := x.Float64s()
			label := fmt.Sprintf("%v %v dim %d", dt, c.shape, c.dim)
			want := refAlongDim(xv, c.shape, c.dim, func(v []float64) []float64 { return refSoftmaxRows(v, false) })
			checkValues(t, "Softmax "+label, x.Softmax(c.dim), dt, c.shape, want, refTolerance[dt], []float64{1e-3})
			want = refAlongDim(xv, c.shape, c.dim, func(v []float64) []float64 { return refSoftmaxRows(v, true) })
			checkValues(t, "LogSoftmax "+label, x.LogSoftmax(c.dim), dt, c.shape, want, refTolerance[dt], []float64{1})
		}
	}
	// Large logits must not overflow.
	x := FromSlice([]float32{1000, 1001, 1002, -1000})
	want := refSoftmaxRows([]float64{1000, 1001, 1002, -1000}, false)
	checkValues(t, "Softmax large", x.Softmax(0), Float32, []int{4}, want, 1e-5, []float64{1e-6})
	want = refSoftmaxRows([]float64{1000, 1001, 1002, -1000}, true)
	checkValues(t, "LogSoftmax large", x.LogSoftmax(0), Float32, []int{4}, want, 1e-5, []float64{1})
	// A transposed input.
	y := refRandInput(9, Float64, 5, 7).T()
	yv := y.Float64s()
	want = refAlongDim(yv, []int{7, 5}, 1, func(v []float64) []float64 { return refSoftmaxRows(v, false) })
	checkValues(t, "Softmax transposed", y.Softmax(1), Float64, []int{7, 5}, want, 1e-10, []float64{1e-3})
}

func refLayerNorm(v, w, b []float64, eps float64, rms bool) []float64 {
	n := float64(len(v))
	out := make([]float64, len(v))
	if rms {
		ms := 0.0
		for _, x := range v {
			ms += x * x
		}
		r := 1 / math.Sqrt(ms/n+eps)
		for i, x := range v {
			out[i] = x * r
		}
	} else {
		m := 0.0
		for _, x := range v {
			m += x
		}
		m /= n
		va := 0.0
		for _, x := range v {
			va += (x - m) * (x - m)
		}
		r := 1 / math.Sqrt(va/n+eps)
		for i, x := range v {
			out[i] = (x - m) * r
		}
	}
	for i := range out {
		if w != nil {
			out[i] *= w[i]
		}
		if b != nil {
			out[i] += b[i]
		}
	}
	return out
}

func TestLayerNormRMSNorm(t *testing.T) {
	type lnCase struct {
		shape []int
		norm  []int
	}
	cases := []lnCase{
		{[]int{1}, []int{1}},
		{[]int{2, 3}, []int{3}},
		{[]int{4, 1023}, []int{1023}},
		{[]int{2, 4097}, []int{4097}},
		{[]int{4097, 3}, []int{3}},
		{[]int{2, 3, 5}, []int{3, 5}},
		{[]int{3, 7, 33}, []int{7, 33}},
	}
	const eps = 1e-5
	for _, dt := range refFloatTypes {
		for ci, c := range cases {
			x := refRandInput(uint64(600+ci), dt, c.shape...).MulScalar(2).AddScalar(0.5)
			xv := x.Float64s()
			w := refRandInput(uint64(700+ci), dt, c.norm...)
			b := refRandInput(uint64(800+ci), dt, c.norm...)
			wv, bv := w.Float64s(), b.Float64s()
			rows := refNumel(c.norm)
			check := func(label string, got *Tensor, wv, bv []float64, rms bool) {
				t.Helper()
				want := make([]float64, 0, len(xv))
				for r := 0; r < len(xv); r += rows {
					want = append(want, refLayerNorm(xv[r:r+rows], wv, bv, eps, rms)...)
				}
				checkValues(t, fmt.Sprintf("%s %v %v norm %v", label, dt, c.shape, c.norm), got, dt, c.shape, want, refTolerance[dt], []float64{1})
			}
			check("LayerNorm", x.LayerNorm(c.norm, nil, nil, eps), nil, nil, false)
			check("LayerNorm weight", x.LayerNorm(c.norm, w, nil, eps), wv, nil, false)
			check("LayerNorm bias", x.LayerNorm(c.norm, nil, b, eps), nil, bv, false)
			check("LayerNorm weight+bias", x.LayerNorm(c.norm, w, b, eps), wv, bv, false)
			check("RMSNorm", x.RMSNorm(c.norm, nil, eps), nil, nil, true)
			check("RMSNorm weight", x.RMSNorm(c.norm, w, eps), wv, nil, true)
		}
	}
	// A constant row normalises to zero (up to eps), then the bias.
	x := Full(4, Float32, 2, 8)
	b := FromSlice([]float32{1, 2, 3, 4, 5, 6, 7, 8})
	want := make([]float64, 16)
	for i := range want {
		want[i] = float64(i%8 + 1)
	}
	checkValues(t, "LayerNorm constant", x.LayerNorm([]int{8}, nil, b, 1e-5), Float32, []int{2, 8}, want, 1e-5, []float64{1})
	// A large eps is visible.
	y := FromSlice([]float64{1, -1})
	checkValues(t, "RMSNorm eps", y.RMSNorm([]int{2}, nil, 3), Float64, []int{2}, []float64{0.5, -0.5}, 1e-12, nil)
}
