package program_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gocompile/cuda"
	"gocompile/inductor/program"
	"gocompile/internal/stats"
	"gocompile/ir"
	"gocompile/tensor"
)

// colCase is one reduction over a dim set, checked against a float64
// reference computed from the input's values.
type colCase struct {
	name string
	dims []int // reduced dims, ascending (one dim for softmax and arg ops)
	keep bool
	f    func(x *tensor.Tensor) *tensor.Tensor
	ref  func(vals []float64, n int) (v, mag float64) // one output from its reduced values in order; mag scales the tolerance
	// perElement: the result has the input's shape (softmax).
	perElement bool
	integer    bool // an exact integer result
}

func sumRef(v []float64, _ int) (float64, float64) {
	s, m := 0.0, 0.0
	for _, x := range v {
		s, m = s+x, m+math.Abs(x)
	}
	return s, m
}

func meanRef(v []float64, n int) (float64, float64) {
	s, m := sumRef(v, n)
	return s / float64(n), m / float64(n)
}

func maxRef(v []float64, _ int) (float64, float64) {
	b := math.Inf(-1)
	for _, x := range v {
		b = math.Max(b, x)
	}
	return b, math.Abs(b)
}

func argMaxRef(v []float64, _ int) (float64, float64) {
	bi := 0
	for i, x := range v {
		if x > v[bi] {
			bi = i
		}
	}
	return float64(bi), 0
}

func argMinRef(v []float64, _ int) (float64, float64) {
	bi := 0
	for i, x := range v {
		if x < v[bi] {
			bi = i
		}
	}
	return float64(bi), 0
}

func varRef(v []float64, n int) (float64, float64) {
	mean, _ := meanRef(v, n)
	s := 0.0
	for _, x := range v {
		s += (x - mean) * (x - mean)
	}
	d := math.Max(float64(n)-1, 0)
	return s / d, s / d
}

// centredRef is sum((x - mean(x)) * x): a reduction with a prologue that
// reads another reduction.
func centredRef(v []float64, n int) (float64, float64) {
	mean, _ := meanRef(v, n)
	s, m := 0.0, 0.0
	for _, x := range v {
		s += (x - mean) * x
		m += (math.Abs(x-mean) + math.Abs(mean)) * math.Abs(x) // the eager ops round x - mean and mean
	}
	return s, m
}

// softmaxRow writes the softmax of v into out.
func softmaxRow(out, v []float64) {
	b, _ := maxRef(v, len(v))
	s := 0.0
	for _, x := range v {
		s += math.Exp(x - b)
	}
	for j, x := range v {
		out[j] = math.Exp(x-b) / s
	}
}

// reduceRef applies ref to each output's reduced values of x (shape, dims
// ascending), in the kept dims' row-major order, the values in the reduced
// dims' row-major order.
func reduceRef(vals []float64, shape, dims []int) [][]float64 {
	nOut := 1
	for d, n := range shape {
		if !slices.Contains(dims, d) {
			nOut *= n
		}
	}
	outOf := keptIndex(shape, dims)
	rows := make([][]float64, nOut)
	for i, v := range vals {
		o := outOf(i)
		rows[o] = append(rows[o], v)
	}
	return rows
}

// keptIndex returns the function from an element's row-major index in
// shape to its output's: its index over the dims not in dims, row-major.
func keptIndex(shape, dims []int) func(i int) int {
	red := make([]bool, len(shape))
	for _, d := range dims {
		red[d] = true
	}
	idx := make([]int, len(shape))
	return func(i int) int {
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
		o := 0
		for d := range shape {
			if !red[d] {
				o = o*shape[d] + idx[d]
			}
		}
		return o
	}
}

