package tensor

import (
	"fmt"
	"sync"
	"testing"
)

// A compiled function computes from the tensors it captured on every
// call, as eager code does: ops whose operands are captured tensors alone
// are graph ops reading them by reference (a weight updated between calls
// is seen), and their values written into captured tensors are written
// on every call (a position counter, a running sum, a filled buffer),
// compiled plainly and replayed as a CUDA graph.
func TestCompiledComputesFromCapturedTensors(t *testing.T) {
	type state struct{ w, pos, acc, buf, rows *Tensor }
	mk := func() *state {
		return &state{
			w:    Randn(1, Float32, 4, 3),
			pos:  Zeros(Float32),
			acc:  Zeros(Float32, 4, 3),
			buf:  Zeros(Float32, 5),
			rows: Zeros(Float32, 6, 3),
		}
	}
	f := func(s *state) func(x *Tensor) *Tensor {
		return func(x *Tensor) *Tensor {
			s.pos.Copy(s.pos.AddScalar(1))      // a counter
			s.acc.Copy(s.acc.Add(s.w.Mul(s.w))) // from captured tensors only
			s.buf.Fill(2)                       // a fill
			idx := FromSlice([]int64{1, 4}).ToDevice(s.w.Device())
			s.rows.IndexCopyInPlace(0, idx, s.w.Narrow(0, 0, 2)) // index and source captured
			return x.MatMul(s.w.Add(s.w.T().T())).Add(s.pos)     // a weight's value each call
		}
	}
	for _, mode := range []Mode{Default, ReduceOverhead} {
		es, cs := mk(), mk()
		eager, compiled := f(es), Compile(f(cs), WithMode(mode))
		for call := range 4 {
			what := fmt.Sprintf("%v call %d", mode, call)
			x := Randn(uint64(10+call), Float32, 2, 4)
			want := eager(x)
			checkClose(t, what, compiled(x), Float32, want.Shape(), vals(want), 1)
			for i, pair := range [][2]*Tensor{{cs.pos, es.pos}, {cs.acc, es.acc}, {cs.buf, es.buf}, {cs.rows, es.rows}} {
				checkClose(t, fmt.Sprintf("%s state %d", what, i), pair[0], Float32, pair[1].Shape(), vals(pair[1]), 1)
			}
			// The weights change between calls, outside the function.
			es.w.Copy(es.w.MulScalar(0.5).AddScalar(0.25))
			cs.w.Copy(cs.w.MulScalar(0.5).AddScalar(0.25))
			es.buf.Copy(Zeros(Float32, 5))
			cs.buf.Copy(Zeros(Float32, 5))
		}
	}
}

// Set inside a compiled function is refused with a clear error: it would
// write once, while tracing.
func TestCompiledSetRefused(t *testing.T) {
	buf := Zeros(Float32, 3)
	f := Compile(func(x *Tensor) *Tensor {
		buf.Set(1, 0)
		return x.Neg()
	})
	expectError(t, "Set while tracing", func() { f(Ones(Float32, 3)) })
}

// Eager ops that other goroutines run while a function is traced are not
// recorded into its graph: each goroutine's results stay its own.
func TestTracingRecordsOnlyItsGoroutine(t *testing.T) {
	w := Randn(2, Float32, 64)
	want := vals(w.Mul(w).AddScalar(1))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, 1)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got := vals(w.Mul(w).AddScalar(1))
				for i := range want {
					if got[i] != want[i] {
						select {
						case errs <- fmt.Sprintf("element %d is %v eagerly, want %v", i, got[i], want[i]):
						default:
						}
						return
					}
				}
			}
		}()
	}
	for i := range 20 {
		f := Compile(func(x *Tensor) *Tensor { return x.Add(w.Mul(w).MulScalar(float64(i))) })
		f(Ones(Float32, 64))
	}
	close(stop)
	wg.Wait()
	select {
	case e := <-errs:
		t.Error(e)
	default:
	}
}
