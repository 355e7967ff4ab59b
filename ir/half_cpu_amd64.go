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
	if !hasAVX2 || len(d) < 8 {
		return 0
	}
	bf16ToF32AVX2(&d[0], &s[:len(d)][0], len(d))
	return len(d) &^ 7
}

func f32sToBF16sVec(d []uint16, s []float32) int {
	if !hasAVX2 || len(d) < 16 {
		return 0
	}
	f32ToBF16AVX2(&d[0], &s[:len(d)][0], len(d), &bf16Consts)
	return len(d) &^ 15
}

func f16sToF32sVec(d []float32, s []uint16) int {
	if !hasF16C || len(d) < 8 {
		return 0
	}
	f16ToF32F16C(&d[0], &s[:len(d)][0], len(d))
	return len(d) &^ 7
}

func f32sToF16sVec(d []uint16, s []float32) int {
	if !hasF16C || len(d) < 8 {
		return 0
	}
	f32ToF16F16C(&d[0], &s[:len(d)][0], len(d))
	return len(d) &^ 7
}
