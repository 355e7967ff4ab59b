package tensor

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"gocompile/ir"
)

// A compiled step that writes a captured KV cache at a position, reads
// the cache before and after the write, and reads a view of it taken
// before the call, over several calls (each replayed from the compiled
// program), gives what the same function gives eagerly on its own cache;
// the caches end alike.
func TestCompileWritesCapturedBuffer(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, BFloat16} {
		newCache := func() *Tensor { return Zeros(dt, 2, 5, 3) }
		step := func(cache *Tensor) func(x *Tensor, pos int) *Tensor {
			head := cache.Narrow(1, 0, 2) // a view taken before any call
			return func(x *Tensor, pos int) *Tensor {
				before := cache.Sum(1)
				cache.Narrow(1, pos, 1).Copy(x.Tanh())
				return cache.Sum(1).Sub(before).Add(head.Sum(1))
			}
		}
		eagerCache, compiledCache := newCache(), newCache()
		eager, compiled := step(eagerCache), Compile(step(compiledCache))
		for call, pos := range []int{0, 1, 0, 4, 1, 1} {
			x := Randn(uint64(call), Float32, 2, 1, 3).To(dt)
			what := fmt.Sprintf("%v call %d (position %d)", dt, call, pos)
			checkSame(t, what, compiled(x, pos), eager(x, pos))
			checkSame(t, what+": the cache", compiledCache, eagerCache)
		}
	}
}

// A function that writes an argument-derived value into a captured buffer
// and returns nothing of it (the buffer is its output) writes on every
// call, not only while tracing.
func TestCompileWriteOnly(t *testing.T) {
	buf := Zeros(Float32, 3)
	f := Compile(func(x *Tensor) *Tensor { buf.Copy(x.MulScalar(2)); return x })
	for i := range 3 {
		x := Full(float64(i+1), Float32, 3)
		f(x)
		checkClose(t, fmt.Sprintf("call %d", i), buf, Float32, []int{3}, []float64{float64(2 * (i + 1)), float64(2 * (i + 1)), float64(2 * (i + 1))}, 0)
	}
}

// With a graph break (Item), the write lands in its segment and later
// segments read it.
func TestCompileWriteAcrossBreak(t *testing.T) {
	cache := Zeros(Float32, 4)
	f := Compile(func(x *Tensor) *Tensor {
		cache.Narrow(0, 1, 2).Copy(x)
		s := cache.Sum().Item() // a graph break
		return cache.MulScalar(s)
	})
	for i := range 3 {
		v := float64(i + 1)
		got := f(Full(v, Float32, 2))
		s := 2 * v
		checkClose(t, fmt.Sprintf("call %d", i), got, Float32, []int{4}, []float64{0, v * s, v * s, 0}, 0)
	}
}

// Compiled functions writing their own buffers trace and run concurrently.
func TestCompileWritesConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := Zeros(Float32, 8)
			f := Compile(func(x *Tensor) *Tensor {
				buf.Narrow(0, 2, 3).Copy(x)
				return buf.Sum()
			})
			for i := range 5 {
				x := Full(float64(w+i), Float32, 3)
				if got := f(x).Item(); got != float64(3*(w+i)) {
					t.Errorf("worker %d call %d: %v, want %v", w, i, got, 3*(w+i))
				}
			}
		}()
	}
	wg.Wait()
}

// AsStrided and AsStridedScatter, which Compile records writes as.
func TestAsStrided(t *testing.T) {
	x := Arange(0, 12, 1, Float32)
	v := x.AsStrided([]int{3, 2}, []int{4, 1}, 1)
	checkClose(t, "AsStrided", v, Float32, []int{3, 2}, []float64{1, 2, 5, 6, 9, 10}, 0)
	s := x.AsStridedScatter(Full(-1, Float32, 2), []int{3, 2}, []int{4, 1}, 1)
	checkClose(t, "AsStridedScatter", s, Float32, []int{12}, []float64{0, -1, -1, 3, 4, -1, -1, 7, 8, -1, -1, 11}, 0)
	checkClose(t, "AsStridedScatter leaves its input", x, Float32, []int{12}, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0)
	expectError(t, "a view past the storage", func() { x.AsStrided([]int{3}, []int{5}, 3) })
	expectError(t, "a 2-D storage", func() { x.View(3, 4).AsStrided([]int{2}, []int{1}, 0) })
	expectError(t, "sizes without strides", func() { x.AsStrided([]int{2, 2}, []int{1}, 0) })
}

