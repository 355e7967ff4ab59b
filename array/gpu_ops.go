package array

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"gocompile/internal/buildid"
	"gocompile/internal/logs"
	"gocompile/internal/stats"
	"gocompile/internal/testhook"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
	"gocompile/kcache"
)

// Eager ops on CUDA tensors: each runs one kernel generated from the op's
// registry entry by package inductor, compiled through NVRTC once per
// configuration and kept for the life of the process.

// kernel returns the compiled function name from the source gen makes,
// compiling it on first use (concurrent first uses compile once). A kernel
// that fails to generate or compile panics with a *KernelError.
func (g *GPU) kernel(name string, gen func() (string, error)) *cuda.Function {
	return g.KernelIn(nil, name, gen)
}

// KernelIn is Kernel with the compiled module kept in cache c (nil: the
// process-wide artifact cache). Loaded kernels are shared by name across
// the process whichever cache they came from.
func (g *GPU) KernelIn(c *Artifacts, name string, gen func() (string, error)) *cuda.Function {
	v, ok := g.kernels.Load(name)
	if !ok {
		v, _ = g.kernels.LoadOrStore(name, &kernelEntry{})
	}
	e := v.(*kernelEntry)
	e.once.Do(func() {
		if testhook.KernelFault != nil {
			if e.err = testhook.KernelFault(name); e.err != nil {
				return
			}
		}
		res, err := compileCached(c, g.dev, name, gen)
		if err != nil {
			e.err = fmt.Errorf("compiling %s: %w", name, err)
			return
		}
		mod, err := g.dev.LoadCompiled(res)
		if err != nil {
			e.err = err
			return
		}
		if e.fn, e.err = mod.Function(name); e.err == nil {
			g.generated.Store(e.fn.Handle(), true)
		}
	})
	if e.err != nil {
		panic(&KernelError{Name: name, Err: e.err})
	}
	return e.fn
}

// KernelError is a generated kernel that could not be built: a code
// generator or toolchain failure, not misuse. Compiled programs catch it
// and run their graph eagerly instead.
type KernelError struct {
	Name string // the kernel
	Err  error  // why it could not be built
}

// Error names the kernel and the reason.
func (e *KernelError) Error() string {
	return fmt.Sprintf("gocompile: GPU kernel %s: %v", e.Name, e.Err)
}

// Unwrap is the reason the kernel could not be built.
func (e *KernelError) Unwrap() error { return e.Err }

// writeKernelSource shows a generated kernel's CUDA C: logged under
// GOCOMPILE_LOGS=output_code, and written to GOCOMPILE_DEBUG_DIR as
// <name>.cu.
func writeKernelSource(a *Artifacts, name, src string) {
	var file string
	if dir := os.Getenv("GOCOMPILE_DEBUG_DIR"); dir != "" {
		path := filepath.Join(dir, name+".cu")
		if os.MkdirAll(dir, 0o755) == nil && os.WriteFile(path, []byte(src), 0o644) == nil {
			file = path
		}
	}
	if logs.On("output_code") {
		args := a.LogArgs("kernel", name)
		if file != "" {
			args = append(args, "file", file)
		}
		logs.Text("gocompile: output code", "source", src, args...)
	}
}

// Launch launches fn on g's stream with a 1-D grid of blocks of block
// threads; a failed launch panics, naming op.
func (g *GPU) Launch(op string, fn *cuda.Function, grid, block int, args *cuda.Args) {
	err := g.stream.Launch(fn, cuda.Dim3{X: uint32(grid), Y: 1, Z: 1}, cuda.Dim3{X: uint32(block), Y: 1, Z: 1}, 0, args)
	if err != nil {
		panic(fmt.Sprintf("array: %s: launch: %v", op, err))
	}
}

// smallDependentElems is the most elements a kernel launched as a
// programmatic dependent (LaunchSmall) computes. Small kernels replayed
// from a graph spend much of their time starting; on an H200 a dependent
// launch took a chain of 64 KB kernels from 1.02 to 0.73 µs each and one
// of 1 MB kernels from 1.38 to 1.20, but one of 16 MB kernels from 7.1 to
// 8.3 (cuda's BenchmarkGPUGraphChain).
const smallDependentElems = 1 << 18