// randomShape is a shape of rank 1 to 5 with sizes 1, 3, odd lengths and
// occasionally one long dim (1023 or 4097), at most about 300k elements.
func randomShape(rng *rand.Rand) []int {
	rank := 1 + rng.IntN(5)
	shape := make([]int, rank)
	for d := range shape {
		switch rng.IntN(6) {
		case 0:
			shape[d] = 1
		case 1:
			shape[d] = 3
		default:
			shape[d] = 2 + rng.IntN(9)
		}
	}
	if rng.IntN(3) == 0 {
		shape[rng.IntN(rank)] = []int{1023, 4097, 64}[rng.IntN(3)]
	}
	for ir.Numel(shape) > 300_000 {
		d := slices.Index(shape, slices.Max(shape))
		shape[d] /= 2
	}
	return shape
}

// randomInput is x of the given shape and dtype, on dev; with permute it
// is a permuted view of a contiguous tensor (its strides out of order).
func randomInput(rng *rand.Rand, g *tensor.Generator, shape []int, dt tensor.DType, permute bool, dev tensor.Device) *tensor.Tensor {
	perm := make([]int, len(shape))
	for i := range perm {
		perm[i] = i
	}
	if permute {
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	}
	base := make([]int, len(shape)) // the contiguous tensor's shape: base[i] = shape[perm[i]]
	for i, p := range perm {
		base[i] = shape[p]
	}
	var x *tensor.Tensor
	if dt.IsFloat() {
		x = g.Randn(tensor.Float64, base...).ToDevice(tensor.CPU).To(dt)
	} else {
		x = g.RandInt(-4, 5, base...).ToDevice(tensor.CPU).To(dt) // small: many ties
	}
	x = x.ToDevice(dev)
	inv := make([]int, len(perm)) // view dim i is base dim inv[i]
	for i, p := range perm {
		inv[p] = i
	}
	return x.Permute(inv...)
}

func randomDims(rng *rand.Rand, rank int) []int {
	var dims []int
	for len(dims) == 0 {
		dims = dims[:0]
		for d := range rank {
			if rng.IntN(2) == 0 {
				dims = append(dims, d)
			}
		}
	}
	return dims
}

