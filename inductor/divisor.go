package inductor

// Divisor divides 32-bit indices by a fixed d with a multiply-high, an add
// and a shift instead of a division (Granlund and Montgomery; the form
// PyTorch's IntDivider uses): n / d = (umulhi(n, Magic) + n) >> Shift for
// every n < 2^31. N-d and tiled kernels take one per dim in their geometry,
// computed here on the host, so splitting a flat index into coordinates
// costs a few instructions per dim.
type Divisor struct {
	D, Magic, Shift uint32
}

// NewDivisor returns the divisor of d, 1 <= d <= 2^31.
func NewDivisor(d uint32) Divisor {
	if d == 0 || d > 1<<31 {
		panic("inductor: divisor out of range")
	}
	var s uint32
	for uint64(1)<<s < uint64(d) {
		s++
	}
	magic := (uint64(1)<<32)*((uint64(1)<<s)-uint64(d))/uint64(d) + 1
	return Divisor{D: d, Magic: uint32(magic), Shift: s}
}

// Div is n / v.D computed as the kernels do (n < 2^31).
func (v Divisor) Div(n uint32) uint32 {
	hi := uint32((uint64(n) * uint64(v.Magic)) >> 32)
	return (hi + n) >> v.Shift
}

// divisorC is the device side of Divisor.
const divisorC = `// gc_div is n / d for n < 2^31, d's magic number and shift computed on
// the host (inductor.Divisor): a multiply-high, an add and a shift.
__device__ __forceinline__ unsigned int gc_div(unsigned int n, unsigned int magic, unsigned int shift) {
  return (__umulhi(n, magic) + n) >> shift;
}
`