// IndexCopyInPlace writes a cache at a position held in a tensor: eagerly
// in place, and in a compiled decode step over many positions with one
// compilation, matching eager calls step by step.
func TestIndexCopyInPlace(t *testing.T) {
	x := Zeros(Float32, 3, 4)
	got := x.IndexCopyInPlace(0, FromSlice([]int64{2, 0}), Ones(Float32, 2, 4))
	if got != x {
		t.Error("IndexCopyInPlace did not return its receiver")
	}
	checkClose(t, "eager", x, Float32, []int{3, 4}, []float64{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}, 0)
	expectError(t, "a float index", func() { x.IndexCopyInPlace(0, FromSlice([]float32{1}), Ones(Float32, 1, 4)) })
	expectError(t, "an index out of range", func() { x.IndexCopyInPlace(0, FromSlice([]int64{3}), Ones(Float32, 1, 4)) })

	var st CompileStats
	step := func(cache *Tensor) func(k, pos *Tensor) *Tensor {
		return func(k, pos *Tensor) *Tensor {
			cache.IndexCopyInPlace(1, pos, k)
			return cache.Softmax(1).Sum(1)
		}
	}
	eagerCache, compiledCache := Zeros(Float32, 2, 9, 4), Zeros(Float32, 2, 9, 4)
	eager, compiled := step(eagerCache), Compile(step(compiledCache), WithStats(&st))
	for pos := range 9 {
		k := Randn(uint64(pos), Float32, 2, 1, 4)
		p := FromSlice([]int64{int64(pos)})
		what := fmt.Sprintf("position %d", pos)
		// The fused softmax may round differently from eager kernels
		// (on a GPU); the cache writes are exact.
		want := eager(k, p)
		checkClose(t, what, compiled(k, p), Float32, want.Shape(), vals(want), 1)
		checkSame(t, what+": the cache", compiledCache, eagerCache)
	}
	if n := st.Compiles.Load(); n != 1 {
		t.Errorf("%d compilations over 9 positions, want 1", n)
	}
}

// A decode step that writes its cache in place and one that also reads the
// old cache give the right values; an argument viewing the written cache
// is refused rather than read while it is written.
func TestCompileWriteInPlace(t *testing.T) {
	cache := Zeros(Float32, 6, 2)
	decode := Compile(func(k, pos *Tensor) *Tensor {
		cache.IndexCopyInPlace(0, pos, k)
		return cache.Sum(0)
	})
	keepsOld := Compile(func(k, pos *Tensor) *Tensor {
		before := cache.Sum(0)
		cache.IndexCopyInPlace(0, pos, k)
		return cache.Sum(0).Sub(before)
	})
	for pos := range 3 {
		k := Full(float64(pos+1), Float32, 1, 2)
		p := FromSlice([]int64{int64(pos)})
		decode(k, p)
		checkClose(t, fmt.Sprintf("position %d: the delta", pos), keepsOld(k.MulScalar(2), p), Float32, []int{2},
			[]float64{float64(pos + 1), float64(pos + 1)}, 0)
	}
	expectError(t, "an argument viewing the cache", func() { decode(cache.Narrow(0, 0, 1), FromSlice([]int64{1})) })
}

