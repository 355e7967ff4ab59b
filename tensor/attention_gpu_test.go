package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gocompile/array"
)

// ScaledDotProductAttention of few queries runs on a GPU as the split-key
// kernel, and equals the math reference on the CPU over a seeded sweep:
// every floating dtype, grouped-query heads, 1 to 16 queries, key counts
// from 1 to several splits, odd feature counts, bool masks of [L, S] and
// [B, 1, L, S], causal masks, caches read through a narrowed view, and a
// query whose keys are all masked (zeros, as PyTorch gives).
func TestGPUAttentionKernel(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	for c := range 40 {
		dt := floatTypes[c%len(floatTypes)]
		B, Hkv, G := pick(1, 2), pick(1, 2, 4), pick(1, 2, 8)
		L := pick(1, 1, 2, 3, 16)
		for G*L > 32 {
			G /= 2
		}
		S, E, Ev := pick(1, 31, 128, 129, 1000, 4097), pick(8, 16, 64, 96), pick(8, 64, 80)
		for G*L*E > 2048 || G*L*((Ev+31)/32*32) > 2048 {
			L = max(1, L/2)
			if L == 1 {
				G = max(1, G/2)
			}
		}
		Hq := Hkv * G
		seed := uint64(1000 + c)
		q := Randn(seed, Float32, B, Hq, L, E).To(dt)
		// The cache is longer than the keys read: a narrowed view, as a
		// decode step reads the positions so far.
		kc := Randn(seed+1, Float32, B, Hkv, S+5, E).To(dt)
		vc := Randn(seed+2, Float32, B, Hkv, S+5, Ev).To(dt)
		k, v := kc.Narrow(2, 0, S), vc.Narrow(2, 0, S)
		causal := c%5 == 3
		var mask *Tensor
		switch c % 4 {
		case 1:
			mask = Rand(seed+3, Float32, L, S).GtScalar(0.4)
		case 2:
			mask = Rand(seed+3, Float32, B, 1, L, S).GtScalar(0.2)
		}
		if mask != nil && c%8 == 1 {
			mask.Narrow(len(mask.Shape())-2, 0, 1).Fill(0) // the first query sees no key
		}
		what := fmt.Sprintf("case %d: %v B%d Hq%d Hkv%d L%d S%d E%d Ev%d causal %v mask %v", c, dt, B, Hq, Hkv, L, S, E, Ev, causal, mask != nil)
		want := ScaledDotProductAttention(q, k, v, mask, causal, 0)
		var md *Tensor
		if mask != nil {
			md = mask.To(dev)
		}
		got := ScaledDotProductAttention(q.To(dev), kc.To(dev).Narrow(2, 0, S), vc.To(dev).Narrow(2, 0, S), md, causal, 0)
		// The kernel adds scores and values in another order than the
		// math's products: a few roundings of dt per key.
		checkClose(t, what, got, dt, want.Shape(), want.Float64s(), math.Sqrt(float64(S)))
	}
	ran := false
	for _, s := range array.MustGPU("test", dev).Kernels() {
		ran = ran || strings.HasPrefix(s, "gc_attention_")
	}
	if !ran {
		t.Error("no attention kernel ran")
	}
}