// dependentLaunch says whether generated kernels launch as programmatic
// dependents where they may; GOCOMPILE_DEPENDENT_LAUNCH=off turns it off,
// to measure it.
var dependentLaunch = os.Getenv("GOCOMPILE_DEPENDENT_LAUNCH") != "off"

// LaunchMaybeDependent launches fn on g's stream with the given grid,
// block and dynamic shared memory: as a programmatic dependent of the
// kernel ahead where want says fn gains from it (and waits before reading
// what that kernel writes) and the launch is being captured into a CUDA
// graph by this goroutine, else plainly. Only in a capture: there the
// kernel ahead is the program's own, recorded by the goroutine that holds
// it; plain launches from several goroutines interleave on the stream.
func (g *GPU) LaunchMaybeDependent(fn *cuda.Function, grid, block cuda.Dim3, shared int, args *cuda.Args, want bool) error {
	if want && dependentLaunch && g.stream.CapturingHere() {
		return g.stream.LaunchDependent(fn, grid, block, shared, args)
	}
	return g.stream.Launch(fn, grid, block, shared, args)
}

// LaunchSmall launches fn, a generated kernel that begins with
// gc_dependent_entry, through LaunchMaybeDependent: as a dependent where
// it computes few elements (elems, at most smallDependentElems).
func (g *GPU) LaunchSmall(fn *cuda.Function, grid, block cuda.Dim3, shared int, args *cuda.Args, elems int) error {
	return g.LaunchMaybeDependent(fn, grid, block, shared, args, elems <= smallDependentElems)
}

// launchSmall is Launch through LaunchSmall, for a kernel of elems
// elements.
func (g *GPU) launchSmall(op string, fn *cuda.Function, grid, block int, args *cuda.Args, elems int) {
	err := g.LaunchSmall(fn, cuda.Dim3{X: uint32(grid), Y: 1, Z: 1}, cuda.Dim3{X: uint32(block), Y: 1, Z: 1}, 0, args, elems)
	if err != nil {
		panic(fmt.Sprintf("array: %s: launch: %v", op, err))
	}
}

const threadsPerBlock = 256

// gridFor is the number of blocks for work items handled by grid-stride
// loops: enough to fill the device several times over, no more.
func (g *GPU) gridFor(items int) int {
	return max(1, min((items+threadsPerBlock-1)/threadsPerBlock, g.dev.SMCount*32))
}

// GetArgs takes an empty argument list from g's pool; PutArgs gives it
// back once the launch that used it is made.
func (g *GPU) GetArgs() *cuda.Args  { return g.args.Get().(*cuda.Args).Reset() }
func (g *GPU) PutArgs(a *cuda.Args) { g.args.Put(a) }

// addKind appends v as a kernel parameter of kind k.
func addKind(a *cuda.Args, k ir.Kind, v float64) {
	switch k {
	case ir.F32:
		a.F32(float32(v))
	case ir.F64:
		a.F64(v)
	default:
		a.I64(int64(v))
	}
}

// gpuPointwise runs op with operand kinds kinds, computing in compute,
// writing into res (a fresh tensor, or any view of the destination of a
// copy).
func gpuPointwise(op *ir.Op, a ir.Attrs, args []ir.Value, kinds []ir.Kind, compute ir.Kind, res *Array) *Array {
	k := &inductor.PointwiseKernel{Op: op, Compute: compute, Out: res.dtype}
	return GPUKernelMemo(eagerMemo(op, compute, res.dtype, args, kinds), nil, nil, false, k, op.Title, a.Scalars, args, kinds, res)
}

// eagerKey is what an eager op's kernel depends on besides its operands'
// layouts (which its PointwiseMemo keys): the op, its compute kind and
// result dtype, and each operand's kind and whether it is a scalar.
type eagerKey struct {
	op      *ir.Op
	compute ir.Kind
	out     ir.DType
	n       int
	kinds   [4]ir.Kind
	scalar  [4]bool
}

// eagerMemos keeps an eager op's last launch plan per eagerKey, so that a
// loop of eager ops on tensors laid out alike plans each op once. There
// are as many keys as ops and type combinations a program uses.
var eagerMemos sync.Map // eagerKey → *PointwiseMemo

