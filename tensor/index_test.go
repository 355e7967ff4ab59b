package tensor

import (
	"fmt"
	"testing"
)

// refIndex returns the row-major flat index of idx in shape.
func refIndex(shape, idx []int) int {
	f := 0
	for d, i := range idx {
		f = f*shape[d] + i
	}
	return f
}

// refForEach calls f with every multi-index of shape in row-major order.
func refForEach(shape []int, f func(idx []int)) {
	n := refNumel(shape)
	idx := make([]int, len(shape))
	for flat := range n {
		rem := flat
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = rem % shape[d]
			rem /= shape[d]
		}
		f(idx)
	}
}

func refCat(vals [][]float64, shapes [][]int, dim int) ([]int, []float64) {
	if dim < 0 {
		dim += len(shapes[0])
	}
	out := append([]int(nil), shapes[0]...)
	out[dim] = 0
	for _, s := range shapes {
		out[dim] += s[dim]
	}
	res := make([]float64, refNumel(out))
	src := make([]int, len(out))
	refForEach(out, func(idx []int) {
		copy(src, idx)
		t := 0
		for src[dim] >= shapes[t][dim] {
			src[dim] -= shapes[t][dim]
			t++
		}
		res[refIndex(out, idx)] = vals[t][refIndex(shapes[t], src)]
	})
	return out, res
}

func TestCat(t *testing.T) {
	cases := []struct {
		shapes [][]int
		dim    int
	}{
		{[][]int{{3}, {1}, {1023}}, 0},
		{[][]int{{2, 3}, {4, 3}}, 0},
		{[][]int{{2, 3}, {2, 1}, {2, 5}}, 1},
		{[][]int{{2, 3, 4}, {2, 3, 1}}, -1},
		{[][]int{{2, 3, 4}, {2, 5, 4}}, -2},
		{[][]int{{2, 0}, {2, 3}}, 1}, // an empty part
		{[][]int{{4097, 3}, {1, 3}}, 0},
		{[][]int{{5}}, 0}, // a single tensor
	}
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool} {
		for ci, c := range cases {
			var ts []*Tensor
			var vals [][]float64
			for i, s := range c.shapes {
				x := refRandInput(uint64(100*ci+i), dt, s...)
				ts = append(ts, x)
				vals = append(vals, x.Float64s())
			}
			shape, want := refCat(vals, c.shapes, c.dim)
			checkValues(t, fmt.Sprintf("Cat %v %v dim %d", dt, c.shapes, c.dim), Cat(ts, c.dim), dt, shape, want, 0, nil)
		}
	}
}

func TestCatPromotionAndViews(t *testing.T) {
	promos := []struct {
		a, b, out DType
	}{
		{Float32, Int64, Float32},
		{Int32, Int64, Int64},
		{Bool, Int32, Int32},
		{Float16, BFloat16, Float32},
		{Float16, Float64, Float64},
		{Bool, Float16, Float16},
	}
	for _, p := range promos {
		a := refRandInput(1, p.a, 2, 3)
		b := refRandInput(2, p.b, 1, 3)
		shape, want := refCat([][]float64{a.Float64s(), b.Float64s()}, [][]int{{2, 3}, {1, 3}}, 0)
		checkValues(t, fmt.Sprintf("Cat %v+%v", p.a, p.b), Cat([]*Tensor{a, b}, 0), p.out, shape, want, 0, nil)
	}
	// Non-contiguous inputs: a transpose, a stepped slice, an expansion.
	a := refRandInput(3, Float32, 4, 3).T()                 // [3, 4]
	b := refRandInput(4, Float32, 3, 10).Slice(1, 0, 10, 4) // [3, 3]
	c := refRandInput(5, Float32, 3, 1).Expand(3, 2)        // [3, 2]
	shapes := [][]int{{3, 4}, {3, 3}, {3, 2}}
	vals := [][]float64{a.Float64s(), b.Float64s(), c.Float64s()}
	for _, dim := range []int{1, -1} {
		shape, want := refCat(vals, shapes, dim)
		checkValues(t, fmt.Sprintf("Cat views dim %d", dim), Cat([]*Tensor{a, b, c}, dim), Float32, shape, want, 0, nil)
	}
	// The result is a copy.
	out := Cat([]*Tensor{a, b}, 1)
	if out.SharesStorage(a) || out.SharesStorage(b) {
		t.Error("Cat shares storage with an input")
	}
	checkOpError(t, "Cat mismatch", func() { Cat([]*Tensor{Zeros(Float32, 2, 3), Zeros(Float32, 3, 3)}, 1) }, "Cat", "[2, 3]", "[3, 3]")
	checkOpError(t, "Cat rank", func() { Cat([]*Tensor{Zeros(Float32, 2, 3), Zeros(Float32, 3)}, 0) }, "Cat")
	checkOpError(t, "Cat dim", func() { Cat([]*Tensor{Zeros(Float32, 2, 3)}, 2) }, "Cat")
	checkOpError(t, "Cat none", func() { Cat(nil, 0) }, "Cat")
	checkOpError(t, "Cat scalars", func() { Cat([]*Tensor{Scalar(1, Float32), Scalar(2, Float32)}, 0) }, "Cat")
}

