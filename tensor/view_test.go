package tensor

import (
	"fmt"
	"testing"
)

// refView returns the values of a view of a row-major base: for every
// index of the view's shape in row-major order, src maps it to the base
// index it reads.
func refView(base []float64, baseShape, shape []int, src func(ix []int) []int) []float64 {
	out := make([]float64, refNumel(shape))
	refForEach(shape, func(ix []int) {
		out[refIndex(shape, ix)] = base[refIndex(baseShape, src(ix))]
	})
	return out
}

func TestViewReshape(t *testing.T) {
	x := refRandInput(1, Float32, 2, 3, 4)
	xv := x.Float64s()
	for _, shape := range [][]int{{24}, {4, 6}, {2, 12}, {-1}, {3, -1}, {2, 3, 2, 2}, {1, 24, 1}, {-1, 1, 4}, {2, 3, 4}} {
		want := append([]int(nil), shape...) // the shape with -1 resolved
		for i, d := range want {
			if d == -1 {
				want[i] = 24 / -refNumel(shape)
			}
		}
		for _, op := range []string{"View", "Reshape"} {
			var v *Tensor
			if op == "View" {
				v = x.View(shape...)
			} else {
				v = x.Reshape(shape...)
			}
			// Same elements in row-major order, sharing storage.
			checkValues(t, fmt.Sprintf("%s %v", op, shape), v, Float32, want, xv, 0, nil)
			if !v.SharesStorage(x) {
				t.Errorf("%s %v of a contiguous tensor copied", op, shape)
			}
		}
	}
	// Reshape of a transposed tensor copies, View of it fails.
	tr := x.Transpose(0, 2) // [4, 3, 2]
	trv := tr.Float64s()
	r := tr.Reshape(24)
	checkValues(t, "Reshape transposed", r, Float32, []int{24}, trv, 0, nil)
	if r.SharesStorage(x) {
		t.Error("Reshape of a transposed tensor shares storage")
	}
	checkOpError(t, "View transposed", func() { tr.View(24) }, "View", "Contiguous")
	checkOpError(t, "View transposed 2", func() { tr.View(12, 2) }, "View")
	// Merging only the dims that stay contiguous is still a view.
	v := tr.View(4, 3, 2).Reshape(4, 6)
	checkValues(t, "Reshape transposed [4,6]", v, Float32, []int{4, 6}, trv, 0, nil)
	sp := tr.Unsqueeze(1).View(4, 1, 3, 2) // splitting/keeping size-1 dims is a view
	if !sp.SharesStorage(x) {
		t.Error("View keeping the layout copied")
	}
	// A slice with a step can be split (but not merged with its neighbour).
	s := x.Slice(2, 0, 4, 2) // [2, 3, 2], strides [12, 4, 2]
	sv := s.Float64s()
	checkValues(t, "View of stepped slice", s.View(6, 2), Float32, []int{6, 2}, sv, 0, nil)
	checkValues(t, "View of stepped slice flat", s.View(12), Float32, []int{12}, sv, 0, nil)
	if got := s.View(12).Strides(); !refSameShape(got, []int{2}) {
		t.Errorf("View of stepped slice strides %v, want [2]", got)
	}
	s2 := x.Slice(2, 0, 3, 1) // [2, 3, 3]: rows have gaps
	checkOpError(t, "View of slice with gaps", func() { s2.View(18) }, "View")
	checkValues(t, "Reshape of slice with gaps", s2.Reshape(-1), Float32, []int{18}, s2.Float64s(), 0, nil)

	checkOpError(t, "Reshape wrong numel", func() { x.Reshape(5, 5) }, "Reshape", "[2, 3, 4]")
	checkOpError(t, "Reshape two -1", func() { x.Reshape(-1, -1) }, "Reshape")
	checkOpError(t, "Reshape -1 does not divide", func() { x.Reshape(5, -1) }, "Reshape")
	checkOpError(t, "View wrong numel", func() { x.View(25) }, "Reshape")
	// Scalars and empty tensors.
	sc := Scalar(3, Float64)
	checkValues(t, "Reshape scalar", sc.Reshape(1, 1), Float64, []int{1, 1}, []float64{3}, 0, nil)
	checkValues(t, "Reshape to scalar", FromSlice([]float64{5}).Reshape(), Float64, []int{}, []float64{5}, 0, nil)
	checkValues(t, "Reshape empty", Zeros(Float32, 0, 3).Reshape(3, -1, 2), Float32, []int{3, 0, 2}, []float64{}, 0, nil)
}