// eagerMemo is the plan memo of an eager op's launch, or nil for ops of
// more operands than a key holds.
func eagerMemo(op *ir.Op, compute ir.Kind, out ir.DType, args []ir.Value, kinds []ir.Kind) *PointwiseMemo {
	key := eagerKey{op: op, compute: compute, out: out, n: len(args)}
	if len(args) > len(key.kinds) {
		return nil
	}
	for i, v := range args {
		key.kinds[i] = kinds[i]
		_, key.scalar[i] = v.(ir.Scalar)
	}
	if m, ok := eagerMemos.Load(key); ok {
		return m.(*PointwiseMemo)
	}
	m, _ := eagerMemos.LoadOrStore(key, new(PointwiseMemo))
	return m.(*PointwiseMemo)
}

// Launch shape of dense pointwise kernels, tuned on an H200 (see
// TestGPUTuneLaunch): blocks of pointwiseBlock threads, each thread loading
// pointwiseUnroll vectors per tile (0: as the kernel's expression asks, see
// inductor.PointwiseKernel.AutoUnroll), and at most pointwiseBlocksPerSM
// blocks per SM (0: no limit, one tile per block, which measured fastest);
// with a limit the grid strides over what is left.
var (
	pointwiseBlock       = 128
	pointwiseUnroll      = 0
	pointwiseBlocksPerSM = 0
	// pointwiseTileEdge is the tile edge of tiled kernels (0: as
	// inductor.PointwiseKernel.TileSize chooses).
	pointwiseTileEdge = 0
)

// GPUKernelIn runs the pointwise kernel k (an op's, or a fused region's,
// with Compute and Out set) over args into res, with the kernel kept in
// cache c (see KernelIn), its launch queued on q when q is not nil, and,
// with tune, the unroll and block size of a dense kernel chosen by timing
// (MaxAutotune). A kernel with extra outputs (k.Extra, a horizontal
// group) writes them to extra, contiguous tensors of res's shape.
//
// The kernel walks the dims in the output's memory order (merged where
// every tensor allows). When every output is then contiguous and every
// operand dense, uniform, a scalar or a row or column broadcast, and the
// vector tensors are aligned, it is a dense kernel over flat indices;
// otherwise an N-d kernel, or a tiled one when an operand's contiguous dim
// is not the output's (see planLayout).
func GPUKernelIn(c *Artifacts, q *LaunchQueue, tune bool, k *inductor.PointwiseKernel, title string, scalars []float64, args []ir.Value, kinds []ir.Kind, res *Array, extra ...*Array) *Array {
	return GPUKernelMemo(nil, c, q, tune, k, title, scalars, args, kinds, res, extra...)
}

// PointwiseMemo remembers the last launch plan of one call site, such as
// a compiled program's step: called again with tensors of the same
// shapes, strides, dtypes and alignment, GPUKernelMemo launches without
// planning (no dims ordered and merged, no kernel named, no parameter
// kinds derived), which is most of a small launch's host cost. Safe for
// concurrent use; the zero value is empty.
type PointwiseMemo struct{ plans LastPlan[*pointwisePlan] }

// pointwisePlan is a planned launch of a pointwise kernel.
type pointwisePlan struct {
	g           *GPU
	k           inductor.PointwiseKernel
	name        string
	params      []ir.Kind // the kinds of k's op parameters
	geo         []byte    // an N-d or tiled kernel's geometry; nil for a dense one
	inners      []int     // a dense kernel's broadcast operands' inner sizes
	grid, block int
	fn          LoadedKernel
}

// pointwiseKey appends what a pointwise launch plan depends on: the
// package's launch settings, then each tensor's dtype, shape, strides and
// address modulo 64 bytes (vector alignment), the outputs first.
func pointwiseKey(key []int, args []ir.Value, res *Array, extra []*Array) []int {
	// The launch settings tests vary.
	key = append(key, pointwiseBlock, pointwiseUnroll, pointwiseBlocksPerSM, pointwiseTileEdge)
	key = AppendLayoutKey(key, res)
	for _, t := range extra {
		key = AppendLayoutKey(key, t)
	}
	for _, v := range args {
		if t, ok := v.(*Array); ok {
			key = AppendLayoutKey(key, t)
		} else {
			key = append(key, -1)
		}
	}
	return key
}

