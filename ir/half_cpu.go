package ir

// BF16sToF32s sets d[i] = BF16ToF32(s[i]) for i < len(d), eight at a time
// where the processor can.
func BF16sToF32s(d []float32, s []uint16) { convertSlice(d, s, bf16sToF32sVec, BF16ToF32) }

// F32sToBF16s sets d[i] = F32ToBF16(s[i]) for i < len(d), sixteen at a
// time where the processor can.
func F32sToBF16s(d []uint16, s []float32) { convertSlice(d, s, f32sToBF16sVec, F32ToBF16) }

// F16sToF32s sets d[i] = F16ToF32(s[i]) for i < len(d), eight at a time
// where the processor can.
func F16sToF32s(d []float32, s []uint16) { convertSlice(d, s, f16sToF32sVec, F16ToF32) }

// F32sToF16s sets d[i] = F32ToF16(s[i]) for i < len(d), eight at a time
// where the processor can.
func F32sToF16s(d []uint16, s []float32) { convertSlice(d, s, f32sToF16sVec, F32ToF16) }

// convertSlice sets d[i] = one(s[i]) for i < len(d): vec converts a
// prefix and returns its length, one the rest.
func convertSlice[D, S any](d []D, s []S, vec func([]D, []S) int, one func(S) D) {
	s = s[:len(d)]
	for i := vec(d, s); i < len(d); i++ {
		d[i] = one(s[i])
	}
}
