package tensor

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"gocompile/internal/stats"
	"gocompile/ir"
)

// argWriteCase is a function that writes its state arguments (views of
// parents the case makes) and reads them, called with fresh inputs on
// every call.
type argWriteCase struct {
	name  string
	dts   []DType
	state func(dt DType, dev Device) (parents, args []*Tensor)
	input func(dt DType, call int) []*Tensor // on the CPU
	fn    func(st, in []*Tensor) []*Tensor
}

var (
	writeFloatTypes = []DType{Float32, BFloat16}
	writeTypes      = []DType{Float32, BFloat16, Int64}
)

// seq is 0, 1, … n-1 in shape, of type dt on dev, scaled so that bfloat16
// holds every value exactly.
func seq(dt DType, dev Device, shape ...int) *Tensor {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return Arange(0, float64(n), 1, Float32).Reshape(shape...).To(dt).To(dev)
}

// plain makes the state of a case: each shape a tensor of its own, both
// parent and argument.
func plain(shapes ...[]int) func(dt DType, dev Device) ([]*Tensor, []*Tensor) {
	return func(dt DType, dev Device) ([]*Tensor, []*Tensor) {
		var ts []*Tensor
		for i, s := range shapes {
			ts = append(ts, seq(dt, dev, s...).AddScalar(float64(i)))
		}
		return ts, ts
	}
}

// filled is an input of each shape, every element call+1 (+ its index
// times step).
func filled(step float64, shapes ...[]int) func(dt DType, call int) []*Tensor {
	return func(dt DType, call int) []*Tensor {
		var ts []*Tensor
		for _, s := range shapes {
			ts = append(ts, seq(Float32, CPU, s...).MulScalar(step).AddScalar(float64(call+1)).To(dt))
		}
		return ts
	}
}