func TestStack(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool} {
		shape := []int{2, 3}
		var ts []*Tensor
		var vals [][]float64
		for i := range 4 {
			x := refRandInput(uint64(10+i), dt, shape...)
			if i == 2 {
				x = refRandInput(uint64(10+i), dt, 3, 2).T() // a non-contiguous one
			}
			ts = append(ts, x)
			vals = append(vals, x.Float64s())
		}
		for _, dim := range []int{0, 1, 2, -1, -3} {
			d := dim
			if d < 0 {
				d += 3
			}
			out := append(append(append([]int(nil), shape[:d]...), 4), shape[d:]...)
			want := make([]float64, refNumel(out))
			refForEach(out, func(idx []int) {
				src := append(append([]int(nil), idx[:d]...), idx[d+1:]...)
				want[refIndex(out, idx)] = vals[idx[d]][refIndex(shape, src)]
			})
			checkValues(t, fmt.Sprintf("Stack %v dim %d", dt, dim), Stack(ts, dim), dt, out, want, 0, nil)
		}
	}
	a, b := FromSlice([]int32{1, 2}), FromSlice([]float32{0.5, 1.5})
	checkValues(t, "Stack promotes", Stack([]*Tensor{a, b}, 0), Float32, []int{2, 2}, []float64{1, 2, 0.5, 1.5}, 0, nil)
	checkOpError(t, "Stack shapes", func() { Stack([]*Tensor{Zeros(Float32, 2), Zeros(Float32, 3)}, 0) }, "Stack", "[2]", "[3]")
	checkOpError(t, "Stack dim", func() { Stack([]*Tensor{Zeros(Float32, 2)}, 2) }, "Stack")
}

