package tensor

import (
	"fmt"
	"testing"

	"gocompile/internal/stats"
)

// A cast of a captured storage read by two kernels, one of them ordered
// after a product by an in-place write (After): the cast is split for its
// readers before in-place writes are decided, so no copy of it reads the
// storage after that storage's own in-place write.
func TestSplitCastBeforeInPlaceWrites(t *testing.T) {
	step := func(A, B *Tensor) func(x *Tensor) *Tensor {
		return func(x *Tensor) *Tensor {
			c := B.To(Float32)
			B.Copy(c.MulScalar(2))
			pa := x.MatMul(A)
			A.Copy(c)
			return pa
		}
	}
	mk := func() (*Tensor, *Tensor) { return Zeros(Float32, 4, 4), Randn(1, Float32, 4, 4).To(Float64) }
	ea, eb := mk()
	ca, cb := mk()
	eager, compiled := step(ea, eb), Compile(step(ca, cb))
	for call := range 4 {
		x := Randn(uint64(10+call), Float32, 4, 4)
		what := fmt.Sprintf("call %d", call)
		checkSame(t, what, compiled(x), eager(x))
		checkSame(t, what+": A", ca, ea)
		checkSame(t, what+": B", cb, eb)
	}
}

// Moved and split casts give eager's values bit for bit: Cat parts of
// other types (promoted first), integer and bool casts read through views,
// and a cast read whole and through views.
func TestCastPassesParity(t *testing.T) {
	x16 := Randn(1, Float32, 3, 8).MulScalar(300).To(Float16)
	xb := Randn(2, Float32, 3, 4).MulScalar(300).To(BFloat16)
	x64 := Randn(3, Float32, 3, 8).MulScalar(1e5).To(Float64)
	for _, c := range []struct {
		name string
		f    func() *Tensor
	}{
		{"cat of float16 and bfloat16 to bfloat16", func() *Tensor {
			return Cat([]*Tensor{x16.Narrow(1, 0, 4).Exp(), xb.Exp()}, 1).To(BFloat16)
		}},
		{"cat of float16 and bfloat16 to float16", func() *Tensor { return Cat([]*Tensor{x16.Narrow(1, 0, 4), xb}, 1).To(Float16) }},
		{"cat of float64 and float16 to int32", func() *Tensor {
			return Cat([]*Tensor{x64.Narrow(1, 0, 4), x16.Narrow(1, 0, 4)}, 1).To(Int32)
		}},
		{"cat of float64 and float16 to bool", func() *Tensor {
			return Cat([]*Tensor{x64.Narrow(1, 0, 4).MulScalar(0), x16.Narrow(1, 0, 4)}, 1).To(Bool)
		}},
		{"int32 cast through slices", func() *Tensor {
			c := x64.To(Int32)
			return c.Narrow(1, 0, 4).Add(c.Narrow(1, 4, 4).T().T())
		}},
		{"bool cast through slices", func() *Tensor {
			c := x64.To(Bool)
			return c.Narrow(1, 0, 4).To(Float32).Add(c.Narrow(1, 4, 4).To(Float32))
		}},
		{"expanded cast", func() *Tensor {
			c := x64.Narrow(0, 0, 1).To(Float32)
			return c.Expand(5, 8).Exp().Add(c.Expand(5, 8).Squeeze())
		}},
		{"narrowing cast, three readers", func() *Tensor {
			c := x64.To(Float32)
			return c.Exp().Add(c.Neg()).Add(c.T().T())
		}},
	} {
		checkSame(t, c.name, Compile(c.f)(), c.f())
	}
}

// A cast that a product reads through Expand stays below the Expand: the
// product's operand is not a cast materialised at the expanded size.
func TestCastStaysBelowExpand(t *testing.T) {
	w := Randn(2, Float32, 256, 256)
	f := func(x *Tensor) *Tensor { return x.To(Float32).Expand(4096, 256).MatMul(w) }
	x := Randn(1, Float32, 1, 256).To(Float64)
	checkSame(t, "values", Compile(f)(x), f(x))
	e, err := Explain(f, x)
	if err != nil {
		t.Fatal(err)
	}
	if expanded := int64(4096 * 256 * 4); e.PeakBytes >= expanded {
		t.Errorf("peak %d bytes, at least the expanded cast's %d: %q", e.PeakBytes, expanded, e.Regions)
	}
}

// A graph whose casts are split partitions once: a second compile of it
// rebuilds the cached fusion layout.
func TestSplitCastsLayoutCached(t *testing.T) {
	f := func(x *Tensor) *Tensor {
		c := x.To(Float64)
		return c.Exp().Add(c.Neg())
	}
	x := Randn(1, Float32, 4, 8)
	checkSame(t, "first", Compile(f)(x), f(x))
	before := stats.Partitions.Load()
	checkSame(t, "second", Compile(f)(x), f(x))
	if n := stats.Partitions.Load() - before; n != 0 {
		t.Errorf("the second compile partitioned %d graphs, want 0 (the cached layout)", n)
	}
}
