package ir

// Uniform operands of block programs (Frame.SetUniform): broadcast loops
// and spreading one value over a block.

// arithUniform computes d = a op b over n values for an add, subtract,
// multiply or divide of floats with one operand uniform (a when ua), with
// the one value in a register instead of a block of copies, and reports
// whether it did.
func (f *Frame) arithUniform(in *instr, n int, d *Vec, ua bool) bool {
	if !isArith(in.p) || in.b < 0 {
		return false
	}
	a, b := &f.regs[in.a], &f.regs[in.b]
	switch in.kind {
	case F32:
		if ua {
			if !vecF32(in.p, d.F32[:n], a.F32, b.F32, 2) {
				arithScalar(in.p, d.F32[:n], b.F32, a.F32[0], true)
			}
		} else if !vecF32(in.p, d.F32[:n], a.F32, b.F32, 1) {
			arithScalar(in.p, d.F32[:n], a.F32, b.F32[0], false)
		}
		return true
	case F64:
		if ua {
			arithScalar(in.p, d.F64[:n], b.F64, a.F64[0], true)
		} else {
			arithScalar(in.p, d.F64[:n], a.F64, b.F64[0], false)
		}
		return true
	}
	return false
}

// arithScalar sets d[i] = x[i] op s, or s op x[i] when first.
func arithScalar[T floating](p Prim, d, x []T, s T, first bool) {
	x = x[:len(d)]
	switch {
	case p == PAdd:
		for i := range d {
			d[i] = x[i] + s // commutes exactly
		}
	case p == PMul:
		for i := range d {
			d[i] = x[i] * s
		}
	case p == PSub && first:
		for i := range d {
			d[i] = s - x[i]
		}
	case p == PSub:
		for i := range d {
			d[i] = x[i] - s
		}
	case p == PDiv && first:
		for i := range d {
			d[i] = s / x[i]
		}
	case p == PDiv:
		for i := range d {
			d[i] = x[i] / s
		}
	}
}

// copyFirst sets d[0] = x[0], for values of kind k.
func copyFirst(d, x Vec, k Kind) {
	switch k {
	case F32:
		d.F32[0] = x.F32[0]
	case F64:
		d.F64[0] = x.F64[0]
	default:
		d.I64[0] = x.I64[0]
	}
}

// spreadFirst copies v[0] over all of v.
func spreadFirst(v Vec, k Kind) {
	switch k {
	case F32:
		fillWith(v.F32, v.F32[0])
	case F64:
		fillWith(v.F64, v.F64[0])
	default:
		fillWith(v.I64, v.I64[0])
	}
}

func fillWith[T number](d []T, x T) {
	for i := range d {
		d[i] = x
	}
}
