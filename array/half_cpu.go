package array

import "gocompile/ir"

// Vector conversions between bfloat16 storage and float32 blocks (package
// ir's, the same bits as the one-value conversions), for the loads and
// stores of CPU kernels.

// loadHalf converts n values of data at lo into buf, of kind k, when a
// vector conversion applies, and reports whether it did.
func loadHalf(buf ir.Vec, k ir.Kind, data any, dt DType, lo, n int) bool {
	if dt != ir.BFloat16 || k != ir.F32 {
		return false
	}
	ir.BF16sToF32s(buf.F32[:n], data.([]uint16)[lo:lo+n])
	return true
}

// storeHalf stores n values of v, of kind k, into data at lo when a
// vector conversion applies, and reports whether it did.
func storeHalf(data any, dt DType, lo int, v ir.Vec, k ir.Kind, n int) bool {
	if dt != ir.BFloat16 || k != ir.F32 {
		return false
	}
	ir.F32sToBF16s(data.([]uint16)[lo:lo+n], v.F32[:n])
	return true
}

// StoreBlock is Store for a kernel's block of n results: values of kind k
// written from storage offset off, converted as storing converts them.
func (t *Array) StoreBlock(off int, v ir.Vec, k ir.Kind, n int) {
	if !storeHalf(t.st.data, t.dtype, off, v, k, n) {
		store(t.st.data, t.dtype, off, v, k, n)
	}
}
