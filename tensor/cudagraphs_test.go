package tensor

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"gocompile/cuda"
	"gocompile/internal/stats"
)

// mlp2 is a two-layer MLP with a layer norm, closing over its weights.
func mlp2(d Device) func(x *Tensor) *Tensor {
	w1, b1 := Randn(2, Float32, 96, 64).MulScalar(0.1).To(d), Randn(3, Float32, 96).To(d)
	w2, b2 := Randn(4, Float32, 48, 96).MulScalar(0.1).To(d), Randn(5, Float32, 48).To(d)
	g := Randn(6, Float32, 48).To(d)
	return func(x *Tensor) *Tensor {
		h := x.Linear(w1, b1).GELU()
		return h.Linear(w2, b2).SiLU().LayerNorm([]int{48}, g, nil, 1e-5)
	}
}

// Replayed graphs compute what plain launches compute, bit for bit, over
// many calls with new input data each time; a call's result is not
// overwritten by later calls; each new shape gets its own graph.
func TestGPUReduceOverheadReplays(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	f := mlp2(dev)
	plain := Compile(f)
	graphed := Compile(f, WithMode(ReduceOverhead))
	before := stats.GraphReplays.Load()
	type call struct {
		out  *Tensor
		want []float64
	}
	var calls []call
	for i := range 20 {
		rows := []int{8, 3}[i%2] // two shapes: two graphs
		x := Randn(uint64(100+i), Float32, rows, 64).To(dev)
		want := plain(x).Float64s()
		out := graphed(x)
		calls = append(calls, call{out, want})
	}
	for i, c := range calls { // read only now: after every later replay
		got := c.out.Float64s()
		for j := range got {
			if got[j] != c.want[j] && !(math.IsNaN(got[j]) && math.IsNaN(c.want[j])) {
				t.Fatalf("call %d: element %d is %v after later calls, plain launches give %v", i, j, got[j], c.want[j])
			}
		}
	}
	// Per shape: a plain first call, a captured second, replays after.
	if n := stats.GraphReplays.Load() - before; n != 18 {
		t.Errorf("%d graph replays, want 18", n)
	}
}

