package ir

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The fuzz targets below decode their input bytes into small shapes (so
// each run is fast) and check the shape rules against naive references.
// Their seed corpora run under a plain `go test ./ir`; TestShapeRulesRandom
// also feeds them a few thousand deterministic random inputs. Fuzz with e.g.
//
//	go test ./ir -run XXX -fuzz FuzzViewStrides -fuzztime 30s

// byteReader hands out bytes of the fuzz input, then zeros.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

// intn returns a value in [0, n).
func (r *byteReader) intn(n int) int { return r.next() % n }

// size returns a dim size biased toward 1 (so that shapes broadcast and
// dims squeeze often), with 0 now and then.
func (r *byteReader) size() int {
	return [...]int{1, 1, 2, 3, 4, 5, 0, 2, 1, 3}[r.intn(10)]
}

func (r *byteReader) shape(maxRank int, allowZero bool) []int {
	s := make([]int, r.intn(maxRank+1))
	for i := range s {
		s[i] = r.size()
		if !allowZero && s[i] == 0 {
			s[i] = 2
		}
	}
	return s
}

// refBroadcast is the textbook rule: align on the right, pad with 1, each
// pair must be equal or contain a 1.
func refBroadcast(a, b []int) ([]int, bool) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		x, y := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			x = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			y = b[j]
		}
		switch {
		case x == y, y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, false
		}
	}
	return out, true
}

func checkBroadcast(t *testing.T, data []byte) {
	r := &byteReader{b: data}
	a, b := r.shape(5, true), r.shape(5, true)
	want, ok := refBroadcast(a, b)
	got, err := Broadcast("Test", a, b)
	got2, err2 := Broadcast("Test", b, a)
	if (err == nil) != ok {
		t.Fatalf("Broadcast(%v, %v): err %v, reference ok %v", a, b, err, ok)
	}
	if (err2 == nil) != (err == nil) || !slices.Equal(got, got2) {
		t.Fatalf("Broadcast not symmetric: (%v, %v) → %v, %v; swapped → %v, %v", a, b, got, err, got2, err2)
	}
	if !ok {
		if e, isErr := err.(*Error); !isErr || e.Op != "Test" || len(e.Shapes) != 2 {
			t.Fatalf("Broadcast(%v, %v) error %#v does not name the op and both shapes", a, b, err)
		}
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Broadcast(%v, %v) = %v, want %v", a, b, got, want)
	}
	// A shape broadcasts with itself and alone to itself.
	for _, s := range [][]int{a, b} {
		if one, err := Broadcast("Test", s); err != nil || !slices.Equal(one, s) {
			t.Fatalf("Broadcast(%v) = %v, %v", s, one, err)
		}
		if two, err := Broadcast("Test", s, s); err != nil || !slices.Equal(two, s) {
			t.Fatalf("Broadcast(%v, %v) = %v, %v", s, s, two, err)
		}
	}
	// BroadcastStrides: reading a's contiguous storage through the strides
	// gives, at every index of the result, the element a has at that index
	// with size-1 dims pinned to 0.
	st := BroadcastStrides(a, ContiguousStrides(a), got)
	if len(st) != len(got) {
		t.Fatalf("BroadcastStrides(%v → %v) = %v", a, got, st)
	}
	n := Numel(got)
	idx := make([]int, len(got))
	off := len(got) - len(a)
	for flat := range n {
		rem := flat
		for d := len(got) - 1; d >= 0; d-- {
			idx[d] = rem % got[d]
			rem /= got[d]
		}
		viaStrides, want := 0, 0
		for d := range got {
			viaStrides += idx[d] * st[d]
		}
		for d := range a {
			i := idx[off+d]
			if a[d] == 1 {
				i = 0
			}
			want = want*a[d] + i
		}
		if viaStrides != want {
			t.Fatalf("BroadcastStrides(%v → %v) = %v: index %v reads %d, want %d", a, got, st, idx, viaStrides, want)
		}
	}
}

func FuzzBroadcast(f *testing.F) {
	for _, s := range [][]byte{
		{},
		{1, 1, 1, 2},          // [1] and [1, 2]
		{2, 2, 3, 2, 3, 2},    // [2, 3] and [3, 2]: error
		{3, 2, 1, 3, 1, 5},    // [2, 1, 3] and [5]
		{4, 6, 1, 2, 3, 2, 3}, // zero sizes
		{5, 9, 8, 7, 6, 5, 5, 1, 2, 3, 4, 5},
		{0, 3, 6, 6, 6},
	} {
		f.Add(s)
	}
	f.Fuzz(checkBroadcast)
}