func argWriteCases() []argWriteCase {
	cases := []argWriteCase{
		{"Copy into a Narrow view", writeTypes, plain([]int{5, 3}), filled(1, []int{2, 3}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				x.Narrow(0, 1, 2).Copy(in[0].MulScalar(2))
				return []*Tensor{x.Sum(0), x}
			}},
		{"Copy into a strided Slice", writeTypes, plain([]int{7}), filled(1, []int{3}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				x.Slice(0, 1, 7, 2).Copy(in[0])
				return []*Tensor{x.MulScalar(1)}
			}},
		{"Fill and Set", writeTypes, plain([]int{3, 4}), filled(1, []int{4}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				x.Narrow(1, 1, 2).Fill(-1)
				x.Set(7, 2, 3)
				x.Select(0, 0).Copy(x.Select(0, 0).Add(in[0]))
				return []*Tensor{x.Sum(1)}
			}},
		{"IndexCopyInPlace at a position held in a tensor (a KV cache)", writeTypes, plain([]int{2, 6, 3}),
			func(dt DType, call int) []*Tensor {
				return []*Tensor{seq(Float32, CPU, 2, 1, 3).AddScalar(float64(10 * (call + 1))).To(dt), FromSlice([]int64{int64(call*5) % 6})}
			},
			func(st, in []*Tensor) []*Tensor {
				cache := st[0]
				cache.IndexCopyInPlace(1, in[1], in[0])
				return []*Tensor{cache.Sum(1)}
			}},
		{"IndexCopyInPlace into a transposed view", writeTypes, plain([]int{5, 3}),
			func(dt DType, call int) []*Tensor {
				return []*Tensor{seq(Float32, CPU, 3, 2).AddScalar(float64(call)).To(dt), FromSlice([]int64{int64(call % 5), 4})}
			},
			func(st, in []*Tensor) []*Tensor {
				st[0].T().IndexCopyInPlace(1, in[1], in[0])
				return []*Tensor{st[0].Sum(0)}
			}},
		{"IndexPutInPlace", writeTypes, plain([]int{5, 4}),
			func(dt DType, call int) []*Tensor {
				return []*Tensor{seq(Float32, CPU, 2, 4).AddScalar(float64(call)).To(dt), FromSlice([]int64{int64(call % 5), int64((call + 2) % 5)})}
			},
			func(st, in []*Tensor) []*Tensor {
				st[0].IndexPutInPlace([]*Tensor{in[1]}, in[0], false)
				return []*Tensor{st[0].Sum(1)}
			}},
		{"IndexPutInPlace accumulating at repeated positions", writeFloatTypes, plain([]int{5, 4}),
			func(dt DType, call int) []*Tensor {
				return []*Tensor{seq(Float32, CPU, 3, 4).AddScalar(float64(call)).To(dt), FromSlice([]int64{1, 3, 1})}
			},
			func(st, in []*Tensor) []*Tensor {
				st[0].IndexPutInPlace([]*Tensor{in[1]}, in[0], true)
				return []*Tensor{st[0].Sum(1)}
			}},
		{"IndexPutInPlace over two dims", writeTypes, plain([]int{4, 3, 2}),
			func(dt DType, call int) []*Tensor {
				return []*Tensor{seq(Float32, CPU, 2, 2).AddScalar(float64(call)).To(dt),
					FromSlice([]int64{0, int64(call%3 + 1)}), FromSlice([]int64{2, -1})}
			},
			func(st, in []*Tensor) []*Tensor {
				st[0].IndexPutInPlace([]*Tensor{in[1], in[2]}, in[0], false)
				return []*Tensor{st[0].Sum(2)}
			}},
		{"views taken before and after the write", writeTypes, plain([]int{4, 5}), filled(1, []int{4, 3}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				a, tr := x.Narrow(0, 0, 2), x.T()
				before := a.Sum(1)
				x.Narrow(1, 1, 3).Copy(in[0])
				b := x.Select(0, 1)
				return []*Tensor{before, a.Sum(1), tr.AddScalar(0), b.MulScalar(2), x.Narrow(0, 2, 2).Sum(1)}
			}},
		{"several writes, read in between", writeTypes, plain([]int{6}), filled(1, []int{3}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				x.Narrow(0, 0, 3).Copy(in[0])
				r1 := x.Sum()
				x.Narrow(0, 2, 3).Copy(x.Narrow(0, 0, 3).MulScalar(2))
				r2 := x.MulScalar(1)
				x.Set(5, 0)
				x.Narrow(0, 4, 2).Fill(-3)
				return []*Tensor{r1, r2, x.Sum()}
			}},
		{"a transposed argument", writeTypes,
			func(dt DType, dev Device) ([]*Tensor, []*Tensor) {
				p := seq(dt, dev, 4, 3)
				return []*Tensor{p}, []*Tensor{p.T()}
			},
			filled(1, []int{1, 4}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0] // [3, 4]
				x.Narrow(0, 1, 1).Copy(in[0])
				x.Select(1, 0).Fill(-2)
				return []*Tensor{x.Sum(0), x.Reshape(12)}
			}},
		{"an offset Narrow of a bigger tensor", writeTypes,
			func(dt DType, dev Device) ([]*Tensor, []*Tensor) {
				p := seq(dt, dev, 6, 4)
				return []*Tensor{p}, []*Tensor{p.Narrow(0, 2, 3)}
			},
			filled(1, []int{3, 2}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0] // [3, 4], rows 2-4 of the parent
				x.Narrow(1, 1, 2).Copy(in[0])
				return []*Tensor{x.Sum(1)}
			}},
		{"a column of a bigger tensor", writeTypes,
			func(dt DType, dev Device) ([]*Tensor, []*Tensor) {
				p := seq(dt, dev, 5, 3)
				return []*Tensor{p}, []*Tensor{p.Select(1, 1)}
			},
			func(dt DType, call int) []*Tensor {
				return []*Tensor{FromSlice([]int64{int64(call % 5)}), Full(float64(call+20), dt, 1)}
			},
			func(st, in []*Tensor) []*Tensor {
				x := st[0] // [5], stride 3
				x.IndexCopyInPlace(0, in[0], in[1])
				return []*Tensor{x.MulScalar(1)}
			}},
		{"a counter and a cache written on every call", writeTypes,
			func(dt DType, dev Device) ([]*Tensor, []*Tensor) {
				ts := []*Tensor{Zeros(Int64, 1).To(dev), Zeros(dt, 4, 2).To(dev)}
				return ts, ts
			},
			filled(1, []int{1, 2}),
			func(st, in []*Tensor) []*Tensor {
				count, cache := st[0], st[1]
				cache.IndexCopyInPlace(0, count, in[0])
				count.Copy(count.AddScalar(1))
				return []*Tensor{cache.Sum(0), count.MulScalar(1)}
			}},
		{"a 0-d argument", writeTypes, plain([]int{}), filled(1, []int{}),
			func(st, in []*Tensor) []*Tensor {
				st[0].Copy(st[0].Add(in[0]))
				return []*Tensor{st[0].MulScalar(2)}
			}},
		{"a view returned", writeTypes, plain([]int{4}), filled(1, []int{2}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				x.Narrow(0, 1, 2).Copy(in[0])
				return []*Tensor{x.Narrow(0, 0, 3), x.T()}
			}},
		{"a write through View", writeTypes, plain([]int{2, 3}), filled(1, []int{4}),
			func(st, in []*Tensor) []*Tensor {
				st[0].View(6).Narrow(0, 1, 4).Copy(in[0])
				return []*Tensor{st[0].Sum(0)}
			}},
		{"a write through Permute and Select", writeTypes, plain([]int{2, 3, 4}), filled(1, []int{2, 3}),
			func(st, in []*Tensor) []*Tensor {
				st[0].Permute(2, 0, 1).Select(0, 1).Copy(in[0])
				return []*Tensor{st[0].Sum(2)}
			}},
		{"a written value read from the old contents", writeFloatTypes, plain([]int{3, 3}), filled(0.5, []int{3}),
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				x.Copy(x.T().MulScalar(0.5).Add(in[0]))
				return []*Tensor{x.Sum()}
			}},
		{"two arguments written", writeTypes, plain([]int{3}, []int{2, 2}), filled(1, []int{3}),
			func(st, in []*Tensor) []*Tensor {
				a, b := st[0], st[1]
				a.Copy(a.Add(in[0]))
				b.Select(0, 1).Copy(a.Narrow(0, 0, 2))
				return []*Tensor{a.Sum().Add(b.Sum())}
			}},
	}
	for _, n := range []int{1, 3, 1023} {
		cases = append(cases, argWriteCase{fmt.Sprintf("size %d", n), writeTypes, plain([]int{n}),
			func(dt DType, call int) []*Tensor {
				return []*Tensor{Full(float64(call+1), dt, 1), FromSlice([]int64{int64(n - 1)}), Full(-5, dt, 1)}
			},
			func(st, in []*Tensor) []*Tensor {
				x := st[0]
				h := x.Narrow(0, n/2, n-n/2)
				h.Copy(h.Add(in[0]))
				x.IndexCopyInPlace(0, in[1], in[2])
				return []*Tensor{x.Sum(), x.Narrow(0, 0, (n+1)/2).AddScalar(0)}
			}})
	}
	return cases
}

