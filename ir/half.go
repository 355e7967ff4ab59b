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

// CHalfConversions are the C forms of the conversions above, for generated
// CUDA: gc_ld_half/gc_st_half and gc_ld_bf16/gc_st_bf16 between 16-bit
// storage (gc_half, gc_bf16) and float, rounding to nearest even exactly
// as F32ToF16 and F32ToBF16 do (on sm_80 and later a bfloat16 NaN is
// stored as the canonical 0x7fff). They need no CUDA headers.
const CHalfConversions = `typedef unsigned short gc_half;
typedef unsigned short gc_bf16;
__device__ __forceinline__ float gc_ld_half(gc_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ gc_half gc_st_half(float f) { gc_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float gc_ld_bf16(gc_bf16 h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ gc_bf16 gc_st_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  gc_bf16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;  // one instruction; NaN becomes 0x7fff
#endif
  unsigned int u = __float_as_uint(f);
  if (f != f) return (gc_bf16)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (gc_bf16)(u >> 16);
}
`
