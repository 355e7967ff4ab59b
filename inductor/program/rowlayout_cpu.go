package program

import "gocompile/array"

// cpuRows is how the CPU walks a row region's inputs: rows over the kept
// dims of the full shape, each row the elements of the reduced dims in
// row-major order (here the last dim; the same shape as the branch that
// reduces over any dims gives it, so that the two merge).
type cpuRows struct {
	outerShape []int   // the kept dims
	outer      [][]int // per input, its strides over outerShape
	redShape   [][]int // per input, the reduced dims
	red        [][]int // per input, its strides over redShape
	R          int     // elements per row
}

func (s *rowStep) cpuRows(args []*array.Array, full []int) cpuRows {
	last := len(full) - 1
	l := cpuRows{outerShape: full[:last], R: full[last]}
	outer, inner := rowLayout(args, full)
	for i := range args {
		l.outer = append(l.outer, outer[i])
		l.redShape = append(l.redShape, []int{l.R})
		l.red = append(l.red, []int{inner[i]})
	}
	return l
}
