package array

import (
	"sync"

	"gocompile/ir"
)

// Apply runs op on args (arrays and ir.Scalar values) with attributes a,
// and returns the new array. It is the one entry point every eager op
// goes through: the registry says what kind of op it is, and the kernel
// for that kind derives the op's behaviour from the registry entry.
// Misuse panics with an *ir.Error.
func Apply(op *ir.Op, a ir.Attrs, args ...ir.Value) *Array { return apply(op, a, args...) }

func apply(op *ir.Op, a ir.Attrs, args ...ir.Value) *Array {
	CheckDevices(op, args)
	switch op.Kind {
	case ir.Pointwise:
		return pointwise(op, a, args)
	case ir.Reduction:
		return reduce(op, a, args[0].(*Array))
	case ir.View:
		t := args[0].(*Array)
		av := new(ir.Attrs) // the view's own: a pointer to a would move every op's attributes to the heap
		*av = a
		l, err := op.View(t.layout(), av)
		Check(err, op.Title, t)
		Check(ir.CheckShape(op.Title, nil, l.Shape), op.Title, t) // Expand can grow a view past any size
		return t.withLayout(l)
	case ir.Extern:
		return externKernels[op.Name](op, a, args)
	case ir.Composite:
		return composite(op, a, args)
	}
	panic("array: op " + op.Name + " has an unknown kind")
}

// eager is the ir.Builder that computes ops at once on arrays;
// decompositions of composite ops run through it.
type eager struct{}

func (eager) Apply(op *ir.Op, a ir.Attrs, args ...ir.Value) ir.Value { return apply(op, a, args...) }
func (eager) Shape(v ir.Value) []int                                 { return v.(*Array).shape }
func (eager) DType(v ir.Value) ir.DType                              { return v.(*Array).dtype }

func tensorsOf(args []ir.Value) []*Array {
	var ts []*Array
	for _, a := range args {
		if t, ok := a.(*Array); ok {
			ts = append(ts, t)
		}
	}
	return ts
}

// CheckDevices panics with an *ir.Error naming op unless the arrays among
// args are non-nil and on one device.
func CheckDevices(op *ir.Op, args []ir.Value) {
	var first *Array
	for i, a := range args {
		t, ok := a.(*Array)
		if !ok {
			continue
		}
		switch {
		case t == nil:
			Throw(op.Title, nil, "pass an array", "operand %d is a nil *Array", i)
		case t.st == nil:
			Throw(op.Title, nil, "pass an array made by this package", "operand %d is a zero Array{}, which has no storage", i)
		}
		if first == nil {
			first = t
			continue
		}
		if t.st.dev != first.st.dev {
			Throw(op.Title, tensorsOf(args), "move them to one device with To(device)",
				"operands are on different devices: operand 0 is on %v, operand %d on %v", first.st.dev, i, t.st.dev)
		}
	}
}

type blockKey struct {
	op      *ir.Op
	args    [4]ir.Kind
	compute ir.Kind
}

var blocks sync.Map // blockKey → *ir.Block

func compiledBlock(op *ir.Op, args []ir.Kind, compute ir.Kind) *ir.Block {
	key := blockKey{op: op, compute: compute}
	copy(key.args[:], args)
	if b, ok := blocks.Load(key); ok {
		return b.(*ir.Block)
	}
	b, err := ir.CompileBlock(op.Expr, args, compute)
	if err != nil {
		panic("array: registry entry " + op.Name + " does not compile: " + err.Error())
	}
	blocks.Store(key, b)
	return b
}

func pointwise(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	if op.Arity >= 0 && len(args) != op.Arity {
		panic("array: " + op.Name + " called with the wrong number of operands")
	}
	tensors := tensorsOf(args)
	types := make([]ir.Operand, 0, len(args)+len(a.Scalars))
	for _, v := range args {
		switch v := v.(type) {
		case *Array:
			types = append(types, ir.Operand{DType: v.dtype, Rank0: len(v.shape) == 0})
		case ir.Scalar:
			types = append(types, ir.Operand{DType: v.DType, Scalar: true})
		}
	}
	if op.Rule == ir.Promote {
		for _, s := range a.Scalars {
			types = append(types, ir.Operand{DType: ir.ScalarOf(s).DType, Scalar: true})
		}
	}
	compute, out, err := op.Types(types, &a)
	Check(err, op.Title, tensors...)

	shapes := make([][]int, len(tensors))
	for i, t := range tensors {
		shapes[i] = t.shape
	}
	shape, err := ir.Broadcast(op.Title, shapes...)
	Check(err, op.Title, tensors...)
	Check(ir.CheckShape(op.Title, nil, shape), op.Title, tensors...)

	kinds := make([]ir.Kind, len(args))
	for i := range args {
		kinds[i] = compute.Compute()
		for _, m := range op.Masks {
			if m == i {
				kinds[i] = ir.I64
			}
		}
	}
	if dev := tensors[0].st.dev; dev != CPU {
		return gpuPointwise(op, a, args, kinds, compute.Compute(), newGPUArray(dev, out, shape))
	}
	blk := compiledBlock(op, kinds, compute.Compute())
	return runBlock(blk, args, a.Scalars, out, shape)
}

// runBlock evaluates a block program over the broadcast shape of its
// tensor operands (args: tensors and scalars, in the program's operand
// order) into a new CPU tensor of type out.
func runBlock(blk *ir.Block, args []ir.Value, params []float64, out DType, shape []int) *Array {
	res := newArray(out, shape)
	RunBlocks([]*ir.Block{blk}, args, params, []*Array{res})
	return res
}

