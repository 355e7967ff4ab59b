//go:build !purego

package ir

//go:noescape
func bf16ToF32AVX2(d *float32, s *uint16, n int)

//go:noescape
func f32ToBF16AVX2(d *uint16, s *float32, n int, c *[3][8]uint32)

//go:noescape
func f16ToF32F16C(d *float32, s *uint16, n int)

//go:noescape
func f32ToF16F16C(d *uint16, s *float32, n int)

// hasF16C reports whether the processor converts half precision (and
// hasAVX2, whose registers the loops use).
var hasF16C = func() bool {
	_, _, ecx, _ := cpuid(1, 0)
	return hasAVX2 && ecx&(1<<29) != 0
}()

var bf16Consts = [3][8]uint32{
	{1, 1, 1, 1, 1, 1, 1, 1},
	{0x7fff, 0x7fff, 0x7fff, 0x7fff, 0x7fff, 0x7fff, 0x7fff, 0x7fff},
	{0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40},
}

func bf16sToF32sVec(d []float32, s []uint16) int {
	return vecPrefix(hasAVX2, 8, d, s, bf16ToF32AVX2)
}

func f32sToBF16sVec(d []uint16, s []float32) int {
	return vecPrefix(hasAVX2, 16, d, s, func(d *uint16, s *float32, n int) { f32ToBF16AVX2(d, s, n, &bf16Consts) })
}

func f16sToF32sVec(d []float32, s []uint16) int { return vecPrefix(hasF16C, 8, d, s, f16ToF32F16C) }

func f32sToF16sVec(d []uint16, s []float32) int { return vecPrefix(hasF16C, 8, d, s, f32ToF16F16C) }

// vecPrefix runs loop over the whole groups of group (a power of two)
// values of s into d where ok (the processor has loop's instructions) and
// returns how many values it converted.
func vecPrefix[D, S any](ok bool, group int, d []D, s []S, loop func(d *D, s *S, n int)) int {
	if !ok || len(d) < group {
		return 0
	}
	loop(&d[0], &s[:len(d)][0], len(d))
	return len(d) &^ (group - 1)
}
