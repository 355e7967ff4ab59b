package program

import (
	"sync"
	"sync/atomic"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/fuse"
	"gocompile/internal/logs"
	"gocompile/ir"
)

// Eager composite ops on a GPU (Softmax, LogSoftmax, LayerNorm, RMSNorm,
// …) run as one row kernel: the kernel a compiled program would run for
// the op's decomposition, from the same generator. The decomposition is
// recorded into a graph and partitioned once per configuration (op,
// attributes, argument types and shapes, device); when it is one row
// region, later calls with that configuration look up the plan by a
// fixed-size key and launch its kernel. Anything else (a decomposition of
// several regions, like Linear's; a CPU tensor; arguments the
// decomposition rejects) runs the decomposition as before, so misuse
// reports the same errors.

func init() { array.SetCompositeRunner(runComposite) }

// maxKeyRank is the largest rank a composite's arguments may have to run
// as one kernel (larger ones run their decomposition).
const maxKeyRank = 8

// compositeKey is what a composite call's plan depends on.
type compositeKey struct {
	op       *ir.Op
	dim      int
	keepDim  bool
	nDims    int
	dims     [maxKeyRank]int
	nScalars int
	scalars  [2]float64
	dev      ir.Device
	// moved marks a Softmax or LogSoftmax over a dim other than the last
	// whose elements lie next to each other: the kernel reads the input
	// permuted so that dim is last, and the result is permuted back.
	moved bool
	// flat marks a LayerNorm or RMSNorm over several trailing dims that
	// merge into one (their strides allow it): the kernel reads the input
	// as rows of their product, and the result is reshaped back.
	flat bool
	args [3]argKey
}

type argKey struct {
	present bool
	dtype   ir.DType
	rank    int
	shape   [maxKeyRank]int
}

// compositePlan is how calls with one configuration run.
type compositePlan struct {
	step   *rowStep // nil: the decomposition runs
	inputs []int    // per region input, the call argument it is
	perm   []int    // moved: the permutation that makes the reduced dim last
	flat   int      // flat: how many trailing dims merge into the row
	title  string
	// fast is the launch for arguments that are all contiguous and
	// aligned for vector access (nil until first used).
	fast atomic.Pointer[compositeLaunch]
	// broken is set when the kernel failed to build: the decomposition
	// runs from then on.
	broken atomic.Bool
}

// compositeLaunch is a prepared launch: the kernel, its shape, and the
// result's shape and type.
type compositeLaunch struct {
	l     rowLaunch
	fn    *cuda.Function
	shape []int
	dtype ir.DType
}

var (
	compositePlans sync.Map // compositeKey → *compositePlan
	compositeCount atomic.Int64
)

// maxCompositePlans bounds the plans kept; past it the cache starts over
// (a program that calls composites on ever new shapes).
const maxCompositePlans = 4096

// runComposite is the array.CompositeRunner: it runs op as one row kernel
// when its arguments are on a GPU and its decomposition is one row region.
func runComposite(op *ir.Op, a ir.Attrs, args []ir.Value) (*array.Array, bool) {
	key, ok := compositeKeyOf(op, a, args)
	if !ok {
		return nil, false
	}
	v, ok := compositePlans.Load(key)
	if !ok {
		if compositeCount.Add(1) > maxCompositePlans {
			compositePlans.Clear()
			compositeCount.Store(1)
		}
		v, _ = compositePlans.LoadOrStore(key, newCompositePlan(key, op, a, args))
	}
	p := v.(*compositePlan)
	if p.step == nil || p.broken.Load() {
		return nil, false
	}
	return p.run(args)
}

// compositeKeyOf is the key of a call, or false when the call cannot run
// as one kernel whatever its decomposition (not on a GPU, too many dims
// or arguments, scalars among them).
func compositeKeyOf(op *ir.Op, a ir.Attrs, args []ir.Value) (compositeKey, bool) {
	var k compositeKey
	if len(args) == 0 || len(args) > len(k.args) || len(a.Dims) > maxKeyRank || len(a.Scalars) > len(k.scalars) {
		return k, false
	}
	x, ok := args[0].(*array.Array)
	if !ok || x == nil || !x.OnGPU() {
		return k, false
	}
	k.op, k.dim, k.keepDim, k.dev = op, a.Dim, a.KeepDim, x.Device()
	k.nDims = copy(k.dims[:], a.Dims)
	k.nScalars = copy(k.scalars[:], a.Scalars)
	for i, v := range args {
		if v == nil {
			continue
		}
		t, ok := v.(*array.Array)
		if !ok || t == nil || len(t.Shape()) > maxKeyRank {
			return k, false
		}
		ak := &k.args[i]
		ak.present, ak.dtype, ak.rank = true, t.DType(), len(t.Shape())
		copy(ak.shape[:], t.Shape())
	}
	if op == ir.OpSoftmax || op == ir.OpLogSoftmax {
		shape := x.Shape()
		d, err := ir.NormDim(op.Title, shape, a.Dim)
		if err != nil {
			return k, false // the decomposition reports it
		}
		if len(shape) > 0 && d != len(shape)-1 {
			if x.Strides()[d] != 1 || shape[d] <= 1 {
				// Rows that are columns in memory: the row kernel would
				// read them with strided, uncoalesced loads.
				return k, false
			}
			k.moved = true
		}
	}
	if (op == ir.OpLayerNorm || op == ir.OpRMSNorm) && len(a.Dims) > 1 {
		k.flat = mergesTrailing(x, a.Dims, args[1:])
	}
	return k, true
}