// runArgWriteCases runs each case compiled with opts and eagerly, on
// state of its own on dev, four calls, comparing the results, the
// arguments and their parents after every call (within k times the
// dtype's tolerance); each compiles once.
func runArgWriteCases(t *testing.T, dev Device, k float64, opts ...Option) {
	for _, c := range argWriteCases() {
		for _, dt := range c.dts {
			what := fmt.Sprintf("%s, %v", c.name, dt)
			eParents, eArgs := c.state(dt, dev)
			cParents, cArgs := c.state(dt, dev)
			var st CompileStats
			compiled := Compile(c.fn, append(opts, WithStats(&st))...)
			for call := range 4 {
				in := c.input(dt, call)
				for i := range in {
					in[i] = in[i].To(dev)
				}
				want := c.fn(eArgs, in)
				var got []*Tensor
				if err := Try(func() { got = compiled(cArgs, in) }); err != nil {
					t.Errorf("%s, call %d: %v", what, call, err)
					break
				}
				for i := range want {
					checkClose(t, fmt.Sprintf("%s, call %d: result %d", what, call, i), got[i], want[i].DType(), want[i].Shape(), vals(want[i]), k)
				}
				for i := range eParents {
					checkClose(t, fmt.Sprintf("%s, call %d: state %d", what, call, i), cParents[i], eParents[i].DType(), eParents[i].Shape(), vals(eParents[i]), k)
				}
			}
			if n := st.Compiles.Load(); n != 1 {
				t.Errorf("%s: %d compiles over 4 calls, want 1", what, n)
			}
		}
	}
}

// A compiled function that writes its arguments, or views of them,
// leaves them as the same function run eagerly does, call after call,
// and returns what it returns.
func TestCompileWritesArguments(t *testing.T) { runArgWriteCases(t, CPU, 2) }

// ReduceOverhead on the CPU runs as Default: the writes reach the
// arguments the same way.
func TestCompileWritesArgumentsReduceOverhead(t *testing.T) {
	runArgWriteCases(t, CPU, 2, WithMode(ReduceOverhead))
}

// The eager backend runs the same graphs op by op.
func TestCompileWritesArgumentsEagerBackend(t *testing.T) {
	runArgWriteCases(t, CPU, 2, WithBackend("eager"))
}

// On a GPU, plainly and with each program replayed as a CUDA graph: the
// copy into the arguments follows every replay.
func TestGPUCompileWritesArguments(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	t.Run("default", func(t *testing.T) { runArgWriteCases(t, dev, 4) })
	t.Run("reduce-overhead", func(t *testing.T) {
		before := stats.GraphReplays.Load()
		runArgWriteCases(t, dev, 4, WithMode(ReduceOverhead))
		replays := stats.GraphReplays.Load() - before
		t.Logf("%d graph replays", replays)
		if replays == 0 {
			t.Error("no program was replayed as a CUDA graph")
		}
	})
}

