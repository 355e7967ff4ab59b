package tensor

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"gocompile/internal/stats"
	"gocompile/ir"
)

// indexPutCase is an IndexPut drawn at random: t's shape, the index
// tensors (their shapes broadcasting to b), values' shape, accumulate.
type indexPutCase struct {
	dt         DType
	shape      []int
	idxShapes  [][]int
	idx        [][]int64
	b          []int
	valShape   []int
	accumulate bool
	permuted   bool // t is a permuted view
}

// randomIndexPut draws case c: ranks 1 to 4 with odd sizes, 1 to rank
// index tensors of broadcasting shapes with negative entries and repeats,
// values that broadcast, accumulate on floating types, and a permuted t
// on every third case.
func randomIndexPut(rng *rand.Rand, c int) indexPutCase {
	types := []DType{Float32, Float64, BFloat16, Float16, Int64, Int32}
	p := indexPutCase{dt: types[c%len(types)], permuted: c%3 == 2}
	sizes := []int{1, 3, 5, 7, 2, 4}
	rank := 1 + rng.IntN(4)
	for range rank {
		p.shape = append(p.shape, sizes[rng.IntN(len(sizes))])
	}
	if c%7 == 0 {
		p.shape[rank-1] = 1023 // a long trailing dim
	}
	k := 1 + rng.IntN(rank)
	p.accumulate = p.dt.IsFloat() && rng.IntN(2) == 0
	for range 1 + rng.IntN(2) {
		p.b = append(p.b, 1+rng.IntN(4))
	}
	for j := range k {
		// Each index is b, or b with some dims 1, or b's trailing dims.
		s := append([]int(nil), p.b...)
		switch rng.IntN(3) {
		case 1:
			s[rng.IntN(len(s))] = 1
		case 2:
			s = s[rng.IntN(len(s)):]
		}
		p.idxShapes = append(p.idxShapes, s)
		vals := make([]int64, ir.Numel(s))
		for i := range vals {
			vals[i] = int64(rng.IntN(2*p.shape[j]) - p.shape[j]) // [-size, size)
		}
		p.idx = append(p.idx, vals)
	}
	// Dims set to 1 or dropped in every index leave a smaller broadcast.
	p.b, _ = ir.Broadcast("test", p.idxShapes...)
	target := append(append([]int(nil), p.b...), p.shape[k:]...)
	p.valShape = append([]int(nil), target...)
	switch rng.IntN(3) {
	case 1:
		p.valShape = p.valShape[rng.IntN(len(p.valShape)+1):] // trailing dims, or a scalar
	case 2:
		if len(p.valShape) > 0 {
			p.valShape[rng.IntN(len(p.valShape))] = 1
		}
	}
	return p
}

// tensors makes the case's operands on dev from seed.
func (p indexPutCase) tensors(seed uint64, dev Device) (x, v *Tensor, idx []*Tensor) {
	x = Randn(seed, Float32, p.shape...).MulScalar(4)
	v = Randn(seed+1, Float32, p.valShape...).MulScalar(4)
	if !p.dt.IsFloat() {
		x, v = x.Round(), v.Round()
	}
	x, v = x.To(p.dt).To(dev), v.To(p.dt).To(dev)
	if p.permuted && len(p.shape) > 1 {
		// The same values through a permuted view: a copy in reversed
		// dim order, permuted back.
		rev := make([]int, len(p.shape))
		for i := range rev {
			rev[i] = len(p.shape) - 1 - i
		}
		x = x.Permute(rev...).Contiguous().Permute(rev...)
	}
	for j, vals := range p.idx {
		idx = append(idx, FromSlice(vals, p.idxShapes[j]...).To(dev))
	}
	return x, v, idx
}

// reference is IndexPut in float64 loops: positions in row-major order of
// b, each written (the last write wins) or added.
func (p indexPutCase) reference(x, v []float64) []float64 {
	out := append([]float64(nil), x...)
	k := len(p.idx)
	rest := p.shape[k:]
	inner := ir.Numel(rest)
	target := append(append([]int(nil), p.b...), rest...)
	vst := ir.BroadcastStrides(p.valShape, ir.ContiguousStrides(p.valShape), target)
	tst := ir.ContiguousStrides(p.shape)
	for bi := range ir.Numel(p.b) {
		bpos := unravel(bi, p.b)
		off := 0
		for j := range k {
			st := ir.BroadcastStrides(p.idxShapes[j], ir.ContiguousStrides(p.idxShapes[j]), p.b)
			at := 0
			for d, c := range bpos {
				at += c * st[d]
			}
			i := int(p.idx[j][at])
			if i < 0 {
				i += p.shape[j]
			}
			off += i * tst[j]
		}
		for r := range inner {
			pos := append(append([]int(nil), bpos...), unravel(r, rest)...)
			vo := 0
			for d, c := range pos {
				vo += c * vst[d]
			}
			if p.accumulate {
				out[off+r] += v[vo]
			} else {
				out[off+r] = v[vo]
			}
		}
	}
	return out
}