// checkColReductions runs seeded random reductions over dim sets, eager and
// compiled, on dev, against float64 references.
func checkColReductions(t *testing.T, dev tensor.Device, cases int) {
	rng := rand.New(rand.NewPCG(16, 2))
	g := tensor.NewGenerator(7)
	tol := map[tensor.DType]float64{tensor.Float64: 1e-9, tensor.Float32: 2e-5, tensor.Float16: 4e-3, tensor.BFloat16: 3e-2}
	floats := []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16}
	// Shapes that split the reduced range across blocks, or have few
	// outputs, come first; then random ones.
	fixed := []struct{ shape, dims []int }{
		{[]int{1 << 16, 4}, []int{0}},
		{[]int{3, 100_003}, []int{0}},
		{[]int{8, 4097, 5}, []int{1}},
		{[]int{1023, 3, 33}, []int{0, 2}},
		{[]int{4097, 64}, []int{0}},
	}
	for c := range cases + len(fixed) {
		var shape, dims []int
		if c < len(fixed) {
			shape, dims = fixed[c].shape, fixed[c].dims
		} else {
			shape = randomShape(rng)
			dims = randomDims(rng, len(shape))
		}
		one := []int{rng.IntN(len(shape))}
		if c < len(fixed) {
			one = dims[:1]
		}
		keep := rng.IntN(2) == 0
		permute := rng.IntN(2) == 0
		integer := rng.IntN(5) == 0
		dt := floats[rng.IntN(len(floats))]
		if integer {
			dt = []tensor.DType{tensor.Int32, tensor.Int64}[rng.IntN(2)]
		}
		sum := func(x *tensor.Tensor) *tensor.Tensor {
			if keep {
				return x.SumKeepDim(dims...)
			}
			return x.Sum(dims...)
		}
		ops := []colCase{
			{name: "sum", dims: dims, keep: keep, f: sum, ref: sumRef, integer: integer},
			{name: "max", dims: dims, keep: keep, f: func(x *tensor.Tensor) *tensor.Tensor {
				if keep {
					return x.MaxKeepDim(dims...)
				}
				return x.Max(dims...)
			}, ref: maxRef, integer: integer},
			{name: "argmax", dims: one, keep: keep, f: func(x *tensor.Tensor) *tensor.Tensor { return x.ArgMax(one[0], keep) }, ref: argMaxRef, integer: true},
			{name: "argmin", dims: one, keep: !keep, f: func(x *tensor.Tensor) *tensor.Tensor { return x.ArgMin(one[0], !keep) }, ref: argMinRef, integer: true},
		}
		if !integer {
			ops = append(ops,
				colCase{name: "mean", dims: dims, keep: keep, f: func(x *tensor.Tensor) *tensor.Tensor {
					if keep {
						return x.MeanKeepDim(dims...)
					}
					return x.Mean(dims...)
				}, ref: meanRef},
				colCase{name: "var", dims: dims, keep: keep, f: func(x *tensor.Tensor) *tensor.Tensor { return x.Var(dims, 1, keep) }, ref: varRef},
				colCase{name: "centred sum", dims: dims, keep: keep, f: func(x *tensor.Tensor) *tensor.Tensor {
					return sum(x.Sub(x.MeanKeepDim(dims...)).Mul(x))
				}, ref: centredRef},
				colCase{name: "softmax", dims: one, f: func(x *tensor.Tensor) *tensor.Tensor { return x.Softmax(one[0]) }, perElement: true},
				colCase{name: "centre", dims: dims, f: func(x *tensor.Tensor) *tensor.Tensor { return x.Sub(x.MeanKeepDim(dims...)) }, perElement: true},
			)
		}
		x := randomInput(rng, g, shape, dt, permute, dev)
		vals := x.Float64s()
		for _, op := range ops {
			if op.name == "var" {
				n := 1
				for _, d := range op.dims {
					n *= shape[d]
				}
				if n < 2 {
					continue // the variance of one value is NaN, checked elsewhere
				}
			}
			rows := reduceRef(vals, shape, op.dims)
			var want, mag []float64
			if op.perElement {
				// The result has x's shape; compare in x's order.
				want = make([]float64, len(vals))
				if op.name == "softmax" {
					softmaxInto(want, vals, shape, op.dims[0])
				} else {
					mag = centreInto(want, vals, shape, op.dims)
				}
			} else {
				for _, r := range rows {
					v, m := op.ref(r, len(r))
					want, mag = append(want, v), append(mag, m)
				}
			}
			compiled := tensor.Compile(op.f)
			for _, mode := range []string{"eager", "compiled"} {
				name := fmt.Sprintf("case %d: %s of %v %v over %v (keep %v, permuted %v) %s", c, op.name, dt, shape, op.dims, op.keep, permute, mode)
				var got *tensor.Tensor
				if mode == "eager" {
					got = op.f(x)
				} else {
					got = compiled(x)
				}
				if got.Device() != dev {
					t.Fatalf("%s: result on %v", name, got.Device())
				}
				wantShape := shape
				if !op.perElement {
					wantShape = ir.ReduceShape(shape, op.dims, op.keep)
				}
				if !slices.Equal(got.Shape(), wantShape) {
					t.Fatalf("%s: shape %v, want %v", name, got.Shape(), wantShape)
				}
				h := got.Float64s()
				if again := op.f(x).Float64s(); mode == "eager" && !slices.Equal(again, h) && !slices.ContainsFunc(h, math.IsNaN) {
					t.Errorf("%s: a second run differs", name)
				}
				for i := range want {
					var m float64
					if mag != nil {
						m = mag[i]
					}
					bad := h[i] != want[i]
					if !op.integer {
						bad = !(math.Abs(h[i]-want[i]) <= tol[dt]*(math.Abs(want[i])+m+1e-30) || math.IsNaN(h[i]) && math.IsNaN(want[i]))
					}
					if bad {
						t.Errorf("%s: element %d is %v, want %v", name, i, h[i], want[i])
						break
					}
				}
			}
		}
	}
}