// markInPlace lets a write update its storage in place only where nothing
// reads the old contents after it: not where the old storage is read
// apart from the written value, is a result, or a folded view of it is a
// constant too.
func TestMarkInPlace(t *testing.T) {
	store := Zeros(Float32, 8)
	dev := store.v.Device()
	for _, c := range []struct {
		name             string
		readOld, viewOld bool
		chained, inPlace bool
		readInSrc        bool // the written value reads the old storage
		returnOld        bool
		viewInSrc        bool // the written value reads a constant view of the old storage
		srcIsView        bool // the written value is a view of the old storage
		resultReadsSrc   bool // a result is computed from the written value
	}{
		{"a lone write", false, false, false, true, false, false, false, false, false},
		{"the old storage read", true, false, false, false, false, false, false, false, false},
		{"a constant view of the old storage", false, true, false, false, false, false, false, false, false},
		{"a write after a write", false, false, true, true, false, false, false, false, false},
		{"the written value reads the old storage", false, false, false, true, true, false, false, false, false},
		{"the written value and a result read the old storage", true, false, false, false, true, false, false, false, false},
		{"the old storage is a result", false, false, false, false, true, true, false, false, false},
		{"the written value reads a constant view of the old storage", false, false, false, true, false, false, true, false, false},
		{"the written value and a result read a constant view", false, true, false, false, false, false, true, false, false},
		{"the written value is a view of the old storage", false, false, false, false, false, false, false, true, false},
		{"a result reads the written value, which reads the old storage", false, false, false, true, true, false, false, false, true},
		{"a result reads the written value and the old storage", true, false, false, false, true, false, false, false, true},
	} {
		g := &ir.Graph{}
		base := g.Const(store.v, []int{8}, Float32, dev, "")
		src := g.Input([]int{2}, Float32, dev, "")
		if c.srcIsView {
			var err error
			if src, err = g.Call(ir.OpSlice, ir.Attrs{Dim: 0, Start: 2, Stop: 4, Step: 1}, "", base); err != nil {
				t.Fatal(err)
			}
		}
		if c.viewInSrc {
			view := store.v.WithLayout(ir.Layout{Shape: []int{2}, Strides: []int{1}, Offset: 3})
			v := g.Const(view, []int{2}, Float32, dev, "")
			var err error
			if src, err = g.Call(ir.OpMul, ir.Attrs{}, "", src, v); err != nil {
				t.Fatal(err)
			}
		}
		if c.readInSrc {
			total, err := g.Call(ir.OpSum, ir.Attrs{}, "", base)
			if err != nil {
				t.Fatal(err)
			}
			if src, err = g.Call(ir.OpAdd, ir.Attrs{}, "", src, total); err != nil {
				t.Fatal(err)
			}
		}
		at := func(off int) ir.Attrs {
			return ir.StridedLayout(ir.Layout{Shape: []int{2}, Strides: []int{1}, Offset: off})
		}
		n, err := g.Call(ir.OpAsStridedScatter, at(3), "", base, src)
		if err != nil {
			t.Fatal(err)
		}
		last := n
		if c.chained {
			if last, err = g.Call(ir.OpAsStridedScatter, at(5), "", n, src); err != nil {
				t.Fatal(err)
			}
		}
		g.Outputs = []*ir.Node{last}
		if c.returnOld {
			g.Outputs = append(g.Outputs, base)
		}
		if c.readOld {
			r, err := g.Call(ir.OpSum, ir.Attrs{}, "", base)
			if err != nil {
				t.Fatal(err)
			}
			g.Outputs = append(g.Outputs, r)
		}
		if c.resultReadsSrc {
			r, err := g.Call(ir.OpMul, ir.Attrs{}, "", src, ir.ScalarOf(2))
			if err != nil {
				t.Fatal(err)
			}
			g.Outputs = append(g.Outputs, r)
		}
		if c.viewOld {
			view := store.v.WithLayout(ir.Layout{Shape: []int{4}, Strides: []int{1}, Offset: 2})
			v := g.Const(view, []int{4}, Float32, dev, "")
			r, err := g.Call(ir.OpSum, ir.Attrs{}, "", v)
			if err != nil {
				t.Fatal(err)
			}
			g.Outputs = append(g.Outputs, r)
		}
		markInPlace(g, true, false)
		if n.Attrs.KeepDim != c.inPlace {
			t.Errorf("%s: in place %v, want %v", c.name, n.Attrs.KeepDim, c.inPlace)
		}
		if c.chained && !last.Attrs.KeepDim {
			t.Errorf("%s: the second write is not in place", c.name)
		}
	}
}