// AppendLayoutKey appends what a kernel's launch plan may depend on in t:
// its dtype, shape, strides and address modulo 64 bytes (vector
// alignment). Launch plans kept by call site (PointwiseMemo) are reused
// for tensors whose keys are equal.
func AppendLayoutKey(key []int, t *Array) []int {
	key = append(key, int(t.dtype), len(t.shape))
	key = append(key, t.shape...)
	key = append(key, t.strides...)
	return append(key, int(uintptr(t.DevicePtr())%64))
}

// GPUKernelMemo is GPUKernelIn with the plan kept in m (nil: plan every
// call). k is planned in place when a plan is made, and left as it is
// when m's plan serves.
func GPUKernelMemo(m *PointwiseMemo, c *Artifacts, q *LaunchQueue, tune bool, k *inductor.PointwiseKernel, title string, scalars []float64, args []ir.Value, kinds []ir.Kind, res *Array, extra ...*Array) *Array {
	if res.Numel() == 0 {
		return res
	}
	g := res.st.gpu.g
	plan := func() *pointwisePlan { return planPointwiseLaunch(g, k, title, args, kinds, res, extra) }
	var p *pointwisePlan
	if m != nil {
		var buf [128]int
		p = m.plans.Get(g, pointwiseKey(buf[:0], args, res, extra), nil, plan)
	} else {
		p = plan()
	}
	p.launch(c, q, tune, title, scalars, args, kinds, res, extra)
	return res
}

// planPointwiseLaunch plans k's launch over args into res and extra.
func planPointwiseLaunch(g *GPU, k *inductor.PointwiseKernel, title string, args []ir.Value, kinds []ir.Kind, res *Array, extra []*Array) *pointwisePlan {
	tensors := tensorsOf(args)
	outs := append([]*Array{res}, extra...)
	var strides [][]int
	var lts []layoutTensor
	for _, t := range outs {
		strides = append(strides, t.strides)
		lts = append(lts, layoutTensor{uintptr(t.DevicePtr()), t.dtype.Size()})
	}
	for _, t := range tensors {
		strides = append(strides, ir.BroadcastStrides(t.shape, t.strides, res.shape))
		lts = append(lts, layoutTensor{uintptr(t.DevicePtr()), t.dtype.Size()})
	}
	var operands []inductor.Operand
	for i, v := range args {
		o := inductor.Operand{Kind: kinds[i], Access: inductor.ScalarArg}
		if t, ok := v.(*Array); ok {
			o.DType, o.Access = t.dtype, inductor.Strided
		}
		operands = append(operands, o)
	}
	k.Unroll = pointwiseUnroll
	geo, inners, ok := planPointwise(k, res.shape, strides, len(outs), operands, lts)
	if !ok {
		Throw(title, tensors, "make the operands contiguous first",
			"the layout has dims that cannot be merged into %d; GPU kernels index at most %d", inductor.MaxRank, inductor.MaxRank)
	}
	params, err := k.ParamKinds()
	if err != nil {
		panic("array: " + err.Error())
	}
	p := &pointwisePlan{g: g, k: *k, params: params, inners: inners}
	if geo != nil {
		p.geo = k.Bytes(geo)
		p.grid, p.block = k.Launch(geo, pointwiseBlock)
	} else {
		p.block = pointwiseBlock
		p.grid = p.denseGrid(res.Numel(), k, p.block)
	}
	p.name = k.Name()
	return p
}

// denseGrid is the grid of the dense kernel k over n elements in blocks
// of block threads.
func (p *pointwisePlan) denseGrid(n int, k *inductor.PointwiseKernel, block int) int {
	tile := k.TileElems(block)
	grid := min((n+tile-1)/tile, 1<<31-1)
	if pointwiseBlocksPerSM > 0 {
		grid = min(grid, pointwiseBlocksPerSM*p.g.dev.SMCount)
	}
	return grid
}