func TestSplitChunk(t *testing.T) {
	x := refRandInput(1, Float32, 5, 7)
	xv := x.Float64s()
	parts := x.Split([]int{2, 0, 4, 1}, 1)
	at := 0
	for i, p := range parts {
		n := []int{2, 0, 4, 1}[i]
		want := make([]float64, 0, 5*n)
		for r := range 5 {
			want = append(want, xv[r*7+at:r*7+at+n]...)
		}
		checkValues(t, fmt.Sprintf("Split part %d", i), p, Float32, []int{5, n}, want, 0, nil)
		if !p.SharesStorage(x) {
			t.Errorf("Split part %d is not a view", i)
		}
		at += n
	}
	// Writing into a part is seen by the base, and the other way round.
	parts[2].Set(42, 3, 1)
	if got := x.At(3, 2+1); got != 42 {
		t.Errorf("write through Split part: base sees %v", got)
	}
	parts[2].Fill(-1)
	for r := range 5 {
		for c := range 7 {
			want := xv[r*7+c]
			if c >= 2 && c < 6 {
				want = -1
			}
			if got := x.At(r, c); got != float64(float32(want)) {
				t.Fatalf("after Fill of Split part: x[%d,%d] = %v, want %v", r, c, got, want)
			}
		}
	}
	x.Set(7, 4, 6)
	if got := parts[3].At(4, 0); got != 7 {
		t.Errorf("write to base: Split part sees %v", got)
	}

	// Chunk along dim 0, last chunk smaller; dim -1.
	y := refRandInput(2, Int64, 7, 3)
	yv := y.Float64s()
	chunks := y.Chunk(3, 0)
	if len(chunks) != 3 {
		t.Fatalf("Chunk(3) of 7 rows gives %d chunks", len(chunks))
	}
	for i, c := range chunks {
		rows := min(3, 7-3*i)
		checkValues(t, fmt.Sprintf("Chunk %d", i), c, Int64, []int{rows, 3}, yv[9*i:9*i+3*rows], 0, nil)
	}
	chunks[2].Copy(FromSlice([]int{100, 200, 300}, 1, 3))
	checkValues(t, "Copy into Chunk seen by base", y.Select(0, 6), Int64, []int{3}, []float64{100, 200, 300}, 0, nil)
	cols := y.Chunk(2, -1)
	checkValues(t, "Chunk dim -1 last", cols[1], Int64, []int{7, 1}, y.Select(1, 2).Float64s(), 0, nil)

	checkOpError(t, "Split sizes", func() { x.Split([]int{3, 3}, 1) }, "Split", "[5, 7]")
	checkOpError(t, "Split negative", func() { x.Split([]int{8, -1}, 1) }, "Split")
	checkOpError(t, "Chunk zero", func() { x.Chunk(0, 0) }, "Chunk")
}

func TestGather(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool} {
		x := refRandInput(1, dt, 4, 5)
		xv := x.Float64s()
		// dim 0: out[i][j] = x[idx[i][j]][j]; the index may be smaller than
		// x outside dim, and larger along it.
		for _, tc := range []struct {
			dim   int
			shape []int
			lo    int64
			hi    int64
		}{
			{0, []int{6, 5}, -4, 4},
			{0, []int{2, 3}, 0, 4},
			{1, []int{4, 7}, -5, 5},
			{-1, []int{3, 2}, -5, 5},
			{1, []int{4, 0}, 0, 5},
		} {
			iv := NewGenerator(uint64(tc.shape[0]*10+tc.shape[1])).RandInt(tc.lo, tc.hi, tc.shape...)
			ivals := iv.Int64s()
			d := tc.dim
			if d < 0 {
				d += 2
			}
			size := []int{4, 5}[d]
			want := make([]float64, refNumel(tc.shape))
			refForEach(tc.shape, func(idx []int) {
				src := append([]int(nil), idx...)
				k := int(ivals[refIndex(tc.shape, idx)])
				if k < 0 {
					k += size
				}
				src[d] = k
				want[refIndex(tc.shape, idx)] = xv[refIndex([]int{4, 5}, src)]
			})
			label := fmt.Sprintf("Gather %v dim %d index %v", dt, tc.dim, tc.shape)
			checkValues(t, label, x.Gather(tc.dim, iv), dt, tc.shape, want, 0, nil)
			// Int32 indices.
			i32 := make([]int32, len(ivals))
			for i, v := range ivals {
				i32[i] = int32(v)
			}
			checkValues(t, label+" int32", x.Gather(tc.dim, FromSlice(i32, tc.shape...)), dt, tc.shape, want, 0, nil)
		}
	}
	// A non-contiguous source.
	x := refRandInput(2, Float64, 5, 4).T() // [4, 5]
	xv := x.Float64s()
	idx := FromSlice([]int{3, 0, -1, 2}, 2, 2)
	want := []float64{xv[0*5+3], xv[0*5+0], xv[1*5+4], xv[1*5+2]}
	checkValues(t, "Gather transposed dim 1", x.Gather(1, idx), Float64, []int{2, 2}, want, 0, nil)

	checkOpError(t, "Gather out of range", func() { x.Gather(1, FromSlice([]int{5}, 1, 1)) }, "Gather", "out of range")
	checkOpError(t, "Gather negative out of range", func() { x.Gather(0, FromSlice([]int{-5}, 1, 1)) }, "Gather", "out of range")
	checkOpError(t, "Gather rank", func() { x.Gather(0, FromSlice([]int{0})) }, "Gather")
	checkOpError(t, "Gather too big", func() { x.Gather(0, Zeros(Int64, 1, 6)) }, "Gather")
	checkOpError(t, "Gather float index", func() { x.Gather(0, Zeros(Float32, 1, 1)) }, "Gather")
}

