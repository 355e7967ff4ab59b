package tensor

import (
	"fmt"
	"testing"
)

// refMatMul is PyTorch's matmul on row-major float64 data, with its own
// shape logic: 1-D operands become a row (first) or a column (second)
// vector that is removed from the result, leading dims broadcast. It
// returns the result shape, the values and, per element, sum |a*b| (the
// scale of the rounding error).
func refMatMul(a []float64, as []int, b []float64, bs []int) ([]int, []float64, []float64) {
	av, bv := len(as) == 1, len(bs) == 1
	if av {
		as = []int{1, as[0]}
	}
	if bs1 := bs; bv {
		bs = []int{bs1[0], 1}
	}
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != k {
		panic("refMatMul: inner dims")
	}
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	rank := max(len(ab), len(bb))
	batch := make([]int, rank)
	for i := range rank {
		da, db := 1, 1
		if j := i - (rank - len(ab)); j >= 0 {
			da = ab[j]
		}
		if j := i - (rank - len(bb)); j >= 0 {
			db = bb[j]
		}
		if da != db && da != 1 && db != 1 {
			panic("refMatMul: batch dims")
		}
		batch[i] = max(da, db)
		if da == 0 || db == 0 {
			batch[i] = 0
		}
	}
	nb := refNumel(batch)
	out := make([]float64, nb*m*n)
	scale := make([]float64, nb*m*n)
	bidx := make([]int, rank)
	// batchOffset maps a broadcast batch index to an operand's matrix number.
	batchOffset := func(dims []int) int {
		o := 0
		for j, d := range dims {
			i := bidx[j+rank-len(dims)]
			if d == 1 {
				i = 0
			}
			o = o*d + i
		}
		return o
	}
	for p := range nb {
		rem := p
		for d := rank - 1; d >= 0; d-- {
			bidx[d] = rem % batch[d]
			rem /= batch[d]
		}
		ao, bo := batchOffset(ab)*m*k, batchOffset(bb)*k*n
		for i := range m {
			for j := range n {
				s, sa := 0.0, 0.0
				for q := range k {
					v := a[ao+i*k+q] * b[bo+q*n+j]
					s += v
					if v < 0 {
						sa -= v
					} else {
						sa += v
					}
				}
				out[(p*m+i)*n+j] = s
				scale[(p*m+i)*n+j] = sa
			}
		}
	}
	shape := append([]int(nil), batch...)
	if !av {
		shape = append(shape, m)
	}
	if !bv {
		shape = append(shape, n)
	}
	return shape, out, scale
}

func TestMatMul(t *testing.T) {
	cases := []struct{ a, b []int }{
		{[]int{1}, []int{1}},
		{[]int{3}, []int{3}},
		{[]int{1023}, []int{1023}},    // dot
		{[]int{3, 4}, []int{4}},       // matrix · vector
		{[]int{1023}, []int{1023, 5}}, // vector · matrix
		{[]int{1, 1}, []int{1, 1}},
		{[]int{3, 4}, []int{4, 5}},
		{[]int{3, 1023}, []int{1023, 5}},
		{[]int{1023, 3}, []int{3, 1}},
		{[]int{1, 3}, []int{3, 1023}},
		{[]int{2, 3, 4}, []int{2, 4, 5}},    // batched
		{[]int{2, 1, 3, 4}, []int{5, 4, 2}}, // broadcast batch → [2, 5, 3, 2]
		{[]int{4, 3, 4}, []int{4, 2}},       // batched · matrix
		{[]int{3}, []int{2, 3, 4}},          // vector · batched
		{[]int{2, 3, 4}, []int{4}},          // batched · vector
		{[]int{1, 2, 3}, []int{4, 1, 3, 2}}, // both broadcast
		{[]int{2, 0}, []int{0, 3}},          // empty inner dim: zeros
		{[]int{0, 3}, []int{3, 2}},          // empty rows
		{[]int{0, 3, 4}, []int{4, 2}},       // empty batch
	}
	types := []DType{Float32, Float64, Float16, BFloat16, Int32, Int64}
	for ci, c := range cases {
		for _, dt := range types {
			x := refRandInput(uint64(1000+ci), dt, c.a...)
			y := refRandInput(uint64(2000+ci), dt, c.b...)
			shape, want, scale := refMatMul(x.Float64s(), c.a, y.Float64s(), c.b)
			label := fmt.Sprintf("MatMul %v %v·%v", dt, c.a, c.b)
			checkValues(t, label, x.MatMul(y), dt, shape, want, refTolerance[dt], scale)
		}
	}
	if s := refRandInput(1, Float32, 2, 1, 3, 4).MatMul(refRandInput(2, Float32, 5, 4, 2)).Shape(); !refSameShape(s, []int{2, 5, 3, 2}) {
		t.Errorf("broadcast batch shape %v, want [2 5 3 2]", s)
	}
}

