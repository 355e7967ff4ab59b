package tensor

import (
	"fmt"
	"testing"
)

// refRepeat is torch.Tensor.repeat by index arithmetic over float64
// values in row-major order.
func refRepeat(v []float64, shape, counts []int) ([]float64, []int) {
	for len(shape) < len(counts) {
		shape = append([]int{1}, shape...)
	}
	out := make([]int, len(counts))
	for i, c := range counts {
		out[i] = c * shape[i]
	}
	res := make([]float64, numel(out))
	idx := make([]int, len(out))
	for o := range res {
		rem, src := o, 0
		for d := len(out) - 1; d >= 0; d-- {
			idx[d] = rem % out[d]
			rem /= out[d]
		}
		for d := range out {
			src = src*shape[d] + idx[d]%shape[d]
		}
		res[o] = v[src]
	}
	return res, out
}

// refPad is torch.nn.functional.pad in constant mode by index arithmetic.
func refPad(v []float64, shape, pads []int, value float64) ([]float64, []int) {
	r := len(shape)
	before := make([]int, r)
	out := append([]int(nil), shape...)
	for j := 0; j < len(pads)/2; j++ {
		d := r - 1 - j
		before[d] = pads[2*j]
		out[d] += pads[2*j] + pads[2*j+1]
	}
	res := make([]float64, numel(out))
	idx := make([]int, r)
	for o := range res {
		rem, src, inside := o, 0, true
		for d := r - 1; d >= 0; d-- {
			idx[d] = rem % out[d]
			rem /= out[d]
		}
		for d := range r {
			i := idx[d] - before[d]
			if i < 0 || i >= shape[d] {
				inside = false
				break
			}
			src = src*shape[d] + i
		}
		res[o] = value
		if inside {
			res[o] = v[src]
		}
	}
	return res, out
}

// Repeat and Pad against index-arithmetic references, over every dtype,
// odd sizes, non-contiguous inputs, and compiled against eager.
func TestRepeatPad(t *testing.T) {
	layouts := []layout{lay(1), lay(3), lay(1023), lay(3, 5), lay(2, 1, 4), lay(),
		layTransposed, layStepCols, layExpandCol, layTStep}
	type op struct {
		name  string
		ok    func(shape []int) bool
		apply func(*Tensor) *Tensor
		ref   func(v []float64, shape []int) ([]float64, []int)
	}
	var ops []op
	for _, counts := range [][]int{{2}, {1, 3}, {3, 1, 2}, {0, 2}, {2, 1, 1, 1}} {
		ops = append(ops, op{
			name:  fmt.Sprintf("Repeat%v", counts),
			ok:    func(shape []int) bool { return len(counts) >= len(shape) },
			apply: func(x *Tensor) *Tensor { return x.Repeat(counts...) },
			ref:   func(v []float64, shape []int) ([]float64, []int) { return refRepeat(v, shape, counts) },
		})
	}
	for _, p := range []struct {
		pads  []int
		value float64
	}{{[]int{1, 2}, -1.5}, {[]int{0, 3}, 0}, {[]int{2, 0, 1, 1}, 7}, {[]int{-1, 1}, 2}, {[]int{1, -1, 0, 2}, 1}} {
		ops = append(ops, op{
			name: fmt.Sprintf("Pad%v,%g", p.pads, p.value),
			ok: func(shape []int) bool {
				if len(p.pads)/2 > len(shape) {
					return false
				}
				for j := 0; j < len(p.pads)/2; j++ {
					d := len(shape) - 1 - j
					if shape[d]+min(p.pads[2*j], 0)+min(p.pads[2*j+1], 0) < 1 {
						return false // cropped away: refPad does not crop
					}
				}
				return true
			},
			apply: func(x *Tensor) *Tensor { return x.Pad(p.pads, p.value) },
			ref: func(v []float64, shape []int) ([]float64, []int) {
				// Crop first (negative amounts), then pad the rest.
				x := build(v, Float64, shape)
				pads := append([]int(nil), p.pads...)
				for j := 0; j < len(pads)/2; j++ {
					d := len(shape) - 1 - j
					lo, hi := max(-pads[2*j], 0), max(-pads[2*j+1], 0)
					x = x.Narrow(d, lo, x.Size(d)-lo-hi)
					pads[2*j], pads[2*j+1] = max(pads[2*j], 0), max(pads[2*j+1], 0)
				}
				return refPad(vals(x), x.Shape(), pads, p.value)
			},
		})
	}
	seed := uint64(1)
	for _, o := range ops {
		for _, dt := range allTypes {
			for _, l := range layouts {
				x := l.make(seed, dt, domNormal)
				seed++
				if !o.ok(x.Shape()) {
					continue
				}
				what := fmt.Sprintf("%s of %v %s", o.name, dt, l.name)
				want, shape := o.ref(vals(x), x.Shape())
				got := o.apply(x)
				// A repeat or pad moves values: exact in every dtype (the
				// fill is representable in each dtype but bool, where 0
				// and non-zero compare as stored).
				if dt == Bool {
					for i := range want {
						want[i] = b2f(want[i] != 0)
					}
				}
				checkClose(t, what, got, dt, shape, want, 0)
				checkSame(t, what+", compiled", Compile(o.apply)(x), got)
			}
		}
	}
}

// Repeat and Pad refuse what PyTorch refuses, naming the op.
func TestRepeatPadErrors(t *testing.T) {
	x := Ones(Float32, 2, 3)
	for _, c := range []struct {
		what string
		f    func()
	}{
		{"fewer counts than dims", func() { x.Repeat(2) }},
		{"a negative count", func() { x.Repeat(1, -1) }},
		{"an odd number of amounts", func() { x.Pad([]int{1}, 0) }},
		{"more pairs than dims", func() { x.Pad([]int{1, 1, 1, 1, 1, 1}, 0) }},
		{"cropping past the dim", func() { x.Pad([]int{-2, -2}, 0) }},
		{"padding an empty dim", func() { Zeros(Float32, 2, 0).Pad([]int{1, 1}, 0) }},
	} {
		expectError(t, c.what, c.f)
	}
}