// launch packs the arguments and launches p (or queues it on q).
func (p *pointwisePlan) launch(c *Artifacts, q *LaunchQueue, tune bool, title string, scalars []float64, args []ir.Value, kinds []ir.Kind, res *Array, extra []*Array) {
	g := p.g
	n := res.Numel()
	a := q.Args(g)
	defer q.Release(g, a)
	a.I64(int64(n))
	for _, v := range args {
		if t, ok := v.(*Array); ok {
			a.Ptr(t.DevicePtr())
		}
	}
	a.Ptr(res.DevicePtr())
	for _, t := range extra {
		a.Ptr(t.DevicePtr())
	}
	for i, v := range args {
		if s, ok := v.(ir.Scalar); ok {
			addKind(a, kinds[i], s.Value)
		}
	}
	for i, kd := range p.params {
		addKind(a, kd, scalars[i])
	}
	k, name, grid, block := &p.k, p.name, p.grid, p.block
	addLayoutArgs(a, k, p.geo, p.inners)
	if p.geo == nil && tune && !g.stream.CapturingHere() {
		tuned := *k
		tuned.Unroll, block = tunePointwise(c, q, g, &tuned, n, true, a)
		k, name = &tuned, tuned.Name()
		grid = p.denseGrid(n, k, block)
	}
	if q == nil {
		g.launchSmall(title, p.fn.For(g, c, p.name, name, k.Source), grid, block, a, n)
		return
	}
	uses := append(append([]*Array{res}, extra...), tensorsOf(args)...)
	KernelOrQueue(q, g, c, name, k.Source, func(fn *cuda.Function) { g.launchSmall(title, fn, grid, block, a, n) }, uses...)
}

// addLayoutArgs appends pointwise kernel k's layout parameters: its
// geometry (geo: an N-d or tiled kernel), or aligned and its broadcasts'
// inner sizes (a dense kernel; aligned always, as planPointwise plans a
// dense kernel only for aligned tensors).
func addLayoutArgs(a *cuda.Args, k *inductor.PointwiseKernel, geo []byte, inners []int) {
	if geo != nil {
		a.Bytes(geo, 8)
		return
	}
	a.I32(1) // aligned
	for _, inner := range inners {
		if k.Index32 {
			a.U32(uint32(inner))
		} else {
			a.I64(int64(inner))
		}
	}
}

// tunePointwise returns the unroll and block size MaxAutotune chose for
// the dense kernel k over n elements (aligned or not), searching the
// first time: every unroll of 1, 2, 4 and 8 with blocks of 128, 256 and
// 512 threads, timed with the arguments a.
func tunePointwise(c *Artifacts, q *LaunchQueue, g *GPU, k *inductor.PointwiseKernel, n int, aligned bool, a *cuda.Args) (unroll, block int) {
	key := pointwiseTuneKey{g.dev.Ordinal, k.Name(), n, aligned}
	if v, ok := tunedPointwise.Load(key); ok {
		return v.([2]int)[0], v.([2]int)[1]
	}
	q.Drain() // the search launches now
	type cand struct{ unroll, block int }
	var cands []cand
	var names []string
	def := -1
	for _, u := range []int{1, 2, 4, 8} {
		for _, b := range []int{128, 256, 512} {
			if u == k.AutoUnroll() && b == pointwiseBlock {
				def = len(cands)
			}
			cands = append(cands, cand{u, b})
			names = append(names, fmt.Sprintf("u%db%d", u, b))
		}
	}
	kernel := func(i int) (*cuda.Function, int) {
		kk := *k
		kk.Unroll = cands[i].unroll
		grid := min((n+kk.TileElems(cands[i].block)-1)/kk.TileElems(cands[i].block), 1<<31-1)
		return g.KernelIn(c, kk.Name(), kk.Source), grid
	}
	best := cands[Autotune(c, g, "pointwise", fmt.Sprintf("%s n%d aligned%v", key.name, n, aligned), names, def,
		func(i int) { kernel(i) },
		func(i int) error {
			fn, grid := kernel(i)
			return g.stream.Launch(fn, cuda.Dim3{X: uint32(grid), Y: 1, Z: 1}, cuda.Dim3{X: uint32(cands[i].block), Y: 1, Z: 1}, 0, a)
		})]
	tunedPointwise.Store(key, [2]int{best.unroll, best.block})
	return best.unroll, best.block
}

// tunedPointwise keeps the tuned unroll and block size of each dense
// kernel (by its default name), element count and alignment, so a tuned
// call looks its launch shape up without building autotune's key.
var tunedPointwise sync.Map // pointwiseTuneKey → [unroll, block]

type pointwiseTuneKey struct {
	device  int
	name    string
	n       int
	aligned bool
}