// mergesTrailing reports whether x's trailing dims are the normalized
// shape dims, merge into one dim, and the affine parameters among params
// are contiguous arrays of that shape.
func mergesTrailing(x *array.Array, dims []int, params []ir.Value) bool {
	shape, strides := x.Shape(), x.Strides()
	n := len(dims)
	if n > len(shape) {
		return false
	}
	for i, d := range dims {
		if shape[len(shape)-n+i] != d {
			return false
		}
	}
	for i := len(shape) - n; i < len(shape)-1; i++ {
		if strides[i] != strides[i+1]*shape[i+1] {
			return false
		}
	}
	for _, v := range params {
		if v == nil {
			continue
		}
		t := v.(*array.Array)
		if !ir.SameShape(t.Shape(), dims) || !t.IsContiguous() {
			return false
		}
	}
	return true
}

// newCompositePlan records op's decomposition on the key's argument
// metadata, and plans it as one row kernel if it is one row region.
func newCompositePlan(key compositeKey, op *ir.Op, a ir.Attrs, args []ir.Value) *compositePlan {
	p := &compositePlan{title: op.Title}
	x := args[0].(*array.Array)
	attrs := ir.Attrs{Dim: a.Dim, KeepDim: a.KeepDim, Dims: append([]int(nil), a.Dims...), Scalars: append([]float64(nil), a.Scalars...), DType: a.DType}
	if key.moved {
		rank := len(x.Shape())
		d, _ := ir.NormDim(op.Title, x.Shape(), a.Dim)
		for i := range rank {
			if i != d {
				p.perm = append(p.perm, i)
			}
		}
		p.perm = append(p.perm, d)
		attrs.Dim = rank - 1
	}
	if key.flat {
		p.flat = len(a.Dims)
		attrs.Dims = []int{ir.Numel(a.Dims)}
	}
	g := &ir.Graph{}
	gargs := make([]ir.Value, len(args))
	inputArg := map[*ir.Node]int{}
	for i, v := range args {
		t, ok := v.(*array.Array)
		if !ok || t == nil {
			continue
		}
		shape := t.Shape()
		switch {
		case i == 0 && p.perm != nil:
			shape = permuted(shape, p.perm)
		case p.flat > 0:
			shape = flatShape(shape, p.flat)
		}
		n := g.Input(shape, t.DType(), t.Device(), "")
		gargs[i] = n
		inputArg[n] = i
	}
	root, err := g.Call(op, attrs, "", gargs...)
	if err != nil {
		return p // misuse: the decomposition reports it
	}
	g.Outputs = []*ir.Node{root}
	if _, err := ir.Decompose(g); err != nil {
		return p
	}
	ir.DCE(g)
	regions, err := fuse.Partition(g)
	if err != nil {
		return p
	}
	if len(regions) != 1 || regions[0].Row == nil || regions[0].Row.Dims != nil || regions[0].Root != g.Outputs[0] {
		return p // not one last-dim row region: the decomposition's kernels run
	}
	r := regions[0]
	for _, in := range r.Inputs {
		i, ok := inputArg[in.Node]
		if !ok || in.Views != nil {
			return p
		}
		p.inputs = append(p.inputs, i)
	}
	step, err := newRowStep(r, compileFused)
	if err != nil {
		return p
	}
	p.step = step
	return p
}

// flatShape is shape with its last n dims merged into one.
func flatShape(shape []int, n int) []int {
	return append(append([]int(nil), shape[:len(shape)-n]...), ir.Numel(shape[len(shape)-n:]))
}

// permuted is shape with its dims in the order perm gives.
func permuted(shape, perm []int) []int {
	s := make([]int, len(perm))
	for i, d := range perm {
		s[i] = shape[d]
	}
	return s
}