func TestIndexSelect(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool} {
		x := refRandInput(1, dt, 4, 5, 3)
		xv := x.Float64s()
		shape := []int{4, 5, 3}
		for _, tc := range []struct {
			dim int
			idx []int
		}{
			{0, []int{3, 0, 0, -1, 2}},
			{1, []int{4}},
			{-1, []int{2, 1, 0, 1}},
			{1, []int{}},
		} {
			d := tc.dim
			if d < 0 {
				d += 3
			}
			out := append([]int(nil), shape...)
			out[d] = len(tc.idx)
			want := make([]float64, refNumel(out))
			refForEach(out, func(ix []int) {
				src := append([]int(nil), ix...)
				k := tc.idx[ix[d]]
				if k < 0 {
					k += shape[d]
				}
				src[d] = k
				want[refIndex(out, ix)] = xv[refIndex(shape, src)]
			})
			label := fmt.Sprintf("IndexSelect %v dim %d %v", dt, tc.dim, tc.idx)
			checkValues(t, label, x.IndexSelect(tc.dim, FromSlice(tc.idx)), dt, out, want, 0, nil)
			i32 := make([]int32, len(tc.idx))
			for i, v := range tc.idx {
				i32[i] = int32(v)
			}
			checkValues(t, label+" int32", x.IndexSelect(tc.dim, FromSlice(i32)), dt, out, want, 0, nil)
		}
	}
	x := refRandInput(1, Float32, 4, 5)
	checkOpError(t, "IndexSelect out of range", func() { x.IndexSelect(0, FromSlice([]int{4})) }, "IndexSelect", "out of range")
	checkOpError(t, "IndexSelect 2-D index", func() { x.IndexSelect(0, FromSlice([]int{0, 1}, 1, 2)) }, "IndexSelect")
	checkOpError(t, "IndexSelect bool index", func() { x.IndexSelect(0, FromSlice([]bool{true})) }, "IndexSelect")
}

