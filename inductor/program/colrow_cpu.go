package program

import (
	"gocompile/array"
	"gocompile/ir"
)

// cpuRows is how the CPU walks a row region's inputs: rows over the kept
// dims of the full shape, each row the elements of the reduced dims in
// row-major order (the last dim, or fuse.Row.Dims).
type cpuRows struct {
	outerShape []int   // the kept dims
	outer      [][]int // per input, its strides over outerShape
	redShape   [][]int // per input, the reduced dims (merged where it allows)
	red        [][]int // per input, its strides over redShape
	R          int     // elements per row
}

func (s *rowStep) cpuRows(args []*array.Array, full []int) cpuRows {
	isRed := make([]bool, len(full))
	for _, d := range s.r.Row.ReducedDims() {
		isRed[d] = true
	}
	var l cpuRows
	var redShape []int
	for d, n := range full {
		if isRed[d] {
			redShape = append(redShape, n)
		} else {
			l.outerShape = append(l.outerShape, n)
		}
	}
	l.R = ir.Numel(redShape)
	for _, t := range args {
		st := ir.BroadcastStrides(t.Shape(), t.Strides(), full)
		var o, r []int
		for d := range full {
			if isRed[d] {
				r = append(r, st[d])
			} else {
				o = append(o, st[d])
			}
		}
		if len(r) > 1 { // a row region's one reduced dim stays as it is
			sh, st := array.Coalesce(redShape, r)
			l.redShape, l.red = append(l.redShape, sh), append(l.red, st[0])
		} else {
			l.redShape, l.red = append(l.redShape, redShape), append(l.red, r)
		}
		l.outer = append(l.outer, o)
	}
	return l
}

// runDimsCPU runs a region with Row.Dims on the CPU into a new array of
// shape. A root per element is computed row by row into an array laid out
// as [kept dims, reduced dims] and then put in the full shape's order.
func (s *rowStep) runDimsCPU(args []*array.Array, full, shape []int, dst func(ir.Device, []int) *array.Array) *array.Array {
	n := s.r.Root
	if s.root == nil {
		var res *array.Array
		if dst != nil {
			res = dst(array.CPU, shape)
		}
		if res == nil {
			res = array.New(array.CPU, n.DType, shape)
		}
		s.runCPU(args, full, res)
		return res
	}
	dims := s.r.Row.Dims
	order := append(complement(len(full), dims), dims...) // full dims in the temporary's order
	tshape := make([]int, len(full))
	for i, d := range order {
		tshape[i] = full[d]
	}
	tmp := array.New(array.CPU, n.DType, tshape)
	s.runCPU(args, full, tmp)
	// View tmp in the full shape's order: dim order[i] of the result is
	// dim i of tmp.
	tstr := tmp.Strides()
	vshape, vstr := make([]int, len(full)), make([]int, len(full))
	for i, d := range order {
		vshape[d], vstr[d] = tshape[i], tstr[i]
	}
	return array.Contiguous(tmp.WithLayout(ir.Layout{Shape: vshape, Strides: vstr, Offset: tmp.Offset()}))
}
