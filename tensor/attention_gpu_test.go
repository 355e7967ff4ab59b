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
		S, E, Ev := pick(1, 31, 128, 129, 1000, 4097), pick(8, 16, 64, 96), pick(8, 64, 80, 128)
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

// ScaledDotProductAttention of many 16-bit queries (a prefill) runs on a
// GPU as the tiled kernel, and equals the math reference on the CPU over
// a seeded sweep: bfloat16 and float16, grouped-query heads, queries from
// a few (more rows than the split kernel takes) to 513, keys from as many
// to 1000 more, 16 to 128 features, bool masks of [L, S] and [B, 1, L, S],
// causal masks (top-left, as PyTorch's is_causal), a decoder's mask over a
// cache longer than the prompt (most chunks unseen), a batch entry whose
// keys are all masked, queries laid out [B, L,
// H, E] and transposed, caches read through a narrowed view, keys stored
// feature-major (no 16-byte rows), and a query whose keys are all masked;
// compiled against eager on some.
func TestGPUTiledAttention(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	rng := rand.New(rand.NewPCG(17, 5))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	for c := range 24 {
		dt := []DType{BFloat16, Float16}[c%2]
		B, Hkv, G := pick(1, 2), pick(1, 2, 4), pick(1, 2, 8)
		L := pick(5, 17, 64, 100, 513)
		for G*L <= 32 {
			G *= 2
		}
		S := L + pick(0, 0, 37, 1000)
		E, Ev := pick(16, 64, 128), pick(16, 64, 128)
		Hq := Hkv * G
		seed := uint64(5000 + c)
		var q *Tensor
		if c%3 == 1 {
			q = Randn(seed, Float32, B, L, Hq, E).Transpose(1, 2).To(dt)
		} else {
			q = Randn(seed, Float32, B, Hq, L, E).To(dt)
		}
		kc := Randn(seed+1, Float32, B, Hkv, S+5, E).To(dt)
		vc := Randn(seed+2, Float32, B, Hkv, S+5, Ev).To(dt)
		k, v := kc.Narrow(2, 0, S), vc.Narrow(2, 0, S)
		featureMajor := c%4 == 2
		causal := c%3 != 0
		var mask *Tensor
		switch c % 5 {
		case 1:
			mask = Rand(seed+3, Float32, L, S).GtScalar(0.4)
		case 3:
			mask = Rand(seed+3, Float32, B, 1, L, S).GtScalar(0.2)
		case 4:
			// A decoder's: a cache longer than the prompt, each query
			// seeing the keys up to its own position; the first batch
			// entry sees none at all.
			pos := Arange(0, float64(L), 1, Int64).Reshape(1, 1, L, 1)
			mask = Arange(0, float64(S), 1, Int64).Reshape(1, 1, 1, S).Le(pos).Expand(B, 1, L, S).Contiguous()
			mask.Narrow(0, 0, 1).Fill(0)
		}
		if mask != nil && c%2 == 1 {
			mask.Narrow(len(mask.Shape())-2, 0, 1).Fill(0) // the first query sees no key
		}
		what := fmt.Sprintf("case %d: %v B%d Hq%d Hkv%d L%d S%d E%d Ev%d causal %v mask %v feature-major %v",
			c, dt, B, Hq, Hkv, L, S, E, Ev, causal, mask != nil, featureMajor)
		want := ScaledDotProductAttention(q, k, v, mask, causal, 0)
		var md *Tensor
		if mask != nil {
			md = mask.To(dev)
		}
		kd, vd := kc.To(dev).Narrow(2, 0, S), vc.To(dev).Narrow(2, 0, S)
		if featureMajor {
			kd = k.Transpose(2, 3).Contiguous().To(dev).Transpose(2, 3)
		}
		f := func(q, k, v *Tensor) *Tensor { return ScaledDotProductAttention(q, k, v, md, causal, 0) }
		qd := q.To(dev)
		tol := math.Sqrt(float64(S))
		checkClose(t, what, f(qd, kd, vd), dt, want.Shape(), want.Float64s(), tol)
		if c%4 == 0 {
			checkClose(t, what+", compiled", Compile(f)(qd, kd, vd), dt, want.Shape(), want.Float64s(), tol)
		}
	}
	ran := false
	for _, s := range array.MustGPU("test", dev).Kernels() {
		ran = ran || strings.HasPrefix(s, "gc_attention_tiled_")
	}
	if !ran {
		t.Error("no tiled attention kernel ran")
	}
}