// A parameter's write stays in place when what is computed from its old
// contents feeds another storage's write (SGD's momentum buffer: d from p,
// buf = f(d) written, p = g(d, buf) written): the other write's value is
// a buffer, or read in the kernel that computes it, before p's write.
func TestMarkInPlaceThroughOtherWrites(t *testing.T) {
	p, buf := Zeros(Float32, 8), Zeros(Float32, 8)
	dev := p.v.Device()
	g := &ir.Graph{}
	call := graphCaller(t, g)
	whole := ir.StridedLayout(ir.Layout{Shape: []int{8}, Strides: []int{1}})
	pOld, bufOld := g.Const(p.v, []int{8}, Float32, dev, ""), g.Const(buf.v, []int{8}, Float32, dev, "")
	d := call(ir.OpMul, ir.Attrs{}, pOld, ir.ScalarOf(2))
	bufNew := call(ir.OpAdd, ir.Attrs{}, bufOld, d)
	writeBuf := call(ir.OpAsStridedScatter, whole, bufOld, bufNew)
	writeP := call(ir.OpAsStridedScatter, whole, pOld, call(ir.OpSub, ir.Attrs{}, d, bufNew))
	g.Outputs = []*ir.Node{writeBuf, writeP}
	markInPlace(g, true, false)
	if !writeBuf.Attrs.KeepDim || !writeP.Attrs.KeepDim {
		t.Errorf("in place: the buffer's write %v, the parameter's %v; want both", writeBuf.Attrs.KeepDim, writeP.Attrs.KeepDim)
	}
}

// Regressions found in review: each compares with the same function run
// eagerly on its own buffers.
func TestCompileWriteRegressions(t *testing.T) {
	t.Run("a result aliasing the written tensor keeps its values", func(t *testing.T) {
		cache := Zeros(Float32, 4)
		f := Compile(func(x *Tensor) *Tensor {
			before := cache.MulScalar(1) // simplified to a view of the cache
			cache.Copy(x)
			return before
		})
		first := f(Full(5, Float32, 4))
		second := f(Full(7, Float32, 4))
		checkClose(t, "first result", first, Float32, []int{4}, []float64{0, 0, 0, 0}, 0)
		checkClose(t, "second result", second, Float32, []int{4}, []float64{5, 5, 5, 5}, 0)
	})
	t.Run("segments writing different tensors do not share a program", func(t *testing.T) {
		c1, c2 := Zeros(Float32, 4), Ones(Float32, 4)
		f := Compile(func(x *Tensor) *Tensor {
			for _, c := range []*Tensor{c1, c2} {
				c.Narrow(0, 0, 2).Copy(x)
				x.Sum().Item() // a graph break
			}
			return x
		})
		f(Full(3, Float32, 2))
		checkClose(t, "c1", c1, Float32, []int{4}, []float64{3, 3, 0, 0}, 0)
		checkClose(t, "c2", c2, Float32, []int{4}, []float64{3, 3, 1, 1}, 0)
	})
	t.Run("reading values of a written tensor sees the write", func(t *testing.T) {
		mk := func(cache *Tensor) func(x *Tensor) *Tensor {
			return func(x *Tensor) *Tensor {
				cache.Copy(x)
				return x.MulScalar(cache.At(0))
			}
		}
		ec, cc := Zeros(Float32, 2), Zeros(Float32, 2)
		eager, compiled := mk(ec), Compile(mk(cc))
		for i := range 3 {
			x := Full(float64(i+2), Float32, 2)
			checkSame(t, fmt.Sprintf("call %d", i), compiled(x), eager(x))
		}
	})
	t.Run("writes run once with dynamic scalars and a break", func(t *testing.T) {
		mk := func(acc *Tensor) func(x *Tensor, s float64) *Tensor {
			return func(x *Tensor, s float64) *Tensor {
				acc.Copy(acc.Add(x.MulScalar(s)))
				acc.Sum().Item()
				return x
			}
		}
		ea, ca := Zeros(Float32, 2), Zeros(Float32, 2)
		eager, compiled := mk(ea), Compile(mk(ca), DynamicScalars(1))
		for i := range 3 {
			eager(Ones(Float32, 2), float64(i))
			compiled(Ones(Float32, 2), float64(i))
			checkSame(t, fmt.Sprintf("call %d", i), ca, ea)
		}
	})
	t.Run("a failed trace releases the tensors it writes", func(t *testing.T) {
		cache := Zeros(Float32, 4)
		f := Compile(func(x *Tensor, s float64) *Tensor {
			cache.Narrow(0, 0, 2).Copy(x.MulScalar(s))
			x.Reshape(3) // fails
			return x
		}, DynamicScalars(1))
		if err := Try(func() { f(Ones(Float32, 2), 1) }); err == nil {
			t.Fatal("the bad Reshape did not fail")
		}
		if y := cache.AddScalar(1); y.px != nil {
			t.Error("an eager op on the cache after the failed trace was traced")
		}
	})
	t.Run("an argument viewing a written tensor is refused, with breaks too", func(t *testing.T) {
		cache := Zeros(Float32, 4)
		f := Compile(func(a, x *Tensor) *Tensor {
			x.Sum().Item() // a graph break
			cache.Copy(x)
			return a.Sum()
		})
		f(Zeros(Float32, 2), Ones(Float32, 4)) // compiles
		expectError(t, "a view of the cache", func() { f(cache.Narrow(0, 0, 2), Ones(Float32, 4)) })
		g := Compile(func(a, x *Tensor) *Tensor { cache.Copy(x); return a.Sum() })
		expectError(t, "a view of the cache on the first call", func() { g(cache.Narrow(0, 0, 2), Ones(Float32, 4)) })
	})
	t.Run("segments of like structure read their own constants", func(t *testing.T) {
		ws := []*Tensor{Full(2, Float32, 2), Full(3, Float32, 2)}
		f := Compile(func(x *Tensor) *Tensor {
			for _, w := range ws {
				x = x.Mul(w)
				x.Sum().Item() // a graph break: two segments of one structure
			}
			return x
		})
		checkClose(t, "x*2*3", f(Ones(Float32, 2)), Float32, []int{2}, []float64{6, 6}, 0)
	})
}