// Writes of arguments against plain numbers: a row of a tensor, a row of
// a transposed one and an offset window of a bigger one, whose other
// elements stay as they were (on the default device, with every operand).
func TestCompileWritesArgumentsValues(t *testing.T) {
	f := Compile(func(x, y *Tensor) *Tensor {
		x.Narrow(0, 1, 1).Copy(y)
		return x.Sum(1)
	})
	x := seq(Float32, DefaultDevice(), 3, 2) // [[0 1] [2 3] [4 5]]
	got := f(x, FromSlice([]float32{7, 9}, 1, 2))
	checkClose(t, "a row: x", x, Float32, []int{3, 2}, []float64{0, 1, 7, 9, 4, 5}, 0)
	checkClose(t, "a row: the sums", got, Float32, []int{3}, []float64{1, 16, 9}, 0)

	p := seq(Float32, DefaultDevice(), 2, 3) // [[0 1 2] [3 4 5]]; p.T() is [[0 3] [1 4] [2 5]]
	got = f(p.T(), FromSlice([]float32{-1, -2}, 1, 2))
	checkClose(t, "a row of the transpose: the parent", p, Float32, []int{2, 3}, []float64{0, -1, 2, 3, -2, 5}, 0)
	checkClose(t, "a row of the transpose: the sums", got, Float32, []int{3}, []float64{3, -3, 7}, 0)

	big := seq(Float32, DefaultDevice(), 5, 2)
	got = f(big.Narrow(0, 2, 3), FromSlice([]float32{8, 8}, 1, 2))
	checkClose(t, "a window: the parent", big, Float32, []int{5, 2}, []float64{0, 1, 2, 3, 4, 5, 8, 8, 8, 9}, 0)
	checkClose(t, "a window: the sums", got, Float32, []int{3}, []float64{9, 16, 17}, 0)

	// One compile per layout: contiguous, transposed (the window is
	// contiguous too, at an offset).
	cache := Zeros(Int64, 4)
	step := Compile(func(c, pos *Tensor) *Tensor {
		c.IndexCopyInPlace(0, pos, pos.AddScalar(10))
		return c.Sum()
	})
	for p := range 4 {
		got := step(cache, FromSlice([]int64{int64(p)}))
		want := 0.0
		for q := 0; q <= p; q++ {
			want += float64(10 + q)
		}
		checkClose(t, fmt.Sprintf("cache step %d", p), got, Int64, nil, []float64{want}, 0)
	}
	checkClose(t, "the cache", cache, Int64, []int{4}, []float64{10, 11, 12, 13}, 0)
}

// A result that is the written argument itself is the caller's tensor,
// as eagerly; any other view of it is a new tensor holding the values
// the call wrote (eagerly it would be a view, changed by later writes).
func TestCompileWrittenArgumentResults(t *testing.T) {
	f := Compile(func(x, y *Tensor) (*Tensor, *Tensor, *Tensor) {
		x.Narrow(0, 0, 1).Copy(y)
		return x, x.Detach(), x.Narrow(0, 0, 2)
	})
	x := Zeros(Float32, 3)
	same, detached, view := f(x, Full(4, Float32, 1))
	if same != x || detached != x {
		t.Errorf("the argument returned: got %p and %p, want x %p", same, detached, x)
	}
	if view.v.SharesStorage(x.v) {
		t.Error("a view of the written argument shares its memory")
	}
	checkClose(t, "the view", view, Float32, []int{2}, []float64{4, 0}, 0)
	f(x, Full(6, Float32, 1))
	checkClose(t, "the view after the next call", view, Float32, []int{2}, []float64{4, 0}, 0)
	checkClose(t, "x after the next call", x, Float32, []int{3}, []float64{6, 0, 0}, 0)

	// A value computed from the argument before the write keeps the old
	// contents, even where the graph simplifies it to the argument.
	g := Compile(func(x, y *Tensor) *Tensor {
		old := x.MulScalar(1)
		x.Copy(y)
		return old
	})
	x = Full(1, Float32, 2)
	old := g(x, Full(2, Float32, 2))
	checkClose(t, "the old contents", old, Float32, []int{2}, []float64{1, 1}, 0)
	checkClose(t, "x", x, Float32, []int{2}, []float64{2, 2}, 0)
	old = g(x, Full(3, Float32, 2))
	checkClose(t, "the old contents, second call", old, Float32, []int{2}, []float64{2, 2}, 0)
}

