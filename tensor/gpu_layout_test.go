package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// layoutOperand makes a GPU view of logical shape (size 1 on broadcast
// dims) in dtype dt, laid out as r picks: its dims permuted in memory,
// one of them narrowed at an offset or stepped by 2, over small integers.
// It returns the view and its values in logical order (float64).
func layoutOperand(r *rand.Rand, dt DType, shape []int) (*Tensor, []float64) {
	rank := len(shape)
	perm := r.Perm(rank) // base dim i holds logical dim perm[i]
	if r.IntN(3) == 0 {
		for i := range perm {
			perm[i] = i
		}
	}
	base := make([]int, rank)
	for i, d := range perm {
		base[i] = shape[d]
	}
	mode, dim := r.IntN(3), r.IntN(max(rank, 1))
	switch {
	case rank == 0:
	case mode == 1: // narrowed at an offset
		base[dim] += 1 + r.IntN(3)
	case mode == 2: // every other element
		base[dim] = 2*base[dim] - 1
	}
	n := 1
	for _, s := range base {
		n *= s
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = float64(r.IntN(17) - 8)
	}
	mk := func(d Device) *Tensor {
		t := FromSlice(vals, base...).To(dt).ToDevice(d)
		switch {
		case rank == 0:
		case mode == 1:
			t = t.Narrow(dim, base[dim]-shape[perm[dim]], shape[perm[dim]])
		case mode == 2:
			t = t.Slice(dim, 0, base[dim], 2)
		}
		inv := make([]int, rank)
		for i, d := range perm {
			inv[d] = i
		}
		return t.Permute(inv...)
	}
	// The values in logical order, read on the CPU through the same view.
	return mk(CUDA(0)), mk(CPU).To(Float64).Contiguous().Float64s()
}

// GPU pointwise kernels compute the right values over random layouts,
// eager and compiled: ranks 1 to 5, sizes 1 to 4097, operands permuted,
// narrowed at offsets, stepped and broadcast along random dims, outputs
// written into permuted views, a compiled horizontal group's two outputs,
// in every dtype (values are small integers, exact in all of them, checked
// against plain float64 loops).
func TestGPUPointwiseLayouts(t *testing.T) {
	requireGPU(t)
	r := rand.New(rand.NewPCG(16, 3))
	sizes := []int{1, 2, 3, 4, 5, 16, 33, 64, 129, 1023, 4097}
	dtypes := []DType{Float32, Float64, Float16, BFloat16, Int32, Int64}
	f := func(xs ...*Tensor) *Tensor { return xs[0].Mul(xs[1]).Add(xs[2]) }
	kinds := map[string]int{}
	for ci := range 120 {
		rank := 1 + r.IntN(5)
		var shape []int
		n := 1
		for range rank {
			s := sizes[r.IntN(len(sizes))]
			if n*s > 1<<20 {
				s = 1 + r.IntN(3)
			}
			shape = append(shape, s)
			n *= s
		}
		if ci%10 == 0 {
			shape, n, rank = []int{999_983}, 999_983, 1
		}
		dt := dtypes[ci%len(dtypes)]
		var xs []*Tensor
		var vals [][]float64
		var shapes [][]int
		for i := range 3 {
			s := append([]int(nil), shape...)
			if i > 0 {
				for d := range s {
					if r.IntN(3) == 0 {
						s[d] = 1
					}
				}
			}
			x, v := layoutOperand(r, dt, s)
			xs, vals, shapes = append(xs, x), append(vals, v), append(shapes, s)
		}
		// The references: a*b + c and a - c, by broadcasting index math.
		want, want2, want3 := make([]float64, n), make([]float64, n), make([]float64, n)
		idx := make([]int, rank)
		for e := range n {
			rem := e
			for d := rank - 1; d >= 0; d-- {
				idx[d] = rem % shape[d]
				rem /= shape[d]
			}
			var a [3]float64
			for i := range 3 {
				o := 0
				for d := range rank {
					o = o*shapes[i][d] + idx[d]%shapes[i][d]
				}
				a[i] = vals[i][o]
			}
			want[e], want2[e] = a[0]*a[1]+a[2], a[0]-a[2]
			if a[0] > a[2] {
				want3[e] = 1
			}
		}
		name := fmt.Sprintf("case %d %v %v", ci, dt, shape)
		check := func(how string, got *Tensor, want []float64) {
			t.Helper()
			if (got.DType() != dt && got.DType() != Bool) || fmt.Sprint(got.Shape()) != fmt.Sprint(shape) {
				t.Fatalf("%s %s: %v %v", name, how, got.DType(), got.Shape())
			}
			for e, g := range got.Float64s() {
				if g != want[e] {
					t.Errorf("%s %s: element %d is %v, want %v (operand strides %v %v %v)", name, how, e, g, want[e],
						xs[0].Strides(), xs[1].Strides(), xs[2].Strides())
					return
				}
			}
		}
		// Compiled afresh per case: each case is a new signature.
		fc := Compile(f, WithBackend("inductor"))
		group := Compile(func(xs ...*Tensor) []*Tensor {
			return []*Tensor{xs[0].Mul(xs[1]).Add(xs[2]), xs[0].Sub(xs[2])}
		}, WithBackend("inductor"))
		check("eager", f(xs...), want)
		check("bool eager", xs[0].Gt(xs[2]), want3)
		check("compiled", fc(xs...), want)
		if ci%3 == 0 {
			gs := group(xs...)
			check("group out0", gs[0], want)
			check("group out1", gs[1], want2)
		}
		// Written into a permuted view of a fresh tensor.
		perm := r.Perm(rank)
		base := make([]int, rank)
		for i, d := range perm {
			base[i] = shape[d]
		}
		inv := make([]int, rank)
		for i, d := range perm {
			inv[d] = i
		}
		dst := Zeros(dt, base...).ToDevice(CUDA(0)).Permute(inv...)
		dst.Copy(f(xs...))
		check("into a permuted view", dst, want)
		bv := Zeros(Bool, base...).ToDevice(CUDA(0)).Permute(inv...)
		bv.Copy(xs[0].Gt(xs[2]))
		check("bool view", bv.LogicalAnd(bv), want3)
		kinds[fmt.Sprint(dt)]++
	}
	t.Logf("cases per dtype: %v", kinds)
}

