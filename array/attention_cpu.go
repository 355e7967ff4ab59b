package array

import (
	"math"

	"gocompile/ir"
)

// Attention on the CPU: ir.OpAttention's meaning (ir.SDPAMath) computed a
// query row at a time, without the S×S scores or the key heads repeated
// for each query head in memory. A unit of work is one query position of
// one key head: its G query heads' rows, against which each key and value
// row is loaded once. Each row keeps a running maximum, sum and weighted
// values in float64 (online softmax) over the keys its mask and causality
// let it see, skipping the others; a row that sees none gets zeros, and a
// NaN score makes its row NaN, as the math gives.

// cpuAttention computes attention of q, k and v (rank 3 or 4, one dtype
// among those ir.AttentionFits takes) with the optional bool mask into a
// new contiguous array of dtype out.
func cpuAttention(a ir.Attrs, q, k, v, mask *Array, out DType, shape []int) *Array {
	res := newArray(out, shape)
	l := newAttentionLayout(a, q, k, v, mask)
	qst, kst, vst, mst := l.qst, l.kst, l.vst, l.mst
	B, Hq, Hkv, G, L, S, E, Ev := l.B, l.Hq, l.Hkv, l.G, l.L, l.S, l.E, l.Ev
	scale, causal := l.scale, l.causal
	var md []bool
	if mask != nil {
		md = mask.st.data.([]bool)
	}
	ParallelRows(B*Hkv*L, max(1, 1<<14/max(1, S*(E+Ev)*G)), func(lo, hi int) {
		qrow := make([]float64, G*E)
		krow, vrow := make([]float32, E), make([]float32, Ev)
		acc := make([]float64, G*Ev)
		m, sum := make([]float64, G), make([]float64, G)
		see := make([]bool, G)
		p := make([]float64, G)
		outRow := make([]float32, Ev)
		for u := lo; u < hi; u++ {
			b, hk, i := u/(Hkv*L), u/L%Hkv, u%L
			for g := range G {
				h := hk*G + g
				row := qrow[g*E : (g+1)*E]
				readRow64(row, q, q.offset+b*qst[0]+h*qst[1]+i*qst[2], qst[3])
				for e := range row {
					row[e] *= scale
				}
				m[g], sum[g] = math.Inf(-1), 0
				clear(acc[g*Ev : (g+1)*Ev])
			}
			kbase := k.offset + b*kst[0] + hk*kst[1]
			vbase := v.offset + b*vst[0] + hk*vst[1]
			for j := range S {
				if causal && j > i {
					break
				}
				seen := false
				for g := range G {
					see[g] = mask == nil || md[mask.offset+b*mst[0]+(hk*G+g)*mst[1]+i*mst[2]+j*mst[3]]
					seen = seen || see[g]
				}
				if !seen {
					continue
				}
				readRow32(krow, k.st.data, k.dtype, kbase+j*kst[2], kst[3], E)
				readRow32(vrow, v.st.data, v.dtype, vbase+j*vst[2], vst[3], Ev)
				for g := range G {
					if !see[g] {
						p[g] = 0
						continue
					}
					s := 0.0
					for e, x := range qrow[g*E : (g+1)*E] {
						s += x * float64(krow[e])
					}
					if s != s {
						m[g] = math.NaN() // the row is NaN, as softmax makes it
					}
					if s > m[g] {
						// A larger maximum: the sums so far shrink by
						// exp(old - new) (zero from −inf).
						c := math.Exp(m[g] - s)
						sum[g] *= c
						for e := range acc[g*Ev : (g+1)*Ev] {
							acc[g*Ev+e] *= c
						}
						m[g] = s
					}
					p[g] = math.Exp(s - m[g])
					if s == math.Inf(-1) {
						p[g] = 0 // a score of −inf weighs nothing, even before any other
					}
					sum[g] += p[g]
					row := acc[g*Ev : (g+1)*Ev]
					for e, x := range vrow {
						row[e] += p[g] * float64(x)
					}
				}
			}
			for g := range G {
				h := hk*G + g
				for e := range outRow {
					switch {
					case m[g] == math.Inf(-1): // no key seen, or every score −inf
						outRow[e] = 0
					default:
						outRow[e] = float32(acc[g*Ev+e] / sum[g])
					}
				}
				storeFrom(res.st.data, res.dtype, ((b*Hq+h)*L+i)*Ev, outRow)
			}
		}
	})
	return res
}

// readRow32 loads n elements of data (of type dt) from off by stride into
// d as float32.
func readRow32(d []float32, data any, dt DType, off, stride, n int) {
	if n == 0 {
		return
	}
	if stride == 1 {
		loadInto(d[:n], data, dt, off)
		return
	}
	for i := range n {
		loadInto(d[i:i+1], data, dt, off+i*stride)
	}
}

// readRow64 loads len(d) elements of t from storage offset off by stride
// into d as float64.
func readRow64(d []float64, t *Array, off, stride int) {
	if stride == 1 {
		loadInto(d, t.st.data, t.dtype, off)
		return
	}
	for i := range d {
		loadInto(d[i:i+1], t.st.data, t.dtype, off+i*stride)
	}
}
