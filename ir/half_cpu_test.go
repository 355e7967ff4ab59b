package ir

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The slice conversions between float32 and bfloat16 give the one-value
// conversions' bits: rounding ties to even, NaN, infinities, subnormals,
// values that round up into the next binade or to infinity.
func TestBF16SlicesSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := range 300 {
		n := rng.IntN(100)
		f := make([]float32, n)
		for i := range f {
			switch rng.IntN(4) {
			case 0:
				f[i] = math.Float32frombits(rng.Uint32()) // any bits: NaNs with payloads too
			case 1:
				f[i] = fastSpecials[rng.IntN(len(fastSpecials))]
			case 2: // halfway cases
				f[i] = math.Float32frombits(rng.Uint32()&^0xffff | 0x8000)
			default:
				f[i] = float32(rng.NormFloat64())
			}
		}
		h := make([]uint16, n)
		F32sToBF16s(h, f)
		back := make([]float32, n)
		BF16sToF32s(back, h)
		for i := range f {
			if want := F32ToBF16(f[i]); h[i] != want {
				t.Fatalf("trial %d: F32sToBF16s of %#x is %#x, want %#x", trial, math.Float32bits(f[i]), h[i], want)
			}
			if want := BF16ToF32(h[i]); math.Float32bits(back[i]) != math.Float32bits(want) {
				t.Fatalf("trial %d: BF16sToF32s of %#x is %v, want %v", trial, h[i], back[i], want)
			}
		}
	}
}

// The same for float16, the widening of all 65536 values included.
func TestF16SlicesSameBits(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	wide := make([]float32, len(all))
	F16sToF32s(wide, all)
	for i, h := range all {
		if want := F16ToF32(h); math.Float32bits(wide[i]) != math.Float32bits(want) {
			t.Fatalf("F16sToF32s of %#x is %#x, want %#x", h, math.Float32bits(wide[i]), math.Float32bits(want))
		}
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 300 {
		n := rng.IntN(100)
		f := make([]float32, n)
		for i := range f {
			switch rng.IntN(4) {
			case 0:
				f[i] = math.Float32frombits(rng.Uint32())
			case 1:
				f[i] = fastSpecials[rng.IntN(len(fastSpecials))]
			case 2: // halfway cases and subnormal results
				f[i] = math.Float32frombits(rng.Uint32()&^0x1fff | 0x1000)
			default:
				f[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-25)))
			}
		}
		h := make([]uint16, n)
		F32sToF16s(h, f)
		for i := range f {
			if want := F32ToF16(f[i]); h[i] != want {
				t.Fatalf("trial %d: F32sToF16s of %#x is %#x, want %#x", trial, math.Float32bits(f[i]), h[i], want)
			}
		}
	}
}