func TestTransposePermute(t *testing.T) {
	x := refRandInput(2, Int64, 2, 3, 4)
	xv := x.Float64s()
	bs := []int{2, 3, 4}
	for _, p := range [][2]int{{0, 1}, {0, 2}, {1, 2}, {-1, 0}, {1, 1}} {
		d0, d1 := (p[0]+3)%3, (p[1]+3)%3
		shape := append([]int(nil), bs...)
		shape[d0], shape[d1] = shape[d1], shape[d0]
		want := refView(xv, bs, shape, func(ix []int) []int {
			s := append([]int(nil), ix...)
			s[d0], s[d1] = s[d1], s[d0]
			return s
		})
		tr := x.Transpose(p[0], p[1])
		checkValues(t, fmt.Sprintf("Transpose %v", p), tr, Int64, shape, want, 0, nil)
		if !tr.SharesStorage(x) {
			t.Error("Transpose copied")
		}
	}
	for _, perm := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}, {-1, 0, 1}} {
		norm := make([]int, 3)
		for i, d := range perm {
			norm[i] = (d + 3) % 3
		}
		shape := []int{bs[norm[0]], bs[norm[1]], bs[norm[2]]}
		want := refView(xv, bs, shape, func(ix []int) []int {
			s := make([]int, 3)
			for i, d := range norm {
				s[d] = ix[i]
			}
			return s
		})
		checkValues(t, fmt.Sprintf("Permute %v", perm), x.Permute(perm...), Int64, shape, want, 0, nil)
	}
	// T swaps the last two dims; a 1-D tensor is returned as is.
	m := refRandInput(3, Float32, 3, 5)
	mv := m.Float64s()
	want := refView(mv, []int{3, 5}, []int{5, 3}, func(ix []int) []int { return []int{ix[1], ix[0]} })
	checkValues(t, "T", m.T(), Float32, []int{5, 3}, want, 0, nil)
	if st := m.T().Strides(); !refSameShape(st, []int{1, 5}) {
		t.Errorf("T strides %v, want [1 5]", st)
	}
	if v := FromSlice([]float32{1, 2}); v.T() != v {
		t.Error("T of a 1-D tensor is not the tensor itself")
	}
	checkValues(t, "T 3-D", x.T(), Int64, []int{2, 4, 3}, refView(xv, bs, []int{2, 4, 3}, func(ix []int) []int { return []int{ix[0], ix[2], ix[1]} }), 0, nil)
	checkOpError(t, "Permute repeat", func() { x.Permute(0, 0, 1) }, "Permute")
	checkOpError(t, "Permute short", func() { x.Permute(0, 1) }, "Permute")
	checkOpError(t, "Transpose dim", func() { x.Transpose(0, 3) }, "Transpose")
}

func TestExpand(t *testing.T) {
	x := refRandInput(4, Float16, 3, 1)
	xv := x.Float64s()
	e := x.Expand(2, 3, 4)
	want := refView(xv, []int{3, 1}, []int{2, 3, 4}, func(ix []int) []int { return []int{ix[1], 0} })
	checkValues(t, "Expand", e, Float16, []int{2, 3, 4}, want, 0, nil)
	if st := e.Strides(); st[0] != 0 || st[2] != 0 || st[1] != 1 {
		t.Errorf("Expand strides %v, want [0 1 0]", st)
	}
	if !e.SharesStorage(x) {
		t.Error("Expand copied")
	}
	checkValues(t, "Expand -1", x.Expand(-1, 5), Float16, []int{3, 5},
		refView(xv, []int{3, 1}, []int{3, 5}, func(ix []int) []int { return []int{ix[0], 0} }), 0, nil)
	checkValues(t, "ExpandAs", x.ExpandAs(Zeros(Int32, 3, 2)), Float16, []int{3, 2},
		refView(xv, []int{3, 1}, []int{3, 2}, func(ix []int) []int { return []int{ix[0], 0} }), 0, nil)
	// A write to the base is seen in every repeated position.
	x.Set(8, 1, 0)
	for k := range 4 {
		if e.At(1, 1, k) != 8 || e.At(0, 1, k) != 8 {
			t.Fatalf("Expand does not alias its base")
		}
	}
	checkOpError(t, "Expand non-1", func() { x.Expand(3, 4, 2) }, "Expand")
	checkOpError(t, "Expand fewer dims", func() { x.Expand(3) }, "Expand")
	// A scalar expands to anything.
	checkValues(t, "Expand scalar", Scalar(2, Int32).Expand(2, 2), Int32, []int{2, 2}, []float64{2, 2, 2, 2}, 0, nil)
}