// fuzzView is a strided view over a row-major base, made by permuting and
// slicing it.
type fuzzView struct {
	shape, strides []int
	offset         int
}

func (r *byteReader) view() fuzzView {
	base := r.shape(4, true)
	v := fuzzView{shape: base, strides: ContiguousStrides(base)}
	// A random permutation (Fisher–Yates from the input bytes).
	perm := make([]int, len(base))
	for i := range perm {
		perm[i] = i
	}
	for i := len(perm) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	ps, pst := make([]int, len(base)), make([]int, len(base))
	for i, d := range perm {
		ps[i], pst[i] = v.shape[d], v.strides[d]
	}
	v.shape, v.strides = ps, pst
	// Random slicing with a step on some dims.
	for d := range v.shape {
		if v.shape[d] == 0 || r.intn(2) == 0 {
			continue
		}
		start := r.intn(v.shape[d])
		step := 1 + r.intn(3)
		size := (v.shape[d] - start + step - 1) / step
		v.offset += start * v.strides[d]
		v.shape[d] = size
		v.strides[d] *= step
	}
	return v
}

// offsets lists the storage offset of each element of shape/strides in
// row-major order.
func offsets(shape, strides []int, offset int) []int {
	n := Numel(shape)
	out := make([]int, n)
	idx := make([]int, len(shape))
	for flat := range n {
		rem := flat
		o := offset
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = rem % shape[d]
			rem /= shape[d]
			o += idx[d] * strides[d]
		}
		out[flat] = o
	}
	return out
}

// viewExists decides by brute force whether the element sequence seq (in
// row-major order) can be presented as shape by some strides: the stride of
// each dim must be the step between an element and its neighbour along that
// dim, and then every element must sit where those strides put it.
func viewExists(seq []int, shape []int) bool {
	if len(seq) <= 1 {
		return true
	}
	cs := ContiguousStrides(shape)
	st := make([]int, len(shape))
	for d := range shape {
		if shape[d] > 1 {
			st[d] = seq[cs[d]] - seq[0]
		}
	}
	return slices.Equal(offsets(shape, st, seq[0]), seq)
}

