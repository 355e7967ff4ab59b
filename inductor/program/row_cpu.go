package program

import (
	"runtime"

	"gocompile/array"
	"gocompile/ir"
)

// The CPU half of row regions: block programs over chunks of each row.

func (s *rowStep) runCPU(args []*array.Array, full []int, res *array.Array) {
	l := s.cpuRows(args, full)
	R, outerShape := l.R, l.outerShape
	rows := ir.Numel(outerShape)
	outer := l.outer
	nIn := len(args)
	stages := s.r.Row.Stages
	// Fewer rows than cores, and long: a lone reduction splits each row
	// across the cores (opByOp took the other regions).
	if rows < runtime.GOMAXPROCS(0) && R >= 2*array.MinParallel {
		s.splitCPU(args, l, res)
		return
	}
	// A stage's value is repeated over a chunk only for the programs that
	// read it.
	needVec := make([]bool, len(stages))
	for k := range stages {
		for _, blk := range append(append([]*ir.Block(nil), s.stages[k+1:]...), s.root) {
			needVec[k] = needVec[k] || (blk != nil && blk.Uses(nIn+k))
		}
	}
	array.ParallelRows(rows, max(1, array.MinParallel/R), func(lo, hi int) {
		chunk := min(array.BlockSize, R)
		frames := make([]*ir.Frame, len(stages))
		for k, blk := range s.stages {
			frames[k] = blk.NewFrame(chunk, nil)
		}
		var rootFrame *ir.Frame
		if s.root != nil {
			rootFrame = s.root.NewFrame(chunk, nil)
		}
		ops := make([]*array.Operand, nIn)
		for i, t := range args {
			ops[i] = t.Operand(l.redShape[i], l.red[i], 0)
		}
		stageVecs := make([]ir.Vec, len(stages)) // each stage's value, repeated over a chunk
		for k, st := range stages {
			stageVecs[k] = ir.NewVec(st.Kind, chunk)
		}
		one := make([]ir.Vec, len(stages)) // each stage's value
		rounders := make([]*array.Rounder, len(stages))
		for k, st := range stages {
			one[k] = ir.NewVec(st.Kind, 1)
			rounders[k] = array.NewRounder(st.Node.DType, st.Kind)
		}
		idx := make([]int, len(outerShape))
		// bind makes f read every input at [start, start+n) of the row and
		// the stages computed so far.
		bind := func(f *ir.Frame, blk *ir.Block, start, n, done int) {
			for i, o := range ops {
				if blk.Uses(i) {
					f.SetArg(i, o.Load(start, n, f.ArgKind(i), f.ArgBuf(i)))
				}
			}
			for k := range done {
				f.SetArg(nIn+k, stageVecs[k])
			}
		}
		for row := lo; row < hi; row++ {
			for i, t := range args {
				off := t.Offset()
				if len(outerShape) > 0 {
					off += array.Unravel(row, outerShape, outer[i], idx)
				}
				ops[i].SetOffset(off)
			}
			var val ir.Vec
			for k, st := range stages {
				f, blk := frames[k], s.stages[k]
				if st.Reduce {
					acc := array.FoldRange(st.Reducer, blk.OutKind(), 0, R, func(s0, m int) ir.Vec {
						bind(f, blk, s0, m, k)
						return f.Run(m, nil)
					})
					rounders[k].Result(st.Reducer, acc, R, one[k])
				} else {
					bind(f, blk, 0, 1, k)
					rounders[k].Value(f.Run(1, nil), blk.OutKind(), one[k])
				}
				if needVec[k] {
					stageVecs[k].Fill(st.Kind, kindAt(one[k], st.Kind))
				}
				val = one[k]
			}
			if s.root == nil {
				res.Store(row, val, stages[len(stages)-1].Kind, 1)
				continue
			}
			for s0 := 0; s0 < R; s0 += chunk {
				m := min(chunk, R-s0)
				bind(rootFrame, s.root, s0, m, len(stages))
				res.Store(row*R+s0, rootFrame.Run(m, nil), s.root.OutKind(), m)
			}
		}
	})
}

// splitCPU runs a region whose one stage is a reduction and the root with
// each row split across the cores, the parts merged in order.
func (s *rowStep) splitCPU(args []*array.Array, l cpuRows, res *array.Array) {
	outerShape, outer, R := l.outerShape, l.outer, l.R
	st, blk := s.r.Row.Stages[0], s.stages[0]
	idx := make([]int, len(outerShape))
	one := ir.NewVec(st.Kind, 1)
	round := array.NewRounder(st.Node.DType, st.Kind)
	for row := range ir.Numel(outerShape) {
		offsets := make([]int, len(args))
		for i, t := range args {
			offsets[i] = t.Offset()
			if len(outerShape) > 0 {
				offsets[i] += array.Unravel(row, outerShape, outer[i], idx)
			}
		}
		acc := array.FoldSplit(st.Reducer, st.Compute == ir.I64, R, func() func(lo, hi int) ir.Acc {
			f := blk.NewFrame(min(array.BlockSize, R), nil)
			ops := make([]*array.Operand, len(args))
			for i, t := range args {
				ops[i] = t.Operand(l.redShape[i], l.red[i], offsets[i])
			}
			return func(lo, hi int) ir.Acc {
				return array.FoldRange(st.Reducer, blk.OutKind(), lo, hi, func(s0, m int) ir.Vec {
					for i, o := range ops {
						if blk.Uses(i) {
							f.SetArg(i, o.Load(s0, m, f.ArgKind(i), f.ArgBuf(i)))
						}
					}
					return f.Run(m, nil)
				})
			}
		})
		round.Result(st.Reducer, acc, R, one)
		res.Store(row, one, st.Kind, 1)
	}
}

// kindAt is v[0] as a float64.
func kindAt(v ir.Vec, k ir.Kind) float64 {
	switch k {
	case ir.F32:
		return float64(v.F32[0])
	case ir.F64:
		return v.F64[0]
	}
	return float64(v.I64[0])
}
