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
