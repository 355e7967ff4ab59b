package tensor

import (
	"fmt"
	"math"
	"testing"
)

// refSDPA is attention in float64 loops over row-major values: q [B, Hq,
// L, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev], mask [L, S] (nil, bool as
// 0/1 or additive), query head h reading key head h/(Hq/Hkv).
func refSDPA(q, k, v, mask []float64, boolMask bool, B, Hq, Hkv, L, S, E, Ev int, causal bool, scale float64) []float64 {
	out := make([]float64, B*Hq*L*Ev)
	group := Hq / Hkv
	for b := range B {
		for h := range Hq {
			kh := h / group
			for i := range L {
				scores := make([]float64, S)
				top := math.Inf(-1)
				for j := range S {
					dot := 0.0
					for e := range E {
						dot += q[((b*Hq+h)*L+i)*E+e] * k[((b*Hkv+kh)*S+j)*E+e]
					}
					s := dot * scale
					if causal && j > i {
						s = math.Inf(-1)
					}
					if mask != nil {
						if boolMask && mask[i*S+j] == 0 {
							s = math.Inf(-1)
						} else if !boolMask {
							s += mask[i*S+j]
						}
					}
					scores[j] = s
					top = math.Max(top, s)
				}
				sum := 0.0
				for j := range scores {
					scores[j] = math.Exp(scores[j] - top)
					sum += scores[j]
				}
				for e := range Ev {
					acc := 0.0
					for j := range S {
						acc += scores[j] / sum * v[((b*Hkv+kh)*S+j)*Ev+e]
					}
					out[((b*Hq+h)*L+i)*Ev+e] = acc
				}
			}
		}
	}
	return out
}

// ScaledDotProductAttention against float64 loops: grouped-query heads,
// causal masks (top-left, also with fewer queries than keys), bool and
// additive masks, one query against a long cache, queries laid out [B, L,
// H, E] and transposed, every floating dtype; compiled against eager.
func TestScaledDotProductAttention(t *testing.T) {
	type shape struct{ B, Hq, Hkv, L, S, E, Ev int }
	cases := []struct {
		s        shape
		causal   bool
		mask     string // "", "bool", "add"
		scale    float64
		permuted bool // q made as [B, L, Hq, E] and transposed
	}{
		{shape{2, 4, 4, 5, 7, 8, 8}, false, "", 0, false},
		{shape{2, 4, 2, 5, 7, 8, 6}, true, "", 0, false},
		{shape{1, 8, 2, 1, 33, 16, 16}, false, "bool", 0, false},
		{shape{2, 6, 3, 9, 9, 4, 4}, true, "add", 0.3, true},
		{shape{1, 2, 1, 7, 3, 5, 5}, true, "", 0, false}, // more queries than keys
		{shape{3, 1, 1, 1, 1, 3, 2}, false, "", 0, false},
		// Many queries of 16-bit operands: the tiled kernel's shapes.
		{shape{1, 4, 2, 20, 37, 16, 16}, true, "bool", 0, true},
		{shape{2, 2, 2, 33, 33, 32, 16}, true, "", 0, false},
	}
	for ci, c := range cases {
		s := c.s
		for _, dt := range floatTypes {
			seed := uint64(100 * ci)
			var q *Tensor
			if c.permuted {
				q = Randn(seed, Float64, s.B, s.L, s.Hq, s.E).Transpose(1, 2).To(dt)
			} else {
				q = Randn(seed, Float64, s.B, s.Hq, s.L, s.E).To(dt)
			}
			k := Randn(seed+1, Float64, s.B, s.Hkv, s.S, s.E).To(dt)
			v := Randn(seed+2, Float64, s.B, s.Hkv, s.S, s.Ev).To(dt)
			var mask *Tensor
			var mv []float64
			switch c.mask {
			case "bool":
				mask = Rand(seed+3, Float64, s.L, s.S).GtScalar(0.3)
				mask.Narrow(1, 0, 1).Fill(1) // every query attends something
				mv = vals(mask)
			case "add":
				mask = Randn(seed+3, Float64, s.L, s.S).To(dt)
				mv = vals(mask)
			}
			scale := c.scale
			if scale == 0 {
				scale = 1 / math.Sqrt(float64(s.E))
			}
			want := refSDPA(vals(q.Contiguous()), vals(k), vals(v), mv, c.mask == "bool", s.B, s.Hq, s.Hkv, s.L, s.S, s.E, s.Ev, c.causal, scale)
			f := func(q, k, v *Tensor) *Tensor { return ScaledDotProductAttention(q, k, v, mask, c.causal, c.scale) }
			what := fmt.Sprintf("case %d %v", ci, dt)
			outShape := []int{s.B, s.Hq, s.L, s.Ev}
			tol := float64(4 * s.S)
			checkClose(t, what, f(q, k, v), dt, outShape, want, tol)
			checkClose(t, what+", compiled", Compile(f)(q, k, v), dt, outShape, want, tol)
		}
	}
	q, k := Ones(Float32, 1, 4, 3, 8), Ones(Float32, 1, 3, 5, 8)
	expectError(t, "heads that do not divide", func() { ScaledDotProductAttention(q, k, k, nil, false, 0) })
	expectError(t, "features that differ", func() {
		ScaledDotProductAttention(q, Ones(Float32, 1, 4, 5, 7), Ones(Float32, 1, 4, 5, 7), nil, false, 0)
	})
	expectError(t, "integer operands", func() { ScaledDotProductAttention(q.To(Int32), q.To(Int32), q.To(Int32), nil, false, 0) })
}