// centreInto writes x - mean(x over dims) into out and returns each
// element's tolerance scale (the mean's magnitude).
func centreInto(out, vals []float64, shape, dims []int) []float64 {
	rows := reduceRef(vals, shape, dims)
	means := make([]float64, len(rows))
	for o, r := range rows {
		means[o], _ = meanRef(r, len(r))
	}
	mag := make([]float64, len(vals))
	outOf := keptIndex(shape, dims)
	for i, v := range vals {
		o := outOf(i)
		out[i], mag[i] = v-means[o], math.Abs(v)+math.Abs(means[o])
	}
	return mag
}

// softmaxInto writes the softmax of vals (shape) along dim into out.
func softmaxInto(out, vals []float64, shape []int, dim int) {
	inner := 1
	for _, n := range shape[dim+1:] {
		inner *= n
	}
	n := shape[dim]
	row, res := make([]float64, n), make([]float64, n)
	for base := range len(vals) {
		if (base/inner)%n != 0 {
			continue // not the first element of its line along dim
		}
		for j := range n {
			row[j] = vals[base+j*inner]
		}
		softmaxRow(res, row)
		for j := range n {
			out[base+j*inner] = res[j]
		}
	}
}

// Reductions over any dim set (sums, means, max, variance, a reduction
// with a prologue reading another, softmax, centring by the mean, argmax,
// argmin) of seeded random
// shapes of rank 1 to 5, permuted inputs, every floating dtype and the
// integer ones, keepdim on and off, eager and compiled, match float64
// references on the CPU.
func TestColReductionsMatchReference(t *testing.T) {
	checkColReductions(t, tensor.CPU, 40)
}

// The same on a GPU: the column kernels (eager and compiled).
func TestGPUColReductionsMatchReference(t *testing.T) {
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
	checkColReductions(t, tensor.CUDA(0), 12)
}

// A variance over dims 0 and 2, a softmax over dim 0 and a mean over a
// middle dim each compile to one row step that reduces those dims, also
// when the second compile rebuilds the regions from the cached layout.
func TestStepsShowDimsRegions(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   *ir.Op
		a    ir.Attrs
		dims []int
	}{
		{"var [0 2]", ir.OpVar, ir.Attrs{Dims: []int{0, 2}, Scalars: []float64{1}}, []int{0, 2}},
		{"softmax 0", ir.OpSoftmax, ir.Attrs{Dim: 0}, []int{0}},
		{"mean 1", ir.OpMean, ir.Attrs{Dims: []int{1}}, []int{1}},
	} {
		g := &ir.Graph{}
		x := g.Input([]int{6, 7, 8}, ir.Float32, ir.CPU, "x")
		y, err := g.Call(tc.op, tc.a, "", x)
		if err != nil {
			t.Fatal(err)
		}
		g.Outputs = []*ir.Node{y}
		if _, err := ir.Decompose(g); err != nil {
			t.Fatal(err)
		}
		for _, pass := range []string{"partitioned", "from the cached layout"} {
			before := stats.Partitions.Load()
			p, err := program.Compile(g, program.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if partitioned := stats.Partitions.Load() > before; partitioned != (pass == "partitioned") {
				t.Errorf("%s, %s: partitioned %v", tc.name, pass, partitioned)
			}
			steps, _ := program.Steps(p)
			if len(steps) != 1 || steps[0].Kind != program.RowStep || !slices.Equal(steps[0].Region.Row.Dims, tc.dims) {
				var desc []string
				for _, s := range steps {
					desc = append(desc, s.Region.String())
				}
				t.Errorf("%s, %s: steps %v, want one row step over dims %v", tc.name, pass, desc, tc.dims)
			}
		}
	}
}