// broadcastAccess classifies an operand of a kernel with a contiguous
// output by its coalesced strides st over shape: RowBroadcast when it
// repeats a contiguous block of its trailing dims (zero strides, then
// contiguous ones: element i at i % inner), ColBroadcast when it holds one
// element per block of its trailing dims (contiguous strides, then zero
// ones: element i at i / inner), else Strided. Coalesced shapes have no
// dims of size 1, and dense and uniform operands are classified before.
func broadcastAccess(st, shape []int) (inductor.Access, int) {
	r := len(shape)
	// Row: a contiguous suffix after zeros.
	d, inner := r, 1
	for d > 0 && st[d-1] == inner {
		inner *= shape[d-1]
		d--
	}
	if d < r && allZero(st[:d]) {
		return inductor.RowBroadcast, inner
	}
	// Column: zeros after a contiguous prefix.
	d, inner = r, 1
	for d > 0 && st[d-1] == 0 {
		inner *= shape[d-1]
		d--
	}
	if d == r || d == 0 {
		return inductor.Strided, 0
	}
	for e, want := d-1, 1; e >= 0; e-- {
		if st[e] != want {
			return inductor.Strided, 0
		}
		want *= shape[e]
	}
	return inductor.ColBroadcast, inner
}

// sameInts reports whether strides a and b step through shape alike
// (dims of size 1 may differ).
func sameInts(a, b, shape []int) bool {
	for d := range shape {
		if shape[d] != 1 && a[d] != b[d] {
			return false
		}
	}
	return true
}

func allZero(s []int) bool {
	for _, v := range s {
		if v != 0 {
			return false
		}
	}
	return true
}

// gpuCopyInto writes src, broadcast and converted, into the view dst.
func gpuCopyInto(dst, src *Array) {
	a := ir.Attrs{DType: dst.dtype}
	compute, _, err := ir.OpCast.Types([]ir.Operand{{DType: src.dtype}}, &a)
	Check(err, "Copy", dst, src)
	gpuPointwise(ir.OpCast, a, []ir.Value{src}, []ir.Kind{compute.Compute()}, compute.Compute(), dst)
}

// gpuIndex gathers x along dim into res: by index shaped like res
// (Gather) or by a 1-D index (IndexSelect). Out-of-range indices become an
// *Error: the check waits for the kernel, or, under capture, is deferred
// to the device's fault log (faults.go).
func gpuIndex(op string, x, index *Array, dim int, gather bool, res *Array) {
	n := res.Numel()
	if n == 0 {
		return
	}
	g := res.st.gpu.g
	if len(res.shape) > inductor.MaxRank {
		Throw(op, []*Array{x, index}, "use fewer dims", "GPU gathers index at most %d dims", inductor.MaxRank)
	}
	kern := &inductor.IndexKernel{Elem: x.dtype, Index: index.dtype, Gather: gather}
	fn := g.kernel(kern.Name(), func() (string, error) { return kern.Source(), nil })
	geo := inductor.Geometry{Rank: len(res.shape), Strides: make([][inductor.MaxRank]int64, 2)}
	for d, s := range res.shape {
		geo.Sizes[d] = int64(s)
		geo.Strides[0][d] = int64(x.strides[d])
		if gather {
			geo.Strides[1][d] = int64(index.strides[d])
		}
	}
	if !gather && len(index.shape) == 1 {
		geo.Strides[1][0] = int64(index.strides[0])
	}
	size := 1 // a scalar's one element (Gather checked its index)
	if len(x.shape) > 0 {
		size = x.shape[dim]
	}
	operands := []*Array{x, index}
	check, deferred, bad := g.indexCheck(op, size, operands)
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.I64(int64(n)).Ptr(x.DevicePtr()).Ptr(index.DevicePtr()).Ptr(res.DevicePtr()).
		I64(int64(dim)).I64(int64(size)).Ptr(check).Bytes(geo.Bytes(), 8)
	g.Launch(op, fn, g.gridFor(n), threadsPerBlock, args)
	if !deferred {
		g.readIndexCheck(op, size, bad, operands)
	}
}