func TestSqueezeUnsqueeze(t *testing.T) {
	x := refRandInput(5, Float64, 1, 3, 1, 2)
	xv := x.Float64s()
	cases := []struct {
		dims  []int
		shape []int
	}{
		{nil, []int{3, 2}},
		{[]int{0}, []int{3, 1, 2}},
		{[]int{2}, []int{1, 3, 2}},
		{[]int{-2}, []int{1, 3, 2}},
		{[]int{1}, []int{1, 3, 1, 2}}, // not size 1: kept
		{[]int{0, 2}, []int{3, 2}},
	}
	for _, c := range cases {
		s := x.Squeeze(c.dims...)
		checkValues(t, fmt.Sprintf("Squeeze %v", c.dims), s, Float64, c.shape, xv, 0, nil)
		if !s.SharesStorage(x) {
			t.Error("Squeeze copied")
		}
	}
	y := refRandInput(6, Float64, 3, 2)
	yv := y.Float64s()
	for _, c := range []struct {
		dim   int
		shape []int
	}{{0, []int{1, 3, 2}}, {1, []int{3, 1, 2}}, {2, []int{3, 2, 1}}, {-1, []int{3, 2, 1}}, {-3, []int{1, 3, 2}}} {
		u := y.Unsqueeze(c.dim)
		checkValues(t, fmt.Sprintf("Unsqueeze %d", c.dim), u, Float64, c.shape, yv, 0, nil)
		if !u.IsContiguous() {
			t.Errorf("Unsqueeze %d of a contiguous tensor is not contiguous: strides %v", c.dim, u.Strides())
		}
	}
	// Unsqueeze of a transposed tensor keeps the layout.
	tu := y.T().Unsqueeze(1)
	checkValues(t, "Unsqueeze transposed", tu, Float64, []int{2, 1, 3},
		refView(yv, []int{3, 2}, []int{2, 1, 3}, func(ix []int) []int { return []int{ix[2], ix[0]} }), 0, nil)
	checkOpError(t, "Unsqueeze dim", func() { y.Unsqueeze(3) }, "Unsqueeze")
	checkOpError(t, "Squeeze dim", func() { y.Squeeze(2) }, "Squeeze")
	checkValues(t, "Squeeze to scalar", FromSlice([]float64{4}, 1, 1).Squeeze(), Float64, []int{}, []float64{4}, 0, nil)
}