// Many goroutines calling one ReduceOverhead function at once each get
// their own correct results.
func TestGPUReduceOverheadConcurrent(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	f := mlp2(dev)
	plain := Compile(f)
	graphed := Compile(f, WithMode(ReduceOverhead))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				x := Randn(uint64(1000*w+i), Float32, 8, 64).To(dev)
				got, want := graphed(x).Float64s(), plain(x).Float64s()
				for j := range got {
					if got[j] != want[j] {
						errs <- fmt.Errorf("worker %d call %d: element %d is %v, want %v", w, i, j, got[j], want[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A program with an index op is captured: its bounds check goes to the
// device's fault log instead of waiting for the device, so replays give
// the plain result, call after call, with new indices.
func TestGPUReduceOverheadIndexSelect(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	f := Compile(func(x, idx *Tensor) *Tensor { return x.MulScalar(2).IndexSelect(0, idx).AddScalar(1) }, WithMode(ReduceOverhead))
	x := Randn(1, Float32, 6, 5)
	before := stats.GraphReplays.Load()
	for i := range 5 {
		idx := FromSlice([]int64{int64(4 - i), 0, int64(i) % 6}, 3)
		want := x.MulScalar(2).IndexSelect(0, idx).AddScalar(1).Float64s()
		got := f(x.To(dev), idx.To(dev)).Float64s()
		for j := range got {
			if math.Abs(got[j]-want[j]) > 1e-6 {
				t.Fatalf("call %d: element %d is %v, want %v", i, j, got[j], want[j])
			}
		}
	}
	if n := stats.GraphReplays.Load() - before; n != 4 {
		t.Errorf("%d replays over 5 calls, want 4 (the first call runs plainly)", n)
	}
}

// On the CPU, ReduceOverhead runs the compiled program plainly.
func TestReduceOverheadOnCPU(t *testing.T) {
	f := mlp2(CPU)
	g := Compile(f, WithMode(ReduceOverhead))
	for i := range 3 {
		x := Randn(uint64(i), Float32, 4, 64).To(CPU)
		nearValues(t, fmt.Sprint("call ", i), g(x), f(x))
	}
}

// A program with a library GEMM (cuBLAS, for more than 64 rows) is not
// captured, since a replay could not point the library's kernel at new
// inputs: it runs plainly, and every call reads its own input.
func TestGPUReduceOverheadLibraryKernel(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	buf := captureLogs(t, "cudagraphs")
	w := Randn(2, Float32, 48, 64).MulScalar(0.1).To(dev)
	f := func(x *Tensor) *Tensor { return x.Linear(w, nil).Tanh() }
	g := Compile(f, WithMode(ReduceOverhead))
	before := stats.GraphReplays.Load()
	for i := range 5 {
		x := Randn(uint64(50+i), Float32, 100, 64).To(dev)
		nearValues(t, fmt.Sprint("call ", i), g(x), f(x))
	}
	if n := stats.GraphReplays.Load() - before; n != 0 {
		t.Errorf("%d graph replays of a program with a library kernel, want none", n)
	}
	if log := buf.String(); !strings.Contains(log, "cannot capture") {
		t.Errorf("no capture fallback logged:\n%s", log)
	} else {
		t.Log(log)
	}
}

// A decode-like step that embeds a token, writes a captured cache in place
// at a position held in a tensor and attends over the cache is captured
// and replayed: each replay writes the cache where the call says, the
// results and the cache equal an eager twin's step after step, and a bad
// position met in a replay is an error at the next read of device memory,
// naming the op, with the cache left unwritten.
func TestGPUReduceOverheadWritesCache(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	for _, dt := range []DType{Float32, BFloat16} {
		const vocab, dim, heads, kvHeads, seq = 50, 32, 4, 2, 40
		emb := Randn(1, Float32, vocab, dim).To(dt).To(dev)
		wk := Randn(2, Float32, kvHeads*8, dim).MulScalar(0.2).To(dt).To(dev)
		wq := Randn(3, Float32, heads*8, dim).MulScalar(0.2).To(dt).To(dev)
		keyPos := Arange(0, seq, 1, Int64).To(dev)
		step := func(cache *Tensor) func(tok, pos *Tensor) *Tensor {
			return func(tok, pos *Tensor) *Tensor {
				x := Embedding(tok, emb)                                                  // [1, 1, dim]
				k := x.Linear(wk, nil).Reshape(1, 1, kvHeads, 8).Transpose(1, 2)          // [1, kv, 1, 8]
				q := x.Linear(wq, nil).Reshape(1, 1, heads, 8).Transpose(1, 2)            // [1, heads, 1, 8]
				cache.IndexCopyInPlace(2, pos, k)                                         // [1, kv, seq, 8]
				mask := keyPos.Unsqueeze(0).Le(pos.Unsqueeze(1))                          // [1, seq]
				return ScaledDotProductAttention(q, cache, cache, mask, false, 0).Sum(-1) // [1, heads, 1]
			}
		}
		eagerCache, graphCache := Zeros(dt, 1, kvHeads, seq, 8).To(dev), Zeros(dt, 1, kvHeads, seq, 8).To(dev)
		eager, graphed := step(eagerCache), Compile(step(graphCache), WithMode(ReduceOverhead))
		before := stats.GraphReplays.Load()
		for p := range 12 {
			tok := FromSlice([]int64{int64(p*7) % vocab}, 1, 1).To(dev)
			pos := FromSlice([]int64{int64(p)}, 1).To(dev)
			want := eager(tok, pos)
			got := graphed(tok, pos)
			what := fmt.Sprintf("%v step %d", dt, p)
			// Eager products (cuBLAS) and the generated GEMM round apart.
			checkClose(t, what, got, dt, want.Shape(), want.Float64s(), 16)
			checkClose(t, what+": the cache", graphCache, dt, eagerCache.Shape(), eagerCache.Float64s(), 16)
		}
		if n := stats.GraphReplays.Load() - before; n < 10 {
			t.Errorf("%v: %d graph replays over 12 steps, want 10 (a plain first call, a captured second)", dt, n)
		}
		// A position past the cache: the replay skips the write and the
		// next read reports it.
		bad := FromSlice([]int64{seq + 3}, 1).To(dev)
		out := graphed(FromSlice([]int64{1}, 1, 1).To(dev), bad)
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err, _ = r.(error)
				}
			}()
			out.Float64s()
			return nil
		}()
		// Compile records IndexCopyInPlace as AsStridedIndexCopy.
		if err == nil || !strings.Contains(err.Error(), "IndexCopy") || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%v: a bad position in a replay: error %v, want one naming the index copy and the range", dt, err)
		}
		checkClose(t, fmt.Sprintf("%v: the cache after the bad step", dt), graphCache, dt, eagerCache.Shape(), eagerCache.Float64s(), 16)
	}
}

// A replayed graph of small generated kernels, each reading what the one
// before wrote (pointwise chains, a combo of slices, a row norm, a column
// sum, an index write into a captured cache, a decode attention),
// launches them as programmatic dependents (sm_90 on) and computes what
// plain launches compute, bit for bit, call after call.
func TestGPUReduceOverheadDependentKernels(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	g := Randn(7, Float32, 64).To(dev)
	cache := Zeros(Float32, 1, 2, 16, 32).To(dev)
	f := func(x, pos *Tensor) *Tensor {
		h := x.Mul(x).AddScalar(1).Sqrt() // [1, 1, 128]
		q := h.Narrow(2, 0, 64).Reshape(1, 1, 2, 32).Sin()
		k := h.Narrow(2, 64, 64).Reshape(1, 1, 2, 32).Cos().MulScalar(2)
		cache.IndexCopyInPlace(2, pos, k.Transpose(1, 2))
		a := ScaledDotProductAttention(q.Transpose(1, 2), cache, cache, nil, false, 0) // [1, 2, 1, 32]
		y := a.Reshape(1, 1, 64).RMSNorm([]int{64}, g, 1e-5)
		return y.Add(y.SumKeepDim(1)).Exp()
	}
	plain := Compile(f)
	graphed := Compile(f, WithMode(ReduceOverhead))
	before := cuda.DependentLaunches()
	saved := cache.AddScalar(0)
	for i := range 6 {
		x := Randn(uint64(200+i), Float32, 1, 1, 128).To(dev)
		pos := FromSlice([]int64{int64(i)}).To(dev)
		cache.Copy(saved)
		want := plain(x, pos).Float64s()
		wantCache := cache.Float64s()
		cache.Copy(saved)
		got := graphed(x, pos).Float64s()
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("call %d: element %d is %v replayed, %v launched plainly", i, j, got[j], want[j])
			}
		}
		for j, v := range cache.Float64s() {
			if v != wantCache[j] {
				t.Fatalf("call %d: cache element %d is %v replayed, %v launched plainly", i, j, v, wantCache[j])
			}
		}
		saved = cache.AddScalar(0)
	}
	if gpuArch(dev) >= 90 && cuda.DependentLaunches() == before {
		t.Errorf("no kernel launched as a dependent")
	}
}