// run runs the plan's kernel on the call's arguments.
func (p *compositePlan) run(args []ir.Value) (res *array.Array, ok bool) {
	defer func() {
		if e := recover(); e != nil {
			ke, isKernel := e.(*array.KernelError)
			if !isKernel {
				panic(e)
			}
			p.broken.Store(true)
			logs.Warn("gocompile: a composite op's kernel failed to build; running its decomposition", "op", p.title, "kernel", ke.Name, "err", ke.Err)
			res, ok = nil, false
		}
	}()
	var buf [3]*array.Array
	ins := buf[:len(p.inputs)]
	dense, aligned := p.perm == nil, true
	for i, j := range p.inputs {
		t := args[j].(*array.Array)
		if p.flat > 0 {
			t = flatten(t, p.flat)
		}
		ins[i] = t
		if dense && !t.IsContiguous() {
			dense = false
		}
		aligned = aligned && t.DevicePtr()%16 == 0 // so planGPU picks the vectors it picked for the first call
	}
	if dense && aligned {
		res = p.runFast(ins)
	} else {
		res = p.runGeneral(ins)
	}
	if p.flat > 0 { // the result is contiguous, of x's shape
		x := args[0].(*array.Array)
		res = res.WithLayout(ir.Layout{Shape: x.Shape(), Strides: ir.ContiguousStrides(x.Shape()), Offset: res.Offset()})
	}
	return res, true
}

// flatten is t with its last n dims merged (they merge: mergesTrailing).
func flatten(t *array.Array, n int) *array.Array {
	shape, strides := t.Shape(), t.Strides()
	r := len(shape) - n
	return t.WithLayout(ir.Layout{Shape: flatShape(shape, n), Strides: append(append([]int(nil), strides[:r]...), strides[len(strides)-1]), Offset: t.Offset()})
}

// runGeneral runs the step on any layout of the inputs.
func (p *compositePlan) runGeneral(ins []*array.Array) *array.Array {
	if p.perm != nil {
		x := ins[0]
		ins[0] = x.WithLayout(ir.Layout{Shape: permuted(x.Shape(), p.perm), Strides: permuted(x.Strides(), p.perm), Offset: x.Offset()})
	}
	res := p.step.run(ins, nil, nil)
	if p.perm != nil { // back to the input's order of dims
		shape, strides := make([]int, len(p.perm)), make([]int, len(p.perm))
		for i, d := range p.perm {
			shape[d], strides[d] = res.Shape()[i], res.Strides()[i]
		}
		res = res.WithLayout(ir.Layout{Shape: shape, Strides: strides, Offset: res.Offset()})
	}
	return res
}

// runFast runs the plan on contiguous, aligned inputs: the first call
// plans the launch (or finds that it is not a single launch), later ones
// only allocate the result and launch.
func (p *compositePlan) runFast(ins []*array.Array) *array.Array {
	c := p.fast.Load()
	if c == nil || c.l.k.Cluster > 1 && clustersFail.Load() {
		c = p.prepare(ins)
		p.fast.Store(c)
	}
	if c.fn == nil { // not one plain launch: the step decides each time
		return p.step.run(ins, nil, nil)
	}
	res := array.New(ins[0].Device(), c.dtype, c.shape)
	g := res.GPU()
	a := g.GetArgs()
	rowArgs(a, &c.l, ins, res)
	launchRow(g, p.step.cache, p.title, c.fn, &c.l, a)
	g.PutArgs(a)
	return res
}

// prepare plans the launch of the step for contiguous, aligned inputs
// like ins:
// one launch of a row kernel, or (fn nil) a case rowStep.run handles
// otherwise (empty rows, rows split across blocks, op by op).
func (p *compositePlan) prepare(ins []*array.Array) *compositeLaunch {
	s := p.step
	c := &compositeLaunch{dtype: s.r.Root.DType}
	shapes := make([][]int, len(ins))
	for i, t := range ins {
		shapes[i] = t.Shape()
	}
	full, err := ir.Broadcast(p.title, shapes...)
	if err != nil {
		return c
	}
	R := full[len(full)-1]
	c.shape = s.shape(full)
	if R == 0 || ir.Numel(c.shape) == 0 || s.opByOp(ins[0], ir.Numel(full[:len(full)-1]), R) {
		return c
	}
	g := ins[0].GPU()
	c.l = s.planGPU(ins, full, g, 0)
	if c.l.parts > 1 {
		return c
	}
	c.fn = g.KernelIn(s.cache, c.l.name, c.l.k.Source)
	return c
}