type writeCase struct {
	name   string
	shapes [][]int
	f      func(st []*Tensor, x *Tensor) *Tensor
}

// Compiled functions that write captured tensors from their own old
// contents, in every shape markInPlace and the direct stores meet (a
// moment then a parameter reading it, partial then whole writes, a swap,
// a combo of writes of three shapes, reads through a reshape and a
// transpose of the written storage): each call gives eager's results and
// leaves eager's state, call after call (the first call builds the
// kernels and copies, the later ones write in place).
func TestCompiledWritesFromOldContents(t *testing.T) {
	cases := []writeCase{
		{"moment then param reads new moment", [][]int{{6}, {6}}, func(st []*Tensor, g *Tensor) *Tensor {
			m, p := st[0], st[1]
			m.Copy(m.MulScalar(0.9).Add(g))
			p.Copy(p.Sub(m.MulScalar(0.1)))
			return p.Sum()
		}},
		{"partial write then whole write (src first)", [][]int{{6}}, func(st []*Tensor, g *Tensor) *Tensor {
			b := st[0]
			s := g.MulScalar(2)
			b.Narrow(0, 0, 2).Copy(g.Narrow(0, 0, 2).Exp())
			b.Copy(s)
			return g.Sum()
		}},
		{"partial write then whole write", [][]int{{6}}, func(st []*Tensor, g *Tensor) *Tensor {
			b := st[0]
			b.Narrow(0, 0, 2).Copy(g.Narrow(0, 0, 2).Exp())
			b.Copy(g.MulScalar(2).Add(b))
			return g.Sum()
		}},
		{"old read feeds other storage write, then overwrite", [][]int{{6}, {6}}, func(st []*Tensor, g *Tensor) *Tensor {
			a, b := st[0], st[1]
			b.Copy(a.MulScalar(3))
			a.Copy(g.AddScalar(1))
			return b.Sum()
		}},
		{"swap via temp", [][]int{{6}, {6}}, func(st []*Tensor, g *Tensor) *Tensor {
			a, b := st[0], st[1]
			tmp := a.Mul(g.MulScalar(0).AddScalar(1))
			a.Copy(b.Add(g))
			b.Copy(tmp)
			return g.Sum()
		}},
		{"different shapes combo with write", [][]int{{6}, {3, 2}, {4}}, func(st []*Tensor, g *Tensor) *Tensor {
			st[0].Copy(st[0].MulScalar(0.5).Add(g))
			st[1].Copy(st[1].MulScalar(0.25).Add(g.Narrow(0, 0, 2).Sum()))
			st[2].Copy(st[2].Exp().Mul(g.Narrow(0, 0, 4)))
			return st[0].Sum().Add(st[1].Sum()).Add(st[2].Sum())
		}},
		{"read old through reshape then write whole", [][]int{{2, 3}}, func(st []*Tensor, g *Tensor) *Tensor {
			b := st[0]
			r := b.Reshape(6)
			b.Copy(r.Add(g).Reshape(2, 3))
			return b.Sum()
		}},
		{"transposed read of own storage", [][]int{{3, 3}}, func(st []*Tensor, g *Tensor) *Tensor {
			b := st[0]
			b.Copy(b.T().MulScalar(2).Add(g.Narrow(0, 0, 3)))
			return b.Sum()
		}},
	}
	for _, c := range cases {
		mk := func() []*Tensor {
			var st []*Tensor
			for i, s := range c.shapes {
				st = append(st, Randn(uint64(100+i), Float32, s...))
			}
			return st
		}
		es, cs := mk(), mk()
		ef := func(x *Tensor) *Tensor { return c.f(es, x) }
		cf := Compile(func(x *Tensor) *Tensor { return c.f(cs, x) })
		for call := range 4 {
			x := Randn(uint64(call), Float32, 6)
			what := fmt.Sprintf("%s call %d", c.name, call)
			// Within float32's tolerance: a fused kernel on a GPU contracts
			// x*a+b into one rounding where eager rounds twice.
			want := ef(x)
			checkClose(t, what, cf(x), Float32, want.Shape(), vals(want), 1)
			for i := range es {
				checkClose(t, fmt.Sprintf("%s state %d", what, i), cs[i], Float32, es[i].Shape(), vals(es[i]), 1)
			}
		}
	}
}

