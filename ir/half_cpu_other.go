//go:build !amd64 || purego

package ir

func bf16sToF32sVec(d []float32, s []uint16) int { return 0 }
func f32sToBF16sVec(d []uint16, s []float32) int { return 0 }
func f16sToF32sVec(d []float32, s []uint16) int  { return 0 }
func f32sToF16sVec(d []uint16, s []float32) int  { return 0 }