// unravel is flat index i's position in a row-major shape.
func unravel(i int, shape []int) []int {
	pos := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		pos[d] = i % shape[d]
		i /= shape[d]
	}
	return pos
}

// IndexPut and IndexPutInPlace equal float64 loops over a seeded sweep of
// shapes, index broadcasts, negative and repeated positions, value
// broadcasts, every dtype and permuted tensors, eagerly and compiled (on
// the default device: GOCOMPILE_DEVICE=cuda runs them on a GPU).
func TestIndexPutMatchesReference(t *testing.T) {
	dev := DefaultDevice()
	rng := rand.New(rand.NewPCG(3, 17))
	for c := range 60 {
		p := randomIndexPut(rng, c)
		x, v, idx := p.tensors(uint64(10*c), dev)
		what := fmt.Sprintf("case %d: %v %v indices %v values %v accumulate %v permuted %v", c, p.dt, p.shape, p.idxShapes, p.valShape, p.accumulate, p.permuted)
		want := p.reference(vals(x), vals(v.Contiguous()))
		// Accumulated 16-bit values are added in float32 and rounded once:
		// a few roundings of the type apart from the float64 sums.
		scale := 1.0
		if p.accumulate {
			scale = 4
		}
		checkClose(t, what, x.IndexPut(idx, v, p.accumulate), p.dt, p.shape, want, scale)

		compiled := Compile(func(x, v, i0 *Tensor) *Tensor {
			return x.IndexPut(append([]*Tensor{i0}, idx[1:]...), v, p.accumulate)
		})
		checkClose(t, what+", compiled", compiled(x, v, idx[0]), p.dt, p.shape, want, scale)

		y := x.Contiguous().Permute(identity(len(p.shape))...)
		if p.permuted && len(p.shape) > 1 {
			y = x.Contiguous().T().Contiguous().T() // a non-contiguous receiver: the Copy path
		}
		if got := y.IndexPutInPlace(idx, v, p.accumulate); got != y {
			t.Errorf("%s: IndexPutInPlace did not return its receiver", what)
		}
		checkClose(t, what+", in place", y, p.dt, p.shape, want, scale)
	}
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// IndexPutInPlace writes a captured cache at a position held in a tensor
// inside a compiled decode step: one compilation over every position, the
// cache equal to eager writes after each call, and the next call reading
// what the last one wrote.
func TestIndexPutInPlaceCompiled(t *testing.T) {
	dev := DefaultDevice()
	for _, accumulate := range []bool{false, true} {
		step := func(cache *Tensor) func(k, pos *Tensor) *Tensor {
			return func(k, pos *Tensor) *Tensor {
				cache.IndexPutInPlace([]*Tensor{pos}, k, accumulate) // cache [9, 2, 4], k [1, 2, 4]
				return cache.Sum(0)
			}
		}
		var st CompileStats
		eagerCache, compiledCache := Zeros(Float32, 9, 2, 4).To(dev), Zeros(Float32, 9, 2, 4).To(dev)
		eager, compiled := step(eagerCache), Compile(step(compiledCache), WithStats(&st))
		for call := range 12 {
			k := Randn(uint64(call), Float32, 1, 2, 4).To(dev)
			pos := FromSlice([]int64{int64(call%9 - 4)}).To(dev) // negative positions count from the end
			what := fmt.Sprintf("accumulate %v, call %d", accumulate, call)
			want := eager(k, pos)
			checkClose(t, what, compiled(k, pos), Float32, want.Shape(), vals(want), 1)
			checkSame(t, what+": the cache", compiledCache, eagerCache)
		}
		if n := st.Compiles.Load(); n != 1 {
			t.Errorf("accumulate %v: %d compilations over 12 calls, want 1", accumulate, n)
		}
	}
}

// IndexPut's misuses name the op and the fix.
func TestIndexPutErrors(t *testing.T) {
	x := Zeros(Float32, 3, 4)
	i := FromSlice([]int64{0, 2})
	v := Ones(Float32, 2, 4)
	for _, c := range []struct {
		what string
		f    func()
	}{
		{"no index", func() { x.IndexPut(nil, v, false) }},
		{"more indices than dims", func() { x.IndexPut([]*Tensor{i, i, i}, v, false) }},
		{"a float index", func() { x.IndexPut([]*Tensor{FromSlice([]float32{1})}, v, false) }},
		{"a bool mask", func() { x.IndexPut([]*Tensor{FromSlice([]bool{true, false, true})}, v, false) }},
		{"an index out of range", func() { x.IndexPut([]*Tensor{FromSlice([]int64{3})}, v, false) }},
		{"a negative index out of range", func() { x.IndexPut([]*Tensor{FromSlice([]int64{-4})}, v, false) }},
		{"indices that do not broadcast", func() { x.IndexPut([]*Tensor{i, FromSlice([]int64{0, 1, 2})}, v, false) }},
		{"values that do not broadcast", func() { x.IndexPut([]*Tensor{i}, Ones(Float32, 3, 4), false) }},
		{"accumulate into integers", func() { Zeros(Int64, 3).IndexPut([]*Tensor{i}, FromSlice([]int64{1, 2}), true) }},
		{"a nil index", func() { x.IndexPut([]*Tensor{nil}, v, false) }},
		{"in place on an expanded tensor", func() { Zeros(Float32, 1, 4).Expand(3, 4).IndexPutInPlace([]*Tensor{i}, v, false) }},
	} {
		expectError(t, "IndexPut: "+c.what, c.f)
	}
	// The message names the op, the index and the dim's size.
	err := Try(func() { x.IndexPut([]*Tensor{FromSlice([]int64{0}), FromSlice([]int64{9})}, Ones(Float32, 1), false) })
	for _, want := range []string{"IndexPut", "index 9", "dim 1 of size 4"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an index out of range: error %v, want one with %q", err, want)
		}
	}
}