func TestSlice(t *testing.T) {
	x := refRandInput(7, Int32, 4, 10)
	xv := x.Float64s()
	cases := []struct {
		dim, start, stop, step int
	}{
		{1, 0, 10, 1},
		{1, 2, 8, 3},
		{1, 1, 10, 2},
		{1, -3, 10, 1},    // negative start
		{1, -100, 3, 1},   // clamped start
		{1, 5, 100, 2},    // clamped stop
		{1, 0, -1, 4},     // negative stop
		{1, 7, 3, 1},      // empty
		{1, 10, 20, 1},    // empty past the end
		{0, 1, 4, 2},      // dim 0
		{-2, -1, 4, 1},    // negative dim
		{-1, -10, -5, 10}, // one element
	}
	for _, c := range cases {
		d := (c.dim + 2) % 2
		n := []int{4, 10}[d]
		clamp := func(i int) int {
			if i < 0 {
				i += n
			}
			return min(max(i, 0), n)
		}
		var picked []int
		for i := clamp(c.start); i < clamp(c.stop); i += c.step {
			picked = append(picked, i)
		}
		shape := []int{4, 10}
		shape[d] = len(picked)
		want := refView(xv, []int{4, 10}, shape, func(ix []int) []int {
			s := append([]int(nil), ix...)
			s[d] = picked[ix[d]]
			return s
		})
		sl := x.Slice(c.dim, c.start, c.stop, c.step)
		checkValues(t, fmt.Sprintf("Slice %+v", c), sl, Int32, shape, want, 0, nil)
		if !sl.SharesStorage(x) {
			t.Error("Slice copied")
		}
	}
	// Slices of slices, and of a transposed tensor.
	ss := x.Slice(1, 1, 10, 2).Slice(1, 1, 5, 2).Slice(0, 1, 3, 1) // cols 3, 7; rows 1, 2
	checkValues(t, "Slice of slice", ss, Int32, []int{2, 2}, []float64{xv[13], xv[17], xv[23], xv[27]}, 0, nil)
	ts := x.T().Slice(0, 8, 10, 1) // [2, 4]: columns 8 and 9
	checkValues(t, "Slice of transpose", ts, Int32, []int{2, 4},
		refView(xv, []int{4, 10}, []int{2, 4}, func(ix []int) []int { return []int{ix[1], ix[0] + 8} }), 0, nil)
	checkOpError(t, "Slice step 0", func() { x.Slice(1, 0, 5, 0) }, "Slice", "step")
	checkOpError(t, "Slice negative step", func() { x.Slice(1, 5, 0, -1) }, "Slice")
	checkOpError(t, "Slice dim", func() { x.Slice(2, 0, 1, 1) }, "Slice")
}

func TestFlatten(t *testing.T) {
	x := refRandInput(8, Float32, 2, 3, 4, 5)
	xv := x.Float64s()
	for _, c := range []struct {
		start, end int
		shape      []int
	}{
		{0, -1, []int{120}},
		{1, 2, []int{2, 12, 5}},
		{0, 1, []int{6, 4, 5}},
		{-2, -1, []int{2, 3, 20}},
		{2, 2, []int{2, 3, 4, 5}},
	} {
		f := x.Flatten(c.start, c.end)
		checkValues(t, fmt.Sprintf("Flatten %d %d", c.start, c.end), f, Float32, c.shape, xv, 0, nil)
		if !f.SharesStorage(x) {
			t.Error("Flatten of a contiguous tensor copied")
		}
	}
	// Flatten of a permuted tensor copies where it must.
	p := x.Permute(3, 1, 0, 2)
	pv := p.Float64s()
	checkValues(t, "Flatten permuted", p.Flatten(0, -1), Float32, []int{120}, pv, 0, nil)
	checkValues(t, "Flatten permuted partial", p.Flatten(1, 2), Float32, []int{5, 6, 4}, pv, 0, nil)
	checkValues(t, "Flatten scalar", Scalar(1, Float32).Flatten(0, -1), Float32, []int{1}, []float64{1}, 0, nil)
	checkOpError(t, "Flatten start > end", func() { x.Flatten(2, 1) }, "Flatten")
}

func TestContiguous(t *testing.T) {
	x := refRandInput(9, BFloat16, 3, 4)
	if c := x.Contiguous(); c != x {
		t.Error("Contiguous of a contiguous tensor is not the tensor itself")
	}
	// A contiguous view at an offset is returned as is, too.
	n := x.Narrow(0, 1, 2)
	if c := n.Contiguous(); c != n {
		t.Error("Contiguous of a contiguous narrowed view is not the view itself")
	}
	tr := x.T()
	if tr.IsContiguous() {
		t.Fatal("a transpose is contiguous")
	}
	c := tr.Contiguous()
	checkValues(t, "Contiguous of transpose", c, BFloat16, []int{4, 3}, tr.Float64s(), 0, nil)
	if !c.IsContiguous() || c.SharesStorage(x) {
		t.Errorf("Contiguous of a transpose: contiguous %v, shares storage %v", c.IsContiguous(), c.SharesStorage(x))
	}
	if st := c.Strides(); !refSameShape(st, []int{3, 1}) {
		t.Errorf("Contiguous strides %v", st)
	}
	// The copy does not alias: writing to it leaves x alone.
	before := x.At(0, 0)
	c.Set(100, 0, 0)
	if x.At(0, 0) != before {
		t.Error("Contiguous copy aliases its source")
	}
	// Size-1 dims may have any stride and still count as contiguous.
	u := x.Narrow(0, 0, 1).T().Unsqueeze(0) // [1, 4, 1]
	if !u.Squeeze().IsContiguous() {
		t.Errorf("squeezed row is not contiguous: strides %v", u.Squeeze().Strides())
	}
	e := Zeros(Float32, 3, 1).Expand(3, 4)
	if e.IsContiguous() {
		t.Error("an expanded tensor is contiguous")
	}
	checkValues(t, "Contiguous of expand", e.Contiguous(), Float32, []int{3, 4}, make([]float64, 12), 0, nil)
}