// A written argument's dims are static: another size compiles again,
// while other arguments' dims may stay dynamic. Each layout of the
// argument is written back as it is.
func TestCompileWrittenArgumentGuards(t *testing.T) {
	fn := func(x, y *Tensor) *Tensor {
		x.Narrow(0, 0, 1).Copy(y.Sum().Reshape(1))
		return x.Sum().Add(y.Sum())
	}
	var st CompileStats
	f := Compile(fn, Dynamic(true), WithStats(&st))
	for i, c := range []struct{ nx, ny int }{{4, 3}, {4, 5}, {4, 7}, {6, 5}, {6, 2}} {
		xe, xc := seq(Float32, DefaultDevice(), c.nx), seq(Float32, DefaultDevice(), c.nx)
		y := seq(Float32, DefaultDevice(), c.ny)
		want := fn(xe, y)
		what := fmt.Sprintf("call %d (x [%d], y [%d])", i, c.nx, c.ny)
		checkClose(t, what, f(xc, y), Float32, nil, vals(want), 0)
		checkClose(t, what+": x", xc, Float32, []int{c.nx}, vals(xe), 0)
	}
	if n := st.Compiles.Load(); n != 2 {
		t.Errorf("%d compiles, want 2 (one per size of the written argument)", n)
	}

	// Contiguous and not are guarded apart; within each, any layout (at
	// an offset, transposed, strided) runs the same program.
	var gst CompileStats
	g := Compile(func(x, y *Tensor) *Tensor {
		x.Select(0, 1).Copy(y)
		return x.Sum(0)
	}, WithStats(&gst))
	layouts := []struct {
		name string
		of   func(p *Tensor) *Tensor // a [3, 3] view of a [6, 6] parent
	}{
		{"contiguous rows", func(p *Tensor) *Tensor { return p.Narrow(0, 0, 3).Narrow(1, 0, 3).Contiguous() }},
		{"transposed", func(p *Tensor) *Tensor { return p.Narrow(0, 1, 3).Narrow(1, 0, 3).T() }},
		{"strided", func(p *Tensor) *Tensor { return p.Slice(0, 0, 6, 2).Slice(1, 1, 6, 2) }},
		{"an offset window", func(p *Tensor) *Tensor { return p.View(36).Narrow(0, 7, 9).View(3, 3) }},
		{"transposed again", func(p *Tensor) *Tensor { return p.Narrow(0, 2, 3).Narrow(1, 3, 3).T() }},
	}
	for i, l := range layouts {
		pc, pe := seq(Float32, DefaultDevice(), 6, 6), seq(Float32, DefaultDevice(), 6, 6)
		x, xe := l.of(pc), l.of(pe)
		if l.name == "contiguous rows" {
			pc, pe = x, xe // a copy: its own parent
		}
		y := Full(float64(-i-1), Float32, 3)
		xe.Select(0, 1).Copy(y)
		checkClose(t, l.name, g(x, y), Float32, []int{3}, vals(xe.Sum(0)), 0)
		checkClose(t, l.name+": the parent", pc, Float32, pe.Shape(), vals(pe), 0)
	}
	if n := gst.Compiles.Load(); n != 2 {
		t.Errorf("%d compiles over five layouts, want 2 (contiguous or not)", n)
	}
}

