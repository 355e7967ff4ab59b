package array

import "gocompile/ir"

// Vector conversions between 16-bit float storage (bfloat16, float16) and
// float32 blocks (package ir's, the same bits as the one-value
// conversions), for the loads and stores of CPU kernels.

// loadHalf converts n values of data at lo into buf, of kind k, when a
// vector conversion applies, and reports whether it did.
func loadHalf(buf ir.Vec, k ir.Kind, data any, dt DType, lo, n int) bool {
	switch {
	case k != ir.F32:
		return false
	case dt == ir.BFloat16:
		ir.BF16sToF32s(buf.F32[:n], data.([]uint16)[lo:lo+n])
	case dt == ir.Float16:
		ir.F16sToF32s(buf.F32[:n], data.([]uint16)[lo:lo+n])
	default:
		return false
	}
	return true
}

// storeHalf stores n values of v, of kind k, into data at lo when a
// vector conversion applies, and reports whether it did.
func storeHalf(data any, dt DType, lo int, v ir.Vec, k ir.Kind, n int) bool {
	switch {
	case k != ir.F32:
		return false
	case dt == ir.BFloat16:
		ir.F32sToBF16s(data.([]uint16)[lo:lo+n], v.F32[:n])
	case dt == ir.Float16:
		ir.F32sToF16s(data.([]uint16)[lo:lo+n], v.F32[:n])
	default:
		return false
	}
	return true
}

// StoreBlock is Store for a kernel's block of n results: values of kind k
// written from storage offset off, converted as storing converts them.
func (t *Array) StoreBlock(off int, v ir.Vec, k ir.Kind, n int) {
	if !storeHalf(t.st.data, t.dtype, off, v, k, n) {
		store(t.st.data, t.dtype, off, v, k, n)
	}
}