func TestEmbedding(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int64} {
		const vocab, dim = 11, 6
		w := refRandInput(1, dt, vocab, dim)
		wv := w.Float64s()
		ids := []int{3, 0, 10, 3, 7, 1}
		want := make([]float64, 0, len(ids)*dim)
		for _, i := range ids {
			want = append(want, wv[i*dim:(i+1)*dim]...)
		}
		checkValues(t, "Embedding "+dt.String(), Embedding(FromSlice(ids, 2, 3), w), dt, []int{2, 3, dim}, want, 0, nil)
		i32 := make([]int32, len(ids))
		for i, v := range ids {
			i32[i] = int32(v)
		}
		checkValues(t, "Embedding int32 "+dt.String(), Embedding(FromSlice(i32, 2, 3), w), dt, []int{2, 3, dim}, want, 0, nil)
		checkValues(t, "Embedding 1-D "+dt.String(), Embedding(FromSlice(ids[:2]), w), dt, []int{2, dim}, want[:2*dim], 0, nil)
		// Transposed (non-contiguous) indices and weight.
		idsT := FromSlice(ids, 3, 2).T() // [2, 3]: 3 10 7 / 0 3 1
		wt := refRandInput(2, dt, dim, vocab).T()
		wtv := wt.Float64s()
		want = want[:0]
		for _, i := range []int{3, 10, 7, 0, 3, 1} {
			want = append(want, wtv[i*dim:(i+1)*dim]...)
		}
		checkValues(t, "Embedding views "+dt.String(), Embedding(idsT, wt), dt, []int{2, 3, dim}, want, 0, nil)
	}
	w := Zeros(Float32, 4, 2)
	checkOpError(t, "Embedding out of range", func() { Embedding(FromSlice([]int{4}), w) }, "out of range")
	checkOpError(t, "Embedding float indices", func() { Embedding(FromSlice([]float32{1}), w) }, "Embedding")
	checkOpError(t, "Embedding 1-D weight", func() { Embedding(FromSlice([]int{1}), Zeros(Float32, 4)) }, "Embedding")
}

func TestSelectNarrow(t *testing.T) {
	x := refRandInput(1, Float64, 3, 4, 5)
	xv := x.Float64s()
	shape := []int{3, 4, 5}
	for _, dim := range []int{0, 1, 2, -1} {
		d := (dim + 3) % 3
		for _, index := range []int{0, 2, -1} {
			k := index
			if k < 0 {
				k += shape[d]
			}
			out := append(append([]int(nil), shape[:d]...), shape[d+1:]...)
			want := make([]float64, refNumel(out))
			refForEach(out, func(ix []int) {
				src := append(append(append([]int(nil), ix[:d]...), k), ix[d:]...)
				want[refIndex(out, ix)] = xv[refIndex(shape, src)]
			})
			s := x.Select(dim, index)
			checkValues(t, fmt.Sprintf("Select dim %d index %d", dim, index), s, Float64, out, want, 0, nil)
			if !s.SharesStorage(x) {
				t.Error("Select is not a view")
			}
		}
		for _, r := range [][2]int{{0, 1}, {1, 2}, {-2, 2}, {0, 0}} {
			start, length := r[0], r[1]
			st := start
			if st < 0 {
				st += shape[d]
			}
			out := append([]int(nil), shape...)
			out[d] = length
			want := make([]float64, refNumel(out))
			refForEach(out, func(ix []int) {
				src := append([]int(nil), ix...)
				src[d] += st
				want[refIndex(out, ix)] = xv[refIndex(shape, src)]
			})
			n := x.Narrow(dim, start, length)
			checkValues(t, fmt.Sprintf("Narrow dim %d [%d,+%d)", dim, start, length), n, Float64, out, want, 0, nil)
		}
	}
	// Writes through Select and Narrow reach the base.
	x.Select(1, 2).Fill(9)
	x.Narrow(2, 1, 2).Select(0, 0).Set(-3, 0, 0)
	for i := range 3 {
		for k := range 5 {
			if x.At(i, 2, k) != 9 {
				t.Fatalf("Fill through Select: x[%d,2,%d] = %v", i, k, x.At(i, 2, k))
			}
		}
	}
	if x.At(0, 0, 1) != -3 {
		t.Errorf("Set through Narrow/Select: x[0,0,1] = %v", x.At(0, 0, 1))
	}
	checkOpError(t, "Select out of range", func() { x.Select(1, 4) }, "Select", "[3, 4, 5]")
	checkOpError(t, "Select negative out of range", func() { x.Select(0, -4) }, "Select")
	checkOpError(t, "Select dim", func() { x.Select(3, 0) }, "Select")
	checkOpError(t, "Narrow past end", func() { x.Narrow(2, 3, 3) }, "Narrow")
	checkOpError(t, "Narrow negative length", func() { x.Narrow(2, 0, -1) }, "Narrow")
}