// RunBlocks runs block programs over the same operands (tensors, or
// scalars filled in) into res, CPU tensors of one shape, one per program:
// one pass over the iteration space, in blocks split across the cores,
// loading each block of each operand once. Fused regions and horizontal
// groups run several programs; eager pointwise ops one. A result may be
// any view (a slice of a Cat's result, which the kernels computing its
// parts write in place): each block of it is stored through its strides.
func RunBlocks(blks []*ir.Block, args []ir.Value, params []float64, res []*Array) {
	shape := res[0].shape
	n := ir.Numel(shape)
	if n == 0 {
		return
	}
	args = laidOutForBlocks(args, shape)
	strides := make([][]int, 0, len(res)+len(args))
	for _, r := range res {
		strides = append(strides, r.strides)
	}
	for _, t := range tensorsOf(args) {
		strides = append(strides, ir.BroadcastStrides(t.shape, t.strides, shape))
	}
	cshape, cstrides := Coalesce(shape, strides...)
	// flat is, per result, whether its element i (in iteration order)
	// lies at its offset + i; the others are stored through their strides.
	flat := make([]bool, len(res))
	dense := ir.ContiguousStrides(cshape)
	for j := range res {
		flat[j] = sameInts(cstrides[j], dense, cshape)
	}
	operands := make([]*Operand, len(args))
	store := make([]Operand, len(cstrides)-len(res)) // the operands, allocated at once
	ti := len(res) - 1
	for i, v := range args {
		if t, ok := v.(*Array); ok {
			ti++
			store[ti-len(res)] = *newOperand(t.st.data, t.dtype, cshape, cstrides[ti], t.offset)
			operands[i] = &store[ti-len(res)]
		}
	}
	// user is, per operand, a program that reads it (all read it in the
	// same kind), or -1.
	user := make([]int, len(args))
	for i := range args {
		user[i] = -1
		for j, b := range blks {
			if user[i] < 0 && b.Uses(i) {
				user[i] = j
			}
		}
	}
	// straight is, per program, whether it may compute into its result's
	// memory as it goes: not where the result is an operand's storage too
	// (a kernel storing in place), whose elements it may still read.
	straight := make([]bool, len(blks))
	for j := range blks {
		straight[j] = flat[j] && sameKind(res[j].dtype, blks[j].OutKind()) && blks[j].Computes()
		for _, t := range tensorsOf(args) {
			if t.SharesStorage(res[j]) {
				straight[j] = false
			}
		}
	}
	parallelFor(n, MinParallel, func(lo, hi int) {
		frames := make([]*ir.Frame, len(blks))
		for j, b := range blks {
			frames[j] = b.GetFrame(min(BlockSize, hi-lo), params) // small ops get small frames
		}
		defer func() {
			for j, b := range blks {
				b.PutFrame(frames[j])
			}
		}()
		// One range covering the whole space runs alone: it reads the
		// operands themselves, others copies of their scratch state.
		whole := lo == 0 && hi == n
		local := make([]*Operand, len(args))
		bufs := make([]ir.Vec, len(args))
		var idx []int // a strided result's multi-index
		for i, v := range args {
			if user[i] < 0 {
				continue
			}
			if s, ok := v.(ir.Scalar); ok {
				for j, f := range frames {
					if blks[j].Uses(i) {
						one := ir.NewVec(f.ArgKind(i), 1)
						one.Fill(f.ArgKind(i), s.Value)
						f.SetUniform(i, one)
					}
				}
				continue
			}
			local[i], bufs[i] = operands[i], frames[user[i]].ArgBuf(i)
			if !whole {
				local[i] = operands[i].Clone()
			}
		}
		for s := lo; s < hi; s += BlockSize {
			m := min(BlockSize, hi-s)
			for i, o := range local {
				if o != nil {
					v := o.Load(s, m, frames[user[i]].ArgKind(i), bufs[i])
					for _, f := range frames {
						f.SetArg(i, v)
					}
				}
			}
			for j, f := range frames {
				r, k := res[j], blks[j].OutKind()
				switch {
				case straight[j]: // compute straight into the result
					dst, _ := aliasVec(r.st.data, r.dtype, k, r.offset+s, r.offset+s+m)
					f.Run(m, &dst)
				case flat[j]:
					r.StoreBlock(r.offset+s, f.Run(m, nil), k, m)
				default:
					r.storeStrided(cshape, cstrides[j], s, f.Run(m, nil), k, m, &idx)
				}
			}
		}
	})
}

// storeStrided stores the m values of v (of kind k), elements [s, s+m)
// in iteration order of t laid out by shape and strides from its offset,
// into t's storage a run at a time.
func (t *Array) storeStrided(shape, strides []int, s int, v ir.Vec, k ir.Kind, m int, idx *[]int) {
	is := strides[len(strides)-1]
	walkRuns(shape, strides, t.offset, s, m, idx, func(j, off, run int) {
		if is == 1 {
			t.StoreBlock(off, v.Slice(j, j+run), k, run)
			return
		}
		for e := range run {
			t.StoreBlock(off+e*is, v.Slice(j+e, j+e+1), k, 1)
		}
	})
}

// newOn allocates a contiguous array on device d (zeros on the CPU,
// uninitialised on a GPU).
func newOn(d Device, dt DType, shape []int) *Array {
	if d == CPU {
		return newArray(dt, shape)
	}
	return newGPUArray(d, dt, shape)
}