// With graph breaks the writes land in their segments: later segments,
// and values read in Go, see them; values read before a write keep what
// they read. Under FullGraph reading a written argument's values is an
// error naming the break.
func TestCompileWrittenArgumentAcrossBreaks(t *testing.T) {
	fn := func(x, y *Tensor) []*Tensor {
		first := x.MulScalar(1) // simplified to x itself
		y.Sum().Item()          // a graph break before any write
		head := x.Narrow(0, 0, 2)
		old := x.MulScalar(1)
		x.Narrow(0, 1, 2).Copy(y)
		s := head.Sum().Item() // a graph break, reading through a view taken before the write
		mid := x.AddScalar(0)
		x.Narrow(0, 2, 2).Copy(y.MulScalar(s))
		v := x.At(3) // another, of the written argument itself
		return []*Tensor{first, old, mid, head.AddScalar(v), x}
	}
	layouts := map[string]func() (parent, x *Tensor){
		"contiguous": func() (*Tensor, *Tensor) { p := seq(Float32, DefaultDevice(), 5); return p, p },
		"a column":   func() (*Tensor, *Tensor) { p := seq(Float32, DefaultDevice(), 5, 3); return p, p.Select(1, 1) },
		"a window":   func() (*Tensor, *Tensor) { p := seq(Float32, DefaultDevice(), 8); return p, p.Narrow(0, 2, 5) },
	}
	for name, layout := range layouts {
		var st CompileStats
		f := Compile(fn, WithStats(&st))
		pe, xe := layout()
		pc, xc := layout()
		for call := range 3 {
			y := Full(float64(call+1), Float32, 2)
			want := fn(xe, y)
			got := f(xc, y)
			what := fmt.Sprintf("%s, call %d", name, call)
			for i := range want {
				checkClose(t, fmt.Sprintf("%s: result %d", what, i), got[i], Float32, want[i].Shape(), vals(want[i]), 0)
			}
			checkClose(t, what+": the parent", pc, Float32, pe.Shape(), vals(pe), 0)
			if got[4] != xc {
				t.Errorf("%s: the argument returned is not the caller's tensor", what)
			}
		}
		if st.Breaks.Load() == 0 {
			t.Errorf("%s: no graph breaks", name)
		}
	}

	g := Compile(func(x, y *Tensor) *Tensor { x.Copy(y); return x.MulScalar(x.Sum().Item()) }, FullGraph())
	err := Try(func() { g(Zeros(Float32, 2), Ones(Float32, 2)) })
	if err == nil || !strings.Contains(err.Error(), "graph break") {
		t.Errorf("FullGraph: %v, want an error naming the graph break", err)
	}
}

// Writes the compiled function cannot make as eagerly are errors naming
// the op, the shapes and the fix: into arguments that share memory, into
// an argument that shares memory with a tensor the function captures and
// reads or writes, and (as eagerly) into an Expand view.
func TestCompileWrittenArgumentErrors(t *testing.T) {
	expect := func(what string, f func(), words ...string) {
		t.Helper()
		err := Try(f)
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", what, err, w)
			}
		}
	}
	write := func(x, y *Tensor) *Tensor { x.Narrow(0, 0, 1).Copy(y.Narrow(0, 0, 1)); return y.Sum() }
	for _, breaks := range []bool{false, true} {
		fn := write
		if breaks {
			fn = func(x, y *Tensor) *Tensor { y.Sum().Item(); return write(x, y) }
		}
		f := Compile(fn)
		f(Zeros(Float32, 2, 3), Ones(Float32, 2, 3)) // compiles
		b := Zeros(Float32, 2, 3)
		name := fmt.Sprintf("(breaks %v) ", breaks)
		expect(name+"one tensor passed twice", func() { f(b, b) }, "Copy", "[2, 3]", "shares memory", "Clone")
		expect(name+"a view of the other argument", func() { f(b.Narrow(1, 0, 2).Contiguous(), b) })
		big := Zeros(Float32, 4, 3)
		expect(name+"disjoint views of one tensor", func() { f(big.Narrow(0, 0, 2), big.Narrow(0, 2, 2)) }, "argument tensor 0", "argument tensor 1")
		expect(name+"an Expand view", func() { f(Zeros(Float32, 1, 3).Expand(2, 3), Ones(Float32, 2, 3)) }, "Copy", "stride 0", "Contiguous")
	}
	// Separate tensors are not refused.
	if err := Try(func() { Compile(write)(Zeros(Float32, 2, 3), Zeros(Float32, 2, 3)) }); err != nil {
		t.Errorf("separate tensors: %v", err)
	}

	captured := Zeros(Float32, 2, 3)
	reads := Compile(func(x, y *Tensor) *Tensor { write(x, y); return captured.Sum() })
	reads(Zeros(Float32, 2, 3), Ones(Float32, 2, 3))
	expect("an argument that a captured tensor the function reads views", func() { reads(captured.Narrow(0, 0, 2), Ones(Float32, 2, 3)) },
		"Copy", "captures and reads", "Clone")
	readsFirst := Compile(func(x, y *Tensor) *Tensor { s := captured.Sum(); write(x, y); return s })
	expect("the same, read before the write", func() { readsFirst(captured, Ones(Float32, 2, 3)) }, "captures and reads")
	writes := Compile(func(x, y *Tensor) *Tensor { write(x, y); captured.Copy(y); return y })
	expect("an argument that a captured tensor the function writes views", func() { writes(captured, Ones(Float32, 2, 3)) },
		"a tensor the compiled function writes")
}