// On a GPU, IndexPutInPlace in a decode step replayed from a CUDA graph
// writes the captured cache at each call's position, as eager writes do.
func TestGPUReduceOverheadIndexPut(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, dt := range []DType{Float32, BFloat16} {
		step := func(cache *Tensor) func(k, pos *Tensor) *Tensor {
			return func(k, pos *Tensor) *Tensor {
				cache.IndexPutInPlace([]*Tensor{pos}, k.MulScalar(2), false) // cache [16, 3, 8], k [1, 3, 8]
				return cache.To(Float32).Sum(0)
			}
		}
		eagerCache, graphCache := Zeros(dt, 16, 3, 8).To(dev), Zeros(dt, 16, 3, 8).To(dev)
		eager, graphed := step(eagerCache), Compile(step(graphCache), WithMode(ReduceOverhead))
		before := stats.GraphReplays.Load()
		for call := range 10 {
			k := Randn(uint64(call), Float32, 1, 3, 8).To(dt).To(dev)
			pos := FromSlice([]int64{int64(call)}).To(dev)
			what := fmt.Sprintf("%v call %d", dt, call)
			want := eager(k, pos)
			checkClose(t, what, graphed(k, pos), Float32, want.Shape(), vals(want), 4)
			checkSame(t, what+": the cache", graphCache, eagerCache)
		}
		if n := stats.GraphReplays.Load() - before; n < 8 {
			t.Errorf("%v: %d graph replays over 10 calls, want 8 or more", dt, n)
		}
	}
}

// An empty index writes nothing, into a tensor with or without elements;
// a tensor with an empty indexed dim has no position to write.
func TestIndexPutEmpty(t *testing.T) {
	none := FromSlice([]int64{}, 0)
	x := Arange(0, 6, 1, Float32).Reshape(2, 3)
	for _, accumulate := range []bool{false, true} {
		checkClose(t, fmt.Sprintf("accumulate %v", accumulate), x.IndexPut([]*Tensor{none}, Ones(Float32, 3), accumulate),
			Float32, []int{2, 3}, []float64{0, 1, 2, 3, 4, 5}, 0)
	}
	empty := Zeros(Float32, 0, 3)
	checkClose(t, "an empty tensor", empty.IndexPut([]*Tensor{none}, Ones(Float32, 3), false), Float32, []int{0, 3}, nil, 0)
	expectError(t, "a position in an empty dim", func() { empty.IndexPut([]*Tensor{FromSlice([]int64{0})}, Ones(Float32, 3), false) })
}