func TestAliasing(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64} {
		base := Zeros(dt, 4, 6)
		ref := make([]float64, 24) // the reference contents of base
		expect := func(label string) {
			t.Helper()
			checkValues(t, label+" "+dt.String(), base, dt, []int{4, 6}, ref, 0, nil)
		}
		// Set through a stepped slice.
		sl := base.Slice(1, 1, 6, 2) // columns 1, 3, 5
		sl.Set(5, 2, 1)
		ref[2*6+3] = 5
		expect("Set through Slice")
		// Fill through a transposed narrow.
		base.T().Narrow(1, 1, 2).Fill(7) // rows 1, 2 of base
		for c := range 6 {
			ref[6+c], ref[12+c] = 7, 7
		}
		expect("Fill through T().Narrow")
		// Copy a transposed source into a transposed destination.
		src := FromSlice([]float64{1, 2, 3, 4, 5, 6}, 2, 3)
		base.Narrow(0, 2, 2).Narrow(1, 3, 3).T().Copy(src.T())
		for i := range 2 {
			for j := range 3 {
				ref[(2+i)*6+3+j] = float64(i*3 + j + 1)
			}
		}
		expect("Copy through Narrow.T")
		// Copy a broadcast row into every other column of a slice.
		base.Slice(1, 0, 6, 2).Copy(FromSlice([]float64{-1, -2, -3}))
		for r := range 4 {
			for j := range 3 {
				ref[r*6+2*j] = float64(-1 - j)
			}
		}
		expect("broadcast Copy through Slice")
		// Writes to the base are seen through views made before them.
		p := base.Permute(1, 0).Select(0, 4) // column 4
		r := base.Reshape(24)
		base.Set(9, 3, 4)
		ref[3*6+4] = 9
		if p.At(3) != 9 || r.At(3*6+4) != 9 || sl.At(3, 2) != ref[3*6+5] {
			t.Errorf("%v: views do not see a write to the base", dt)
		}
		// Every view shares storage; a Contiguous copy and a new tensor do not.
		for _, v := range []*Tensor{sl, p, r, base.View(2, 12), base.Expand(2, 4, 6), base.Unsqueeze(0), base.Flatten(0, 1)} {
			if !v.SharesStorage(base) || !base.SharesStorage(v) {
				t.Errorf("%v: a view does not share storage", dt)
			}
		}
		if base.T().Contiguous().SharesStorage(base) || ZerosLike(base).SharesStorage(base) {
			t.Errorf("%v: a copy shares storage", dt)
		}
		expect("after all")
	}
	// Copy converts types and Fill through a bool view.
	b := Zeros(Bool, 2, 3)
	b.T().Select(0, 1).Fill(1)
	checkValues(t, "Fill bool column", b, Bool, []int{2, 3}, []float64{0, 1, 0, 0, 1, 0}, 0, nil)
	checkOpError(t, "Copy shape", func() { Zeros(Float32, 2, 3).Copy(Zeros(Float32, 2)) }, "Copy", "[2, 3]", "[2]")
	checkOpError(t, "Set index", func() { Zeros(Float32, 2, 3).Set(1, 2, 0) }, "Set")
	checkOpError(t, "Set rank", func() { Zeros(Float32, 2, 3).Set(1, 0) }, "Set")
}