// A captured buffer shifted by one along itself (a rolling window): the
// written value is a view of the storage, so the write must not go in
// place, where its copy would read elements it had already overwritten.
func TestCompiledShiftAlongItself(t *testing.T) {
	const n = 1 << 20
	buf := Randn(7, Float32, n)
	f := Compile(func(g *Tensor) *Tensor {
		buf.Narrow(0, 0, 1).Copy(g)                       // makes the storage a written one
		buf.Narrow(0, 1, n-1).Copy(buf.Narrow(0, 0, n-1)) // shift right by one
		return g
	})
	for call := range 3 {
		before := vals(buf)
		g := Full(float64(call+1), Float32, 1)
		f(g)
		after := vals(buf)
		want := make([]float64, n)
		want[0] = float64(call + 1)
		want[1] = float64(call + 1)
		copy(want[2:], before[1:n-1])
		bad := 0
		for i := range want {
			if after[i] != want[i] {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("call %d: %d of %d elements wrong", call, bad, n)
		}
	}
}

// A matrix product that reads a weight's old contents without the weight's
// write depending on it (a backward's dX = dY·W beside the update of W)
// is ordered before the write, which then stays in place: the written
// value becomes After(value, token). With another reader that is not a
// fresh result, or in a graph with dynamic shapes, the write copies. The
// compiled function gives eager's values either way.
func TestMarkInPlaceOrdersLateProducts(t *testing.T) {
	build := func(lateReader *ir.Op) (*ir.Graph, *ir.Node) {
		w := Randn(1, Float32, 4, 4)
		g := &ir.Graph{}
		call := graphCaller(t, g)
		x := g.Input([]int{2, 4}, Float32, w.v.Device(), "")
		wOld := g.Const(w.v, []int{16}, Float32, w.v.Device(), "")
		w2 := call(ir.OpReshape, ir.Attrs{Dims: []int{4, 4}}, wOld)
		var late *ir.Node // a reader of the old w that is not an ancestor of the write
		if lateReader == ir.OpMul {
			late = call(lateReader, ir.Attrs{}, w2, ir.ScalarOf(3))
		} else {
			late = call(lateReader, ir.Attrs{}, x, w2)
		}
		upd := call(ir.OpSub, ir.Attrs{}, w2, call(ir.OpMul, ir.Attrs{}, w2, ir.ScalarOf(0.5)))
		write := call(ir.OpAsStridedScatter, ir.StridedLayout(ir.Layout{Shape: []int{4, 4}, Strides: []int{4, 1}}), wOld, upd)
		g.Outputs = []*ir.Node{late, write}
		return g, write
	}
	g, write := build(ir.OpMatMul)
	markInPlace(g, true, false)
	if !write.Attrs.KeepDim {
		t.Fatal("the write after a matrix product of the old weight is not in place")
	}
	if a, ok := write.Args[1].(*ir.Node); !ok || a.Op != ir.OpAfter {
		t.Errorf("the written value is %v, want After(…)", write.Args[1])
	}
	if err := g.Validate(); err != nil {
		t.Errorf("graph after ordering: %v", err)
	}
	for _, c := range []struct {
		name   string
		op     *ir.Op
		static bool
	}{{"a pointwise reader", ir.OpMul, true}, {"dynamic shapes", ir.OpMatMul, false}} {
		g, write := build(c.op)
		markInPlace(g, c.static, false)
		if write.Attrs.KeepDim {
			t.Errorf("%s: the write is in place", c.name)
		}
	}

	// End to end: an update of w beside a product that reads the old w.
	f := func(w *Tensor) func(x, dy *Tensor) *Tensor {
		return func(x, dy *Tensor) *Tensor {
			y := x.MatMul(w)
			dx := dy.MatMul(w.Transpose(0, 1)) // reads the old w; the update does not need it
			w.Copy(w.Sub(x.Transpose(0, 1).MatMul(y).MulScalar(0.01)))
			return dx
		}
	}
	we, wc := Randn(2, Float32, 5, 3), Randn(2, Float32, 5, 3)
	eager, compiled := f(we), Compile(f(wc))
	for call := range 3 {
		x, dy := Randn(uint64(3+call), Float32, 7, 5), Randn(uint64(9+call), Float32, 7, 3)
		want := eager(x, dy)
		got := compiled(x, dy)
		what := fmt.Sprintf("call %d", call)
		checkClose(t, what+": dx", got, Float32, want.Shape(), vals(want), 4)
		checkClose(t, what+": w", wc, Float32, we.Shape(), vals(we), 4)
	}
}

// graphCaller returns a function that adds a call of op to g, failing the
// test if the graph refuses it.
func graphCaller(t *testing.T, g *ir.Graph) func(op *ir.Op, attrs ir.Attrs, args ...ir.Value) *ir.Node {
	return func(op *ir.Op, attrs ir.Attrs, args ...ir.Value) *ir.Node {
		t.Helper()
		n, err := g.Call(op, attrs, "", args...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// A captured tensor the compiled function writes in place counts as
// written for autograd, as eagerly: a gradient that saved it before the
// call refuses to run after it, on every backend and mode.
func TestCompileWriteInPlaceBumpsVersion(t *testing.T) {
	modes := []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"reduce-overhead", []Option{WithMode(ReduceOverhead)}},
		{"eager backend", []Option{WithBackend("eager")}},
	}
	for _, m := range modes {
		for _, how := range []string{"IndexCopyInPlace", "Copy"} {
			cache := Ones(Float32, 4, 2)
			step := Compile(func(k, pos *Tensor) *Tensor {
				if how == "Copy" {
					cache.Narrow(0, 1, 1).Copy(k)
				} else {
					cache.IndexCopyInPlace(0, pos, k)
				}
				return k.Sum()
			}, m.opts...)
			for call := range 3 {
				w := Ones(Float32, 4, 2).SetRequiresGrad(true)
				y := cache.Mul(w).Sum() // saves cache for w's gradient
				step(Full(float64(call), Float32, 1, 2), FromSlice([]int64{int64(call)}))
				err := Try(func() { y.Backward() })
				if err == nil || !strings.Contains(err.Error(), "written in place after it was used") {
					t.Errorf("%s, %s, call %d: Backward after the write: %v, want the eager error", m.name, how, call, err)
				}
			}
		}
	}
}
