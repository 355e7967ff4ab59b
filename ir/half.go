package ir

import (
	"math"

	"github.com/x448/float16"
)

// F16ToF32 widens an IEEE 754 half-precision value, exactly.
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// F32ToF16 rounds a float32 to half precision, to nearest even; values
// beyond the half range become ±Inf and NaN stays NaN.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// BF16ToF32 widens a bfloat16 value (the top half of a float32), exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to bfloat16, to nearest even; NaN stays a
// quiet NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