func TestMatMulNonContiguous(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64} {
		tol := refTolerance[dt]
		// Transposed operands: a is [1023, 3] viewed as [3, 1023].
		a := refRandInput(1, dt, 1023, 3).T()
		b := refRandInput(2, dt, 5, 1023).T()
		shape, want, scale := refMatMul(a.Float64s(), []int{3, 1023}, b.Float64s(), []int{1023, 5})
		checkValues(t, "MatMul transposed "+dt.String(), a.MatMul(b), dt, shape, want, tol, scale)

		// Contiguous views at an offset (a narrowed matrix, a selected batch).
		base := refRandInput(3, dt, 6, 4)
		n := base.Narrow(0, 2, 3) // rows 2..4, contiguous, offset 8
		w := refRandInput(4, dt, 4, 2)
		shape, want, scale = refMatMul(n.Float64s(), []int{3, 4}, w.Float64s(), []int{4, 2})
		checkValues(t, "MatMul offset view "+dt.String(), n.MatMul(w), dt, shape, want, tol, scale)
		bw := refRandInput(5, dt, 3, 4, 2).Select(0, 2)
		shape, want, scale = refMatMul(n.Float64s(), []int{3, 4}, bw.Float64s(), []int{4, 2})
		checkValues(t, "MatMul offset second "+dt.String(), n.MatMul(bw), dt, shape, want, tol, scale)

		// Sliced with a step, a permuted batch, an expanded operand.
		s := refRandInput(6, dt, 3, 10).Slice(1, 1, 10, 2) // [3, 5], stride 2
		v := refRandInput(7, dt, 5)
		shape, want, scale = refMatMul(s.Float64s(), []int{3, 5}, v.Float64s(), []int{5})
		checkValues(t, "MatMul strided · vector "+dt.String(), s.MatMul(v), dt, shape, want, tol, scale)
		p := refRandInput(8, dt, 4, 2, 3).Permute(1, 0, 2) // [2, 4, 3]
		q := refRandInput(9, dt, 3, 1).Expand(2, 3, 6)     // stride 0
		shape, want, scale = refMatMul(p.Float64s(), []int{2, 4, 3}, q.Float64s(), []int{2, 3, 6})
		checkValues(t, "MatMul permuted · expanded "+dt.String(), p.MatMul(q), dt, shape, want, tol, scale)
		// The dot of a vector view at an offset.
		d1 := refRandInput(10, dt, 4, 7).Select(0, 3)
		d2 := refRandInput(11, dt, 7, 4).Select(1, 1) // stride 4
		shape, want, scale = refMatMul(d1.Float64s(), []int{7}, d2.Float64s(), []int{7})
		checkValues(t, "MatMul dot of views "+dt.String(), d1.MatMul(d2), dt, shape, want, tol, scale)
	}
}