// On the CPU, attention runs a query row at a time (array's cpuAttention):
// it gives what the op's meaning gives op by op (ir.SDPAMath, which the
// same mask as an additive one of 0 and −inf takes), also on special
// values (a NaN key makes the rows that see it NaN, a row that sees
// nothing is zeros), for a decode step's mask over a long cache, causal
// rows, strided keys and every float dtype.
func TestCPUAttentionMatchesMath(t *testing.T) {
	const B, Hq, Hkv, S, E = 2, 6, 3, 40, 8
	for _, dt := range floatTypes {
		k := Randn(2, Float32, B, Hkv, E, S).To(dt).Transpose(2, 3) // strided keys
		v := Randn(3, Float32, B, Hkv, S, E).To(dt)
		// Special values, in batch 0: key 3 of key head 0 NaN, of key head 1
		// +inf. (Where a mask hides them, the math's additive mask does
		// not: NaN − inf is NaN. Every mask here shows key 3 or hides it
		// by causality, which the math fills.)
		k.Select(0, 0).Select(0, 0).Select(0, 3).Fill(math.NaN())
		k.Select(0, 0).Select(0, 1).Select(0, 3).Fill(math.Inf(1))
		// A decode step at position 12 of a 40-position cache, and a row
		// (batch 1) that sees nothing.
		visible := Arange(0, S, 1, Int64).LeScalar(12).Unsqueeze(0).Expand(B, S).Contiguous()
		visible.Select(0, 1).Fill(0)
		for _, c := range []struct {
			name   string
			mask   *Tensor // bool, or nil
			causal bool
			L      int
		}{
			{"decode mask", visible.Reshape(B, 1, 1, S), false, 1},
			{"the special key alone", Arange(0, S, 1, Int64).EqScalar(3).Reshape(1, 1, 1, S), false, 1},
			{"no mask", nil, false, 1},
			{"causal", nil, true, 5},
		} {
			q := Randn(4, Float32, B, Hq, c.L, E).To(dt)
			additive := Zeros(dt, B, 1, c.L, S) // the math's path: not the kernel's
			if c.mask != nil {
				additive = additive.MaskedFill(c.mask.LogicalNot(), math.Inf(-1))
			}
			got := ScaledDotProductAttention(q, k, v, c.mask, c.causal, 0)
			want := ScaledDotProductAttention(q, k, v, additive, c.causal, 0)
			g, w := vals(got), vals(want)
			rtol := map[DType]float64{Float32: 1e-5, Float16: 2e-3, BFloat16: 1.6e-2}[dt]
			nans := 0
			for i := range w {
				if math.IsNaN(w[i]) {
					nans++
				}
				if !(g[i] == w[i] || math.IsNaN(g[i]) && math.IsNaN(w[i]) || math.Abs(g[i]-w[i]) <= rtol*(math.Abs(w[i])+1)) {
					t.Fatalf("%v, %s: element %d is %v, the math gives %v", dt, c.name, i, g[i], w[i])
				}
			}
			if nans == 0 {
				t.Errorf("%v, %s: no NaN row: the special keys were not seen", dt, c.name)
			}
		}
	}
}
