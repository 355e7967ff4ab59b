package ir

// BF16sToF32s sets d[i] = BF16ToF32(s[i]) for i < len(d), eight at a time
// where the processor can.
func BF16sToF32s(d []float32, s []uint16) {
	s = s[:len(d)]
	for i := bf16sToF32sVec(d, s); i < len(d); i++ {
		d[i] = BF16ToF32(s[i])
	}
}

// F32sToBF16s sets d[i] = F32ToBF16(s[i]) for i < len(d), sixteen at a
// time where the processor can.
func F32sToBF16s(d []uint16, s []float32) {
	s = s[:len(d)]
	for i := f32sToBF16sVec(d, s); i < len(d); i++ {
		d[i] = F32ToBF16(s[i])
	}
}

// F16sToF32s sets d[i] = F16ToF32(s[i]) for i < len(d), eight at a time
// where the processor can.
func F16sToF32s(d []float32, s []uint16) {
	s = s[:len(d)]
	for i := f16sToF32sVec(d, s); i < len(d); i++ {
		d[i] = F16ToF32(s[i])
	}
}

// F32sToF16s sets d[i] = F32ToF16(s[i]) for i < len(d), eight at a time
// where the processor can.
func F32sToF16s(d []uint16, s []float32) {
	s = s[:len(d)]
	for i := f32sToF16sVec(d, s); i < len(d); i++ {
		d[i] = F32ToF16(s[i])
	}
}