// A compiled program's steps keep the launch plan of their last call and
// plan again when a call's tensors lie otherwise: views at other offsets
// (other vector alignments), taken in turn, give the eager results on
// every call, for pointwise, row and column kernels.
func TestGPUCompiledPlansFollowLayouts(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	fns := []struct {
		name string
		f    func(a, b *Tensor) *Tensor
	}{
		{"pointwise", func(a, b *Tensor) *Tensor { return a.Mul(b).AddScalar(1) }},
		{"row", func(a, b *Tensor) *Tensor { return a.Mul(b).Softmax(-1) }},
		{"column", func(a, b *Tensor) *Tensor { return a.Mul(b).Sum(0) }},
		{"column-root", func(a, b *Tensor) *Tensor { return a.Add(b).Softmax(0) }},
	}
	for _, dt := range []DType{Float32, BFloat16} {
		base := Randn(3, Float32, 37, 1030).To(dt).ToDevice(dev)
		other := Randn(4, Float32, 37, 1030).To(dt).ToDevice(dev)
		for _, c := range fns {
			cf := Compile(c.f)
			for call, off := range []int{0, 1, 0, 3, 2, 2, 1} {
				a, b := base.Narrow(1, off, 1024), other.Narrow(1, 3-off, 1024)
				tol := 1e-5
				if dt == BFloat16 {
					tol = 2e-2
				}
				matchesEager(t, fmt.Sprintf("%s %v call %d (offsets %d, %d)", c.name, dt, call, off, 3-off), cf(a, b), c.f(a, b), tol)
			}
		}
	}
}

// Reductions over short rows (many rows of up to 16 elements) run as
// column kernels, a thread a row, and softmaxes and norms in the row
// kernels; compiled results match eager ones for each, at row lengths on
// both sides of the switch.
func TestGPUShortRows(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	fns := []struct {
		name string
		f    func(x, w *Tensor) *Tensor
	}{
		{"max", func(x, _ *Tensor) *Tensor { return x.MulScalar(0.5).Max(-1) }},
		{"softmax", func(x, _ *Tensor) *Tensor { return x.Softmax(-1) }},
		{"rmsnorm", func(x, w *Tensor) *Tensor { return x.RMSNorm([]int{x.Shape()[1]}, w, 1e-6) }},
	}
	for _, dt := range []DType{Float32, BFloat16, Float16} {
		for _, R := range []int{2, 5, 9, 16, 17} {
			x := Randn(uint64(R), Float32, 20011, R).To(dt).ToDevice(dev)
			w := Randn(uint64(R+1), Float32, R).To(dt).ToDevice(dev)
			for _, c := range fns {
				tol := map[DType]float64{Float32: 1e-5, BFloat16: 2e-2, Float16: 2e-3}[dt]
				matchesEager(t, fmt.Sprintf("%s %v rows of %d", c.name, dt, R), Compile(c.f)(x, w), c.f(x, w), tol)
			}
		}
	}
}

// matchesEager fails the test unless every element of got lies within
// tol of want's, relative to the element's magnitude where it exceeds 1.
func matchesEager(t *testing.T, what string, got, want *Tensor, tol float64) {
	t.Helper()
	g, w := got.To(Float64).Float64s(), want.To(Float64).Float64s()
	for i := range w {
		if d := math.Abs(g[i] - w[i]); d > tol*max(1, math.Abs(w[i])) {
			t.Fatalf("%s: element %d is %g, eager %g", what, i, g[i], w[i])
		}
	}
}