// Writing an argument that requires gradients is an error while
// gradients are recorded, as eagerly; inside NoGrad (an optimizer's step
// over parameters passed as arguments) it writes them. A value a gradient
// needs, written after it was used, is an error at Backward, as eagerly,
// not a gradient computed from the new contents.
func TestCompileWrittenArgumentGradients(t *testing.T) {
	write := func(x, y *Tensor) *Tensor { x.Copy(y); return y.Sum() }
	w := Ones(Float32, 3).SetRequiresGrad(true)
	err := Try(func() { write(w, Zeros(Float32, 3)) })
	if err == nil || !strings.Contains(err.Error(), "requires gradients") {
		t.Fatalf("eagerly: %v", err)
	}
	err = Try(func() { Compile(write)(w, Zeros(Float32, 3)) })
	if err == nil || !strings.Contains(err.Error(), "leaf that requires gradients") || !strings.Contains(err.Error(), "NoGrad") {
		t.Errorf("compiled: %v, want the eager error", err)
	}
	err = Try(func() {
		Compile(func(x, y *Tensor) *Tensor { x.Narrow(0, 0, 1).Copy(y); return y })(Ones(Float32, 3).SetRequiresGrad(true), Zeros(Float32, 1))
	})
	if err == nil || !strings.Contains(err.Error(), "gradients flow through") {
		t.Errorf("a view of a leaf: %v, want the eager error", err)
	}

	sgd := func(p, x *Tensor) *Tensor {
		loss := p.Mul(x).Sum()
		loss.Backward()
		NoGrad(func() { p.Copy(p.Sub(p.Grad().MulScalar(0.5))) })
		return loss
	}
	pe, pc := Full(1, Float32, 3).SetRequiresGrad(true), Full(1, Float32, 3).SetRequiresGrad(true)
	var st CompileStats
	step := Compile(sgd, WithStats(&st))
	for call := range 3 {
		x := seq(Float32, DefaultDevice(), 3).AddScalar(float64(call))
		want := sgd(pe, x)
		got := step(pc, x)
		what := fmt.Sprintf("step %d", call)
		checkClose(t, what+": loss", got, Float32, nil, vals(want), 1)
		checkClose(t, what+": p", pc, Float32, []int{3}, vals(pe), 1)
		checkClose(t, what+": grad", pc.Grad(), Float32, []int{3}, vals(pe.Grad()), 1)
	}
	if st.Compiles.Load() == 0 || st.EagerCalls.Load() != 0 {
		t.Errorf("the step compiled %d times and ran eagerly %d times, want compiled", st.Compiles.Load(), st.EagerCalls.Load())
	}

	// A result that requires gradients, Backward taken after the call:
	// the backward must not run the function, and its write, again.
	scaled := func(w, x *Tensor) *Tensor { x.Copy(x.MulScalar(2)); return x.Mul(w).Sum() }
	we, wc := Ones(Float32, 3).SetRequiresGrad(true), Ones(Float32, 3).SetRequiresGrad(true)
	xe, xc := seq(Float32, DefaultDevice(), 3), seq(Float32, DefaultDevice(), 3)
	f := Compile(scaled)
	for call := range 3 {
		want, got := scaled(we, xe), f(wc, xc)
		want.Backward()
		got.Backward()
		what := fmt.Sprintf("Backward after call %d", call)
		checkClose(t, what+": result", got, Float32, nil, vals(want), 0)
		checkClose(t, what+": x", xc, Float32, []int{3}, vals(xe), 0)
		checkClose(t, what+": the gradient", wc.Grad(), Float32, []int{3}, vals(we.Grad()), 0)
	}

	late := func(w, x *Tensor) *Tensor {
		y := x.Mul(w).Sum() // saves x for w's gradient
		NoGrad(func() { x.Copy(x.MulScalar(2)) })
		y.Backward()
		return y
	}
	if err := Try(func() { late(Ones(Float32, 2).SetRequiresGrad(true), Ones(Float32, 2)) }); err == nil {
		t.Fatal("eagerly: a saved value written before Backward is no error")
	}
	err = Try(func() { Compile(late)(Ones(Float32, 2).SetRequiresGrad(true), Ones(Float32, 2)) })
	if err == nil || !strings.Contains(err.Error(), "written in place after it was used") {
		t.Errorf("compiled: %v, want the eager error", err)
	}
	// The same with x captured.
	x := Ones(Float32, 2)
	err = Try(func() { Compile(func(w *Tensor) *Tensor { return late(w, x) })(Ones(Float32, 2).SetRequiresGrad(true)) })
	if err == nil || !strings.Contains(err.Error(), "written in place after it was used") {
		t.Errorf("compiled, x captured: %v, want the eager error", err)
	}
}