func TestMatMulPromotion(t *testing.T) {
	x := refRandInput(1, Int32, 3, 4)
	y := refRandInput(2, Float32, 4, 2)
	shape, want, scale := refMatMul(x.Float64s(), []int{3, 4}, y.Float64s(), []int{4, 2})
	checkValues(t, "MatMul int32·float32", x.MatMul(y), Float32, shape, want, 1e-5, scale)
	z := refRandInput(3, Float64, 4, 2)
	shape, want, scale = refMatMul(y.T().Float64s(), []int{2, 4}, z.Float64s(), []int{4, 2})
	checkValues(t, "MatMul float32·float64", y.T().MatMul(z), Float64, shape, want, 1e-10, scale)
	checkOpError(t, "MatMul bool", func() { Ones(Bool, 2, 2).MatMul(Ones(Bool, 2, 2)) }, "MatMul", "bool")
}

func TestMatMulErrors(t *testing.T) {
	cases := []struct {
		a, b  []int
		frags []string
	}{
		{[]int{3, 4}, []int{5, 2}, []string{"MatMul", "[3, 4]", "[5, 2]", "4 vs 5"}},
		{[]int{3}, []int{4}, []string{"MatMul", "[3]", "[4]"}},
		{[]int{2, 3}, []int{4}, []string{"MatMul", "[2, 3]", "[4]"}},
		{[]int{4}, []int{3, 2}, []string{"MatMul", "[4]", "[3, 2]"}},
		{[]int{2, 3, 4}, []int{3, 4, 5}, []string{"MatMul", "[2, 3, 4]", "[3, 4, 5]", "batch"}},
		{[]int{}, []int{3}, []string{"MatMul", "[]", "[3]"}},
	}
	for _, c := range cases {
		x, y := Zeros(Float32, c.a...), Zeros(Float32, c.b...)
		checkOpError(t, fmt.Sprintf("MatMul %v·%v", c.a, c.b), func() { x.MatMul(y) }, c.frags...)
	}
}

func TestLinear(t *testing.T) {
	cases := []struct{ x, w []int }{
		{[]int{3}, []int{5, 3}},
		{[]int{4, 3}, []int{5, 3}},
		{[]int{2, 4, 1023}, []int{7, 1023}},
		{[]int{1, 1}, []int{1, 1}},
		{[]int{3, 2, 8}, []int{1, 8}},
	}
	for ci, c := range cases {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int64} {
			x := refRandInput(uint64(3000+ci), dt, c.x...)
			w := refRandInput(uint64(4000+ci), dt, c.w...)
			b := refRandInput(uint64(5000+ci), dt, c.w[0])
			xv, wv, bv := x.Float64s(), w.Float64s(), b.Float64s()
			out, in := c.w[0], c.w[1]
			rows := len(xv) / in
			want := make([]float64, rows*out)
			wantB := make([]float64, rows*out)
			scale := make([]float64, rows*out)
			for r := range rows {
				for o := range out {
					s, sa := 0.0, 0.0
					for i := range in {
						v := xv[r*in+i] * wv[o*in+i]
						s += v
						if v < 0 {
							v = -v
						}
						sa += v
					}
					want[r*out+o] = s
					wantB[r*out+o] = s + bv[o]
					scale[r*out+o] = sa + 1
				}
			}
			shape := append(append([]int(nil), c.x[:len(c.x)-1]...), out)
			label := fmt.Sprintf("Linear %v x%v w%v", dt, c.x, c.w)
			checkValues(t, label, x.Linear(w, nil), dt, shape, want, refTolerance[dt], scale)
			checkValues(t, label+" bias", x.Linear(w, b), dt, shape, wantB, refTolerance[dt], scale)
		}
	}
	checkOpError(t, "Linear mismatch", func() { Zeros(Float32, 2, 3).Linear(Zeros(Float32, 4, 5), nil) }, "Linear", "[2, 3]", "[4, 5]")
	checkOpError(t, "Linear 3-D weight", func() { Zeros(Float32, 2, 3).Linear(Zeros(Float32, 1, 4, 3), nil) }, "Linear")
}