// gpuMatMul multiplies matrix batches on the GPU: cuBLAS for floating
// types, a generated kernel for integers.
func gpuMatMul(op *ir.Op, xs, ys *Array, batch []int, m, k, n int, work DType, shape []int) *Array {
	dev := xs.st.dev
	g := MustGPU(op.Title, dev)
	res := newGPUArray(dev, work, append(append([]int(nil), batch...), m, n))
	nb := ir.Numel(batch)
	if m*n*nb == 0 {
		return res.Reshape(shape...)
	}
	if k == 0 {
		Check(g.stream.Memset8(res.DevicePtr(), 0, res.Numel()*work.Size()), op.Title, xs, ys)
		return res.Reshape(shape...)
	}
	if !work.IsFloat() {
		a := asType(xs.Expand(append(append([]int(nil), batch...), m, k)...), ir.Int64)
		c := asType(ys.Expand(append(append([]int(nil), batch...), k, n)...), ir.Int64)
		fn := g.kernel(inductor.IntMatMulName, func() (string, error) { return inductor.IntMatMulSource, nil })
		args := g.GetArgs()
		defer g.PutArgs(args)
		args.Ptr(a.DevicePtr()).Ptr(c.DevicePtr()).Ptr(res.DevicePtr()).I64(int64(nb)).I64(int64(m)).I64(int64(k)).I64(int64(n))
		g.Launch(op.Title, fn, g.gridFor(nb*m*n), threadsPerBlock, args)
		return res.Reshape(shape...)
	}
	xm := blasOperand(xs.Expand(append(append([]int(nil), batch...), m, k)...), work)
	ym := blasOperand(ys.Expand(append(append([]int(nil), batch...), k, n)...), work)
	sx, okx := batchStride(xm.t, len(batch))
	sy, oky := batchStride(ym.t, len(batch))
	if !okx {
		xm = blasOperand(Contiguous(xm.t), work)
		sx, _ = batchStride(xm.t, len(batch))
	}
	if !oky {
		ym = blasOperand(Contiguous(ym.t), work)
		sy, _ = batchStride(ym.t, len(batch))
	}
	b, err := g.dev.BLAS()
	Check(err, op.Title, xs, ys)
	b.AllowTF32(allowTF32.Load()) // devices started after AllowTF32 follow it too
	// Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: swap the operands.
	err = b.GemmStridedBatched(g.stream, ym.trans, xm.trans, n, m, k,
		ym.t.DevicePtr(), ym.ld, int64(sy), xm.t.DevicePtr(), xm.ld, int64(sx),
		res.DevicePtr(), n, int64(m*n), nb, blasType(work))
	Check(err, op.Title, xs, ys)
	return res.Reshape(shape...)
}

// batchStride returns the one stride that steps through t's flattened
// batch dims, if there is one.
func batchStride(t *Array, nbatch int) (int, bool) {
	shape, strides := Coalesce(t.shape[:nbatch], t.strides[:nbatch])
	switch len(shape) {
	case 0:
		return 0, true
	case 1:
		return strides[0][0], true
	}
	return 0, false
}

func blasType(dt DType) cuda.DataType {
	switch dt {
	case ir.Float64:
		return cuda.R64F
	case ir.Float16:
		return cuda.R16F
	case ir.BFloat16:
		return cuda.R16BF
	}
	return cuda.R32F
}

// kernelCodegenVersion names the meaning of generated kernels beyond their
// source (how they are launched): bump it when that changes.
const kernelCodegenVersion = "2"

// compileCached compiles a kernel's source with NVRTC, or takes the
// compiled module from a's cache (memory, then its directory), so a new
// process skips NVRTC for kernels an earlier one compiled. The key covers
// everything that changes the module: the source, the NVRTC version and
// the device's architecture. In a build that names its code exactly (see
// buildid.Identity) the kernel's name and that build stand for the source,
// which is then generated only on a miss: a new process skips code
// generation too.
func compileCached(a *Artifacts, dev *cuda.Device, name string, gen func() (string, error)) (*cuda.CompileResult, error) {
	major, minor, err := cuda.NVRTCVersion()
	if err != nil {
		return nil, err
	}
	spec := kcache.KernelSpec{Name: name, CodegenVersion: kernelCodegenVersion,
		NVRTCVersion: fmt.Sprintf("%d.%d", major, minor), Arch: fmt.Sprintf("sm_%d%d", dev.Major, dev.Minor)}
	var src string
	generate := func() error {
		if src != "" {
			return nil
		}
		var err error
		if src, err = gen(); err == nil {
			stats.KernelSources.Add(1)
			writeKernelSource(a, name, src)
		}
		return err
	}
	if id := buildid.Identity(); id != "" && !kernelSourcesWanted() {
		spec.CodegenVersion += " build " + id
	} else {
		if err := generate(); err != nil {
			return nil, err
		}
		spec.Source = src
	}
	e, err := a.Cache().GetOrCompute(spec.Key(), func() (kcache.Entry, error) {
		if err := generate(); err != nil {
			return kcache.Entry{}, err
		}
		n := stats.Compiling.Add(1)
		defer stats.Compiling.Add(-1)
		for m := stats.MaxCompiling.Load(); n > m && !stats.MaxCompiling.CompareAndSwap(m, n); m = stats.MaxCompiling.Load() {
		}
		res, err := cuda.Compile(src, name+".cu", dev)
		if err != nil {
			return kcache.Entry{}, err
		}
		return a.Label(kcache.Entry{Kernel: &kcache.Kernel{Arch: res.Arch, CUBIN: res.CUBIN, PTX: res.PTX, Log: res.Log,
			Functions: []kcache.Function{{Name: name}}}}, name), nil
	})
	if err != nil {
		return nil, err
	}
	return &cuda.CompileResult{CUBIN: e.Kernel.CUBIN, PTX: e.Kernel.PTX, Log: e.Kernel.Log, Arch: e.Kernel.Arch}, nil
}