// A compiled function called from many goroutines, each writing its own
// arguments (a counter and a cache), gives each its own writes.
func TestCompileWritesArgumentsConcurrently(t *testing.T) {
	step := Compile(func(count, cache, k *Tensor) *Tensor {
		cache.IndexCopyInPlace(0, count, k)
		count.Copy(count.AddScalar(1))
		return cache.Sum(0)
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count, cache := Zeros(Int64, 1), Zeros(Float32, 6, 2)
			sum := 0.0
			for i := range 6 {
				v := float64(100*w + i)
				sum += v
				got := step(count, cache, Full(v, Float32, 1, 2))
				if g := got.Float64s(); g[0] != sum || g[1] != sum {
					t.Errorf("worker %d step %d: %v, want %v", w, i, g, sum)
					return
				}
			}
			if c := count.Int64s()[0]; c != 6 {
				t.Errorf("worker %d: count %d, want 6", w, c)
			}
		}()
	}
	wg.Wait()
}

// markInPlace lets a write of an argument (the input taken flat) update
// it in place in a whole function's graph, where nothing else reads the
// old contents after it; not in a segment's graph, whose inputs may be
// values other segments hold, nor where a result reads the old contents.
func TestMarkInPlaceArgument(t *testing.T) {
	build := func(readOld bool) (*ir.Graph, *ir.Node) {
		g := &ir.Graph{}
		call := graphCaller(t, g)
		in := g.Input([]int{2, 4}, Float32, CPU, "")
		src := g.Input([]int{4}, Float32, CPU, "")
		base := call(ir.OpReshape, ir.Attrs{Dims: []int{8}}, in)
		n := call(ir.OpAsStridedScatter, ir.StridedLayout(ir.Layout{Shape: []int{4}, Strides: []int{1}, Offset: 4}), base, src)
		g.Outputs = []*ir.Node{n}
		if readOld {
			g.Outputs = append(g.Outputs, call(ir.OpSum, ir.Attrs{}, in))
		}
		return g, n
	}
	for _, c := range []struct {
		name            string
		inputs, readOld bool
		inPlace         bool
	}{
		{"a whole function's graph", true, false, true},
		{"a segment's graph", false, false, false},
		{"the old contents read after the write", true, true, false},
	} {
		g, n := build(c.readOld)
		markInPlace(g, true, c.inputs)
		if n.Attrs.KeepDim != c.inPlace {
			t.Errorf("%s: in place %v, want %v", c.name, n.Attrs.KeepDim, c.inPlace)
		}
	}
}

// A KV cache passed as an argument is written in place once the program
// has run once: a step costs the written row, not copies of the cache (on
// the CPU, Go heap allocation per step; on a GPU, the peak of device
// memory in use).
func TestCompileWritesArgumentInPlace(t *testing.T) {
	const rows, width = 1 << 12, 64 // 1 MiB of float32
	step := Compile(func(cache, k, pos *Tensor) *Tensor {
		cache.IndexCopyInPlace(0, pos, k)
		return cache.Narrow(0, 0, 4).Sum(1)
	})
	cache, eager := Zeros(Float32, rows, width), Zeros(Float32, rows, width)
	run := func(p int) {
		k := Full(float64(p+1), Float32, 1, width)
		pos := FromSlice([]int64{int64(p)})
		got := step(cache, k, pos)
		eager.IndexCopyInPlace(0, pos, k)
		checkClose(t, fmt.Sprintf("step %d", p), got, Float32, []int{4}, vals(eager.Narrow(0, 0, 4).Sum(1)), 0)
	}
	run(0)
	run(1) // the first run of a program copies
	if d := cache.Device(); d != CPU {
		// On a GPU: the most device memory in use beyond the cache and
		// what the steps started with.
		ResetPeakMemoryStats(d)
		before := MemoryStats(d).Allocated
		for p := 2; p < 10; p++ {
			run(p)
		}
		extra := MemoryStats(d).PeakAllocated - before
		t.Logf("%d bytes of device memory at most beyond the start", extra)
		if extra >= rows*width*4/2 {
			t.Errorf("%d bytes of device memory in use beyond the start, for a cache of %d bytes: the write copies it", extra, rows*width*4)
		}
		checkSame(t, "the cache", cache, eager)
		return
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for p := 2; p < 10; p++ {
		run(p)
	}
	runtime.ReadMemStats(&after)
	perStep := (after.TotalAlloc - before.TotalAlloc) / 8
	t.Logf("%d bytes allocated per step", perStep)
	if perStep > rows*width*4/4 {
		t.Errorf("%d bytes allocated per step, for a cache of %d bytes: the write copies it", perStep, rows*width*4)
	}
	checkSame(t, "the cache", cache, eager)
}