// factorShape returns a shape with n elements: n split into random
// factors, with size-1 dims sprinkled in, of rank at most 6.
func (r *byteReader) factorShape(n int) []int {
	if n == 0 {
		s := r.shape(3, true)
		return append(s, 0)
	}
	var out []int
	left := n
	for left > 1 && len(out) < 5 {
		var divs []int
		for d := 2; d <= left; d++ {
			if left%d == 0 {
				divs = append(divs, d)
			}
		}
		d := divs[r.intn(len(divs))]
		out = append(out, d)
		left /= d
		if r.intn(4) == 0 {
			out = append(out, 1)
		}
	}
	if left > 1 {
		out = append(out, left)
	}
	if r.intn(3) == 0 {
		out = append([]int{1}, out...)
	}
	// Shuffle.
	for i := len(out) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func checkViewStrides(t *testing.T, data []byte) {
	r := &byteReader{b: data}
	v := r.view()
	seq := offsets(v.shape, v.strides, v.offset)
	target := r.factorShape(len(seq))
	if Numel(target) != len(seq) {
		t.Fatalf("bad test: target %v for %d elements", target, len(seq))
	}
	// The identity always works, and a contiguous layout views as anything.
	if _, ok := ViewStrides(v.shape, v.strides, v.shape); !ok {
		t.Fatalf("ViewStrides(%v, %v) refuses its own shape", v.shape, v.strides)
	}
	ns, ok := ViewStrides(v.shape, v.strides, target)
	if IsContiguous(v.shape, v.strides) && !ok {
		t.Fatalf("ViewStrides(%v, %v → %v) refuses a contiguous layout", v.shape, v.strides, target)
	}
	exists := viewExists(seq, target)
	if ok != exists {
		t.Fatalf("ViewStrides(%v, strides %v → %v): ok=%v, but a view exists=%v (elements at %v)",
			v.shape, v.strides, target, ok, exists, seq)
	}
	if !ok {
		return
	}
	if len(ns) != len(target) {
		t.Fatalf("ViewStrides(%v, %v → %v) = %v: wrong length", v.shape, v.strides, target, ns)
	}
	if got := offsets(target, ns, v.offset); !slices.Equal(got, seq) {
		t.Fatalf("ViewStrides(%v, %v → %v) = %v: reads %v, want %v", v.shape, v.strides, target, ns, got, seq)
	}
	// The reshape rule (View) agrees, and keeps the offset.
	l, err := OpReshape.View(Layout{Shape: v.shape, Strides: v.strides, Offset: v.offset}, &Attrs{Dims: target})
	if err != nil || !slices.Equal(offsets(l.Shape, l.Strides, l.Offset), seq) {
		t.Fatalf("reshape rule %v → %v: %v, %v", v.shape, target, l, err)
	}
}

func FuzzViewStrides(f *testing.F) {
	for _, s := range [][]byte{
		{},
		{2, 3, 4, 0, 0, 0},                      // contiguous [3, 4] → splits
		{2, 3, 4, 1, 0, 0, 0, 1, 2},             // transposed
		{3, 3, 4, 5, 0, 0, 1, 1, 1, 0, 3, 5, 7}, // sliced with steps
		{4, 2, 3, 4, 5, 3, 2, 1, 1, 2, 1, 0, 9, 9, 9, 9},
		{1, 6, 0, 0, 2, 2}, // an empty dim
		{2, 1, 1, 0, 0, 3}, // size-1 dims
		{3, 5, 5, 5, 2, 0, 1, 1, 4, 1, 4, 1, 4, 7, 7},
	} {
		f.Add(s)
	}
	f.Fuzz(checkViewStrides)
}

func checkReshape(t *testing.T, data []byte) {
	r := &byteReader{b: data}
	shape := r.shape(4, true)
	n := Numel(shape)
	target := r.factorShape(n)
	got, err := InferShape("Reshape", shape, target)
	if err != nil || !slices.Equal(got, target) {
		t.Fatalf("InferShape(%v, %v) = %v, %v", shape, target, got, err)
	}
	// Contiguous memory views as any shape of the same size, row-major.
	st, ok := ViewStrides(shape, ContiguousStrides(shape), target)
	if !ok || !slices.Equal(offsets(target, st, 0), offsets(target, ContiguousStrides(target), 0)) {
		t.Fatalf("ViewStrides of contiguous %v → %v = %v, %v", shape, target, st, ok)
	}
	if len(target) == 0 {
		return
	}
	// One dim replaced by -1 is inferred, unless the others hold no
	// elements (then -1 could be anything: an error, as in PyTorch).
	k := r.intn(len(target))
	withInfer := slices.Clone(target)
	withInfer[k] = -1
	rest := 1
	for i, d := range target {
		if i != k {
			rest *= d
		}
	}
	got, err = InferShape("Reshape", shape, withInfer)
	if rest == 0 {
		if err == nil {
			t.Fatalf("InferShape(%v, %v) = %v, want an error", shape, withInfer, got)
		}
	} else if err != nil || !slices.Equal(got, target) {
		t.Fatalf("InferShape(%v, %v) = %v, %v; want %v", shape, withInfer, got, err, target)
	}
	// Two -1, a negative size, a wrong element count: errors naming Reshape.
	bad := [][]int{append(slices.Clone(withInfer), -1), append(slices.Clone(target), -2)}
	if n > 0 {
		bad = append(bad, append(slices.Clone(target), 2))
	}
	for _, b := range bad {
		if got, err := InferShape("Reshape", shape, b); err == nil {
			t.Fatalf("InferShape(%v, %v) = %v, want an error", shape, b, got)
		} else if e, isErr := err.(*Error); !isErr || e.Op != "Reshape" {
			t.Fatalf("InferShape(%v, %v) error %v does not name Reshape", shape, b, err)
		}
	}
}

func FuzzReshape(f *testing.F) {
	for _, s := range [][]byte{
		{},
		{2, 4, 5, 0, 1, 2},
		{3, 3, 4, 5, 7, 1, 0, 2},
		{1, 6, 2, 2, 0},
		{4, 5, 5, 5, 5, 9, 8, 7, 6, 5, 4, 3},
	} {
		f.Add(s)
	}
	f.Fuzz(checkReshape)
}

// TestShapeRulesRandom runs the fuzz checks on deterministic random inputs,
// so that a plain `go test` covers more than the seed corpora.
func TestShapeRulesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 32)
	for range 3000 {
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		checkBroadcast(t, buf)
		checkViewStrides(t, buf)
		checkReshape(t, buf)
	}
}