// gpuIndexCopy writes src into the view dst along dim d at the 1-D idx,
// with the index read on the device (no wait for it: the write can be
// captured into a CUDA graph). Out-of-range indices become an *Error as
// gpuIndex's do.
func gpuIndexCopy(op string, dst *Array, d int, idx, src *Array) {
	if src.dtype != dst.dtype {
		src = asType(src, dst.dtype)
	}
	kern := &inductor.IndexCopyKernel{Elem: dst.dtype, Index: idx.dtype}
	gpuIndexWrite(op, kern.Name(), kern.Source, dst, d, idx, src, []*Array{dst, idx, src})
}

// gpuIndexAdd is IndexAdd on a GPU: x copied to float32 (float64 for
// float64), src's entries added at idx along dim d with atomic adds, then
// the sums rounded to out.
func gpuIndexAdd(op string, x *Array, d int, idx, src *Array, out DType) *Array {
	work := ir.Float32
	if out == ir.Float64 {
		work = ir.Float64
	}
	acc := newGPUArray(x.st.dev, work, x.shape)
	copyInto(acc, x)
	if src.dtype != work {
		src = asType(src, work)
	}
	kern := &inductor.IndexAddKernel{Elem: work, Index: idx.dtype}
	gpuIndexWrite(op, kern.Name(), kern.Source, acc, d, idx, src, []*Array{x, idx, src})
	if out == work {
		return acc
	}
	return asType(acc, out)
}

// gpuIndexWrite launches an index write kernel (inductor.IndexCopyKernel's
// parameters) of src (dst's type) into dst along d at idx; errors name op
// and operands.
func gpuIndexWrite(op, name string, source func() string, dst *Array, d int, idx, src *Array, operands []*Array) {
	n := src.Numel()
	if n == 0 {
		return
	}
	g := dst.st.gpu.g
	if len(src.shape) > inductor.MaxRank {
		Throw(op, operands, "use fewer dims", "GPU index writes index at most %d dims", inductor.MaxRank)
	}
	fn := g.kernel(name, func() (string, error) { return source(), nil })
	geo := inductor.Geometry{Rank: len(src.shape), Strides: make([][inductor.MaxRank]int64, 2)}
	for i, s := range src.shape {
		geo.Sizes[i] = int64(s)
		geo.Strides[0][i] = int64(dst.strides[i])
		geo.Strides[1][i] = int64(src.strides[i])
	}
	istride := 0
	if len(idx.shape) == 1 {
		istride = idx.strides[0]
	}
	size := dst.shape[d]
	check, deferred, bad := g.indexCheck(op, size, operands)
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.I64(int64(n)).Ptr(src.DevicePtr()).Ptr(idx.DevicePtr()).I64(int64(idx.Numel())).I64(int64(istride)).Ptr(dst.DevicePtr()).
		I64(int64(d)).I64(int64(size)).Ptr(check).Bytes(geo.Bytes(), 8)
	g.launchSmall(op, fn, g.gridFor(n), threadsPerBlock, args, n)
	if !deferred {
		g.readIndexCheck(op, size, bad, operands)
	}
}
