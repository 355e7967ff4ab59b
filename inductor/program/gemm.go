package program

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// A matrix product of few rows (inference at small batch, a decode step)
// runs on a GPU as a generated kernel (inductor.GemmKernel) that applies the product's
// pointwise epilogue, a bias add and activation, before its only store:
// the product is never written and read back, and no library is loaded or
// initialised for it, so a new process serves its first call without
// cuBLAS's start-up. Float32 products of up to inductor.GemmMaxM rows and
// bfloat16 and float16 ones of up to inductor.Gemm16MaxM (adding in
// float32, the weight streamed once) run so. Larger float32 products followed by a bias add run
// through cuBLASLt with the add fused (lt.go); other products run
// with cuBLAS, the epilogue as its own fused kernel.

// gemmEpilogue is a fused pointwise region that can run as the epilogue of
// the product it reads: it reads the product once, unviewed, nothing else
// reads the product, and every other input exists before the product does.
type gemmEpilogue struct {
	step    int // the region's step
	product int // the product's position among the region's inputs
}

// gemmType reports whether products of dt run as GemmKernels (within
// their row limits).
func gemmType(dt ir.DType) bool {
	return dt == ir.Float32 || dt == ir.BFloat16 || dt == ir.Float16
}

// findEpilogues pairs each matrix-product step with the fused region that
// can be its epilogue.
func (p *inductorProgram) findEpilogues() {
	uses, outputs := p.g.Users(), p.g.IsOutput()
	for i := range p.steps {
		s := &p.steps[i]
		mm := s.r.Root
		if s.group != nil || s.row != nil || mm.Op != ir.OpMatMul || !gemmType(mm.DType) || outputs[mm] {
			continue
		}
		for j := i + 1; j < len(p.steps); j++ {
			t := &p.steps[j]
			if t.group == nil && t.row == nil && t.r.Fused() && p.readsNode(t.r, mm) {
				// A single pointwise op (an activation alone) can be an
				// epilogue too: it runs as a generated kernel.
				p.kernelStep(t)
			}
			if t.group == nil || len(t.r.Members()) != 1 {
				continue
			}
			product, ok := -1, true
			for k, in := range t.group.inputs {
				switch {
				case in.Node == mm && (product >= 0 || in.Views != nil):
					ok = false
				case in.Node == mm:
					product = k
				case p.index[in.Node] > p.index[mm]:
					ok = false // computed after the product
				}
			}
			if !ok || product < 0 {
				continue
			}
			inRegion := map[*ir.Node]bool{}
			for _, n := range t.r.Nodes {
				inRegion[n] = true
			}
			for _, u := range uses[mm] {
				ok = ok && inRegion[u]
			}
			if ok {
				s.epilogue = &gemmEpilogue{step: j, product: product}
			}
			break
		}
	}
}

// gemmPrologue is a row region whose only use is the product right
// after it, as its first operand (a norm ahead of a Linear layer): on a
// GPU the product's kernel may compute it itself (inductor.GemmKernel's
// Prologue), and the row step then runs only where it cannot.
type gemmPrologue struct {
	step   int                 // the row region's step, the one before the product's
	kernel *inductor.RowKernel // the region's kernel (each call lays out a copy, ForLayout)
}

// productPrologues is false with GOCOMPILE_GEMM_PROLOGUE=off: row steps
// run as kernels of their own, to measure what folding them gains.
var productPrologues = os.Getenv("GOCOMPILE_GEMM_PROLOGUE") != "off"

// findPrologues pairs each matrix-product step with the row step right
// before it that computes its first operand and nothing else: a row over
// the last dim with a value per element, read by the product alone.
func (p *inductorProgram) findPrologues() {
	if !productPrologues {
		return
	}
	uses, outputs := p.g.Users(), p.g.IsOutput()
	for i := 1; i < len(p.steps); i++ {
		s, t := &p.steps[i], &p.steps[i-1]
		mm := s.r.Root
		if s.group != nil || s.row != nil || mm.Op != ir.OpMatMul || !gemmType(mm.DType) || t.row == nil {
			continue
		}
		r := t.r
		if r.Row.Dims != nil || r.Expr == nil || len(r.Members()) != 1 || outputs[r.Root] || mm.Args[0] != ir.Value(r.Root) {
			continue
		}
		if u := uses[r.Root]; len(u) != 1 || u[0] != mm {
			continue
		}
		s.prologue = &gemmPrologue{step: i - 1, kernel: &t.row.kernel}
		t.deferred = true
	}
}

// findDependentProducts marks the product steps that may launch as
// dependents of the kernel ahead (inductorStep.dependent): a generated
// kernel or product runs before them, and their second operand is an
// input or a constant seen through views. Those are written, if at all,
// only in place after every read of the version before the write (whose
// writer waits for the reads to end), so the loads a GEMM kernel issues
// before griddepcontrol.wait read what they should; readyA marks those
// whose first operand is an input or constant too. Each call checks that
// the operands still are their inputs' storage (inductorStep.early).
func (p *inductorProgram) findDependentProducts() {
	kernelBefore := false
	for i := range p.steps {
		s := &p.steps[i]
		s.aBase, s.bBase = -1, -1
		root := s.r.Root
		if s.group == nil && s.row == nil && root.Op == ir.OpMatMul && kernelBefore {
			if b := inputBase(root.Args[1]); b != nil {
				s.dependent, s.bBase = true, p.index[b]
				if a := inputBase(root.Args[0]); a != nil && s.prologue == nil {
					s.readyA, s.aBase = true, p.index[a]
				}
			}
		}
		// A row step a product may compute itself is no kernel before.
		kernelBefore = kernelBefore || s.group != nil || s.row != nil && !s.deferred || root.Op == ir.OpMatMul
	}
}

// earlyLoads is what a product's kernel may read before
// griddepcontrol.wait, launched as a dependent of the kernel ahead.
type earlyLoads struct {
	dependent bool // B, the weight: the kernel launches as a dependent
	a         bool // A too: it waits only before its stores
}

// early is what s's kernel may read early in this call, x and y being
// its operands: the plan's choice where they are still their inputs'
// storage. A view may resolve to a copy at run time (a Reshape of a
// strided argument), into a buffer the copy kernel writes while this one
// would already be reading it.
func (s *inductorStep) early(vals []*array.Array, x, y *array.Array) earlyLoads {
	shares := func(t *array.Array, base int) bool {
		return t != nil && base >= 0 && vals[base] != nil && t.SharesStorage(vals[base])
	}
	e := earlyLoads{dependent: s.dependent && shares(y, s.bBase)}
	e.a = e.dependent && s.readyA && shares(x, s.aBase)
	return e
}

// inputBase is the input or constant a is seen through views of, or nil:
// storage no kernel of the program writes except in place, after its
// readers.
func inputBase(a any) *ir.Node {
	n, _ := a.(*ir.Node)
	for n != nil && n.Kind == ir.CallNode && n.Op.View != nil {
		n, _ = n.Args[0].(*ir.Node)
	}
	if n != nil && (n.Kind == ir.InputNode || n.Kind == ir.ConstNode) {
		return n
	}
	return nil
}

// readsNode reports whether region r reads node n.
func (p *inductorProgram) readsNode(r *fuse.Region, n *ir.Node) bool {
	for _, in := range r.Inputs {
		if in.Node == n {
			return true
		}
	}
	return false
}

// runMatMul runs a matrix-product step: on a GPU as a GemmKernel with the
// step's epilogue when it applies (storing the epilogue's value for its
// region, which then has nothing to do), else as a cuBLASLt product when
// that applies (gpuLtGemm), else with the eager kernel (cuBLAS).
func (p *inductorProgram) runMatMul(s *inductorStep, vals []*array.Array, a *array.Arena, q *array.LaunchQueue) {
	n := s.r.Root
	if pro := s.prologue; pro != nil && vals[p.steps[pro.step].roots[0]] == nil {
		if p.runWithPrologue(s, vals, q) {
			return
		}
		// The product's kernel cannot compute its operand: the row step
		// runs now, into a tensor of its own (its planned buffer may hold
		// values computed since).
		t := &p.steps[pro.step]
		vals[t.roots[0]] = t.row.run(t.argsIn(vals), nil, q)
	}
	args := array.NodeArgs(n, vals, p.index)
	x, y := args[0].(*array.Array), args[1].(*array.Array)
	if x.Device() != array.CPU {
		if t, ins, dst := p.epilogueOf(s, vals, x.Device()); t != nil {
			e := s.epilogue
			if r := gpuGemm(p.cfg, s.tuned, s.early(vals, x, y), q, x, y, nil, t, e.product, ins, dst); r != nil {
				vals[t.roots[0]] = r
				return
			}
			if r := gpuLtGemm(p.cfg, q, x, y, t, e.product, ins, dst); r != nil {
				vals[t.roots[0]] = r
				return
			}
		}
		if r := gpuGemm(p.cfg, s.tuned, s.early(vals, x, y), q, x, y, nil, nil, 0, nil, nil); r != nil {
			vals[s.roots[0]] = r
			return
		}
		if r := gpuLtGemm(p.cfg, q, x, y, nil, 0, nil, nil); r != nil {
			vals[s.roots[0]] = r
			return
		}
	}
	q.Drain() // the eager kernel launches now
	vals[s.roots[0]] = array.RunNode(n, n.Attrs, args)
}

// epilogueOf gives product step s's epilogue step, if it has one, with
// its inputs (the product's nil) and where its value goes on dev. The
// value is computed at the product's step, not at its own: the buffer
// plan may give its slot to values still live here (the product's inputs
// among them), so it gets a tensor of its own.
func (p *inductorProgram) epilogueOf(s *inductorStep, vals []*array.Array, dev ir.Device) (*inductorStep, []*array.Array, func([]int) *array.Array) {
	e := s.epilogue
	if e == nil {
		return nil, nil, nil
	}
	t := &p.steps[e.step]
	ins := t.argsIn(vals)
	ins[e.product] = nil // the product's kernel gives it
	dst := func(shape []int) *array.Array { return array.New(dev, t.r.Root.DType, shape) }
	return t, viewInputs(t.group.inputs, ins), dst
}

// runWithPrologue runs product step s with its kernel computing its
// first operand from the prologue's inputs (and applying its epilogue,
// if any), and reports whether it could: on a GPU, the warp kernel with
// whole vectors, inputs read along the row contiguously or once a row.
func (p *inductorProgram) runWithPrologue(s *inductorStep, vals []*array.Array, q *array.LaunchQueue) bool {
	pro := s.prologue
	t := &p.steps[pro.step]
	ins := t.argsIn(vals)
	if len(ins) == 0 || ins[0].Device() == array.CPU {
		return false
	}
	full, _ := broadcastArgs(t.r.Root.Op, ins)
	if len(full) == 0 {
		return false
	}
	rows := ir.Numel(full[:len(full)-1])
	outer, inner := rowLayout(ins, full)
	a := &aPrologue{shape: full, ins: ins, kernel: pro.kernel.ForLayout()}
	for j := range ins {
		switch inner[j] {
		case 1:
			a.kernel.Inputs[j].Access = inductor.RowContig
		case 0:
			a.kernel.Inputs[j].Access = inductor.RowUniform
		default:
			return false
		}
		st, ok := ir.ViewStrides(full[:len(full)-1], outer[j], []int{rows})
		if !ok {
			return false
		}
		a.rowStrides = append(a.rowStrides, int64(st[0]))
	}
	// Rows read along in whole vectors: each starts at one.
	pv := inductor.PrologueVector(&a.kernel)
	for j, in := range ins {
		if a.kernel.Inputs[j].Access == inductor.RowContig &&
			(in.DevicePtr()%cuda.DevicePtr(pv*in.DType().Size()) != 0 || rows > 1 && a.rowStrides[j]%int64(pv) != 0) {
			return false
		}
	}
	y := vals[p.index[s.r.Root.Args[1].(*ir.Node)]]
	// The value the kernel stores: the epilogue's, if the product has one.
	u, eins, dst := p.epilogueOf(s, vals, ins[0].Device())
	root, product := s.roots[0], 0
	if u != nil {
		root, product = u.roots[0], s.epilogue.product
	}
	r := gpuGemm(p.cfg, s.tuned, s.early(vals, nil, y), q, nil, y, a, u, product, eins, dst)
	if r == nil {
		return false
	}
	vals[root] = r
	return true
}

// aPrologue is the first operand of a product computed by its kernel: a
// row region of the given full shape over inputs ins, each read through
// its row stride.
type aPrologue struct {
	shape      []int
	ins        []*array.Array
	rowStrides []int64
	kernel     inductor.RowKernel
}

// gpuGemm computes x·y (followed by epilogue step t, whose operand product
// is the product, the others ins) with a GemmKernel into a tensor of
// dst's (or a new one), or returns nil when the kernel does not apply:
// types other than float32, bfloat16 and float16 (x's and y's the same),
// more than inductor.GemmMaxM rows (inductor.Gemm16MaxM for 16-bit
// types), y not read with unit stride along k, or epilogue operands not
// indexable as [row, column]. With early.dependent, a kernel that loads
// weights ahead of its wait (GemmKernel.PrefetchLoads) launches as a
// dependent of the kernel ahead, reading A ahead of it too with early.a
// (findDependentProducts says when each is safe). With
// pro, x is nil: the kernel computes it (runWithPrologue), or gpuGemm
// returns nil having launched nothing.
func gpuGemm(bc Config, tunedAt *sync.Map, early earlyLoads, q *array.LaunchQueue, x, y *array.Array, pro *aPrologue, t *inductorStep, product int, ins []*array.Array, dst func(shape []int) *array.Array) *array.Array {
	// A's type, shape, strides, device and address, and the arrays an
	// error names.
	var (
		in               ir.DType
		xShape, xStrides []int
		xDev             ir.Device
		xPtr             cuda.DevicePtr
		named            = []*array.Array{x, y}
	)
	if pro != nil {
		in, xShape, xStrides, xDev = pro.kernel.Out, pro.shape, ir.ContiguousStrides(pro.shape), pro.ins[0].Device()
		named = append(slices.Clone(pro.ins), y)
	} else {
		in, xShape, xStrides, xDev, xPtr = x.DType(), x.Shape(), x.Strides(), x.Device(), x.DevicePtr()
	}
	maxM := inductor.GemmMaxM
	switch {
	case in != y.DType() || len(y.Shape()) != 2 || len(xShape) == 0 || xDev != y.Device():
		return nil
	case in == ir.BFloat16 || in == ir.Float16:
		maxM = inductor.Gemm16MaxM
	case in != ir.Float32:
		return nil
	}
	k, n := y.Shape()[0], y.Shape()[1]
	if xShape[len(xShape)-1] != k {
		return nil
	}
	m := ir.Numel(xShape[:len(xShape)-1])
	if m < 1 || m > maxM || k < 1 || n < 1 {
		return nil
	}
	xst, ok := ir.ViewStrides(xShape, xStrides, []int{m, k})
	if !ok || (xst[1] != 1 && k > 1) {
		return nil
	}
	lda, ldb := int64(xst[0]), int64(y.Strides()[1])
	if y.Strides()[0] != 1 && k > 1 {
		return nil
	}
	if m == 1 {
		lda = int64(k)
	}
	if n == 1 {
		ldb = int64(k)
	}
	shape := append(append([]int(nil), xShape[:len(xShape)-1]...), n)
	kern := inductor.GemmKernel{Out: in, In: in}
	var ops [][2]int64 // each epilogue operand's row and column stride
	if t != nil {
		g := t.group
		kern.Epilogue, kern.Product = g.kernel.Expr, product
		kern.Compute, kern.Out, kern.Label, kern.Doc = g.kernel.Compute, g.kernel.Out, g.kernel.Label, t.r.Describe()
		for j, in := range ins {
			if j == product {
				kern.Operands = append(kern.Operands, inductor.Operand{DType: ir.Float32, Kind: g.kinds[j]})
				ops = append(ops, [2]int64{})
				continue
			}
			if in.Device() != xDev {
				return nil
			}
			if b, err := ir.Broadcast("", shape, in.Shape()); err != nil || !slices.Equal(b, shape) {
				return nil // the epilogue's value is larger than the product
			}
			st, ok := ir.ViewStrides(shape, ir.BroadcastStrides(in.Shape(), in.Strides(), shape), []int{m, n})
			if !ok {
				return nil
			}
			kern.Operands = append(kern.Operands, inductor.Operand{DType: in.DType(), Kind: g.kinds[j]})
			ops = append(ops, [2]int64{int64(st[0]), int64(st[1])})
		}
	}
	g := array.MustGPU("MatMul", xDev)
	ve := 16 / in.Size() // elements a 16-byte load reads
	vec := k%ve == 0 && lda%int64(ve) == 0 && ldb%int64(ve) == 0 && xPtr%16 == 0 && y.DevicePtr()%16 == 0
	if pro != nil {
		kern.Prologue = &pro.kernel
	}
	kern.ReadyA = early.a && pro == nil
	var out *array.Array
	// launch launches the kernel with launch shape cfg, or queues the
	// launch on q.
	launch := func(cfg inductor.GemmConfig, q *array.LaunchQueue, dependent bool) error {
		kern := kern
		kern.Config = cfg
		args := q.Args(g)
		defer q.Release(g, args)
		args.Ptr(xPtr).I64(lda).Ptr(y.DevicePtr()).I64(ldb).I32(int32(m)).I32(int32(n)).I32(int32(k))
		if vec {
			args.I32(1)
		} else {
			args.I32(0)
		}
		args.Ptr(out.DevicePtr()).I64(int64(n))
		if cfg.Split > 0 {
			var ws, ctr cuda.DevicePtr // unused (nil) unless split blocks add through memory
			if partials, counters := cfg.Workspace(m, n); partials > 0 {
				ws, ctr = g.SplitWorkspace("MatMul", partials, counters)
			}
			args.Ptr(ws).Ptr(ctr)
		}
		uses := append([]*array.Array{y, out}, named[:len(named)-1]...)
		for j, in := range ins {
			if j != product {
				args.Ptr(in.DevicePtr()).I64(ops[j][0]).I64(ops[j][1])
				uses = append(uses, in)
			}
		}
		if pro != nil {
			for j, in := range pro.ins {
				args.Ptr(in.DevicePtr()).I64(pro.rowStrides[j])
			}
		}
		gx, gy, gz := cfg.Grid(m, n)
		var err error
		array.KernelOrQueue(q, g, bc.Artifacts, kern.Name(), kern.Source, func(fn *cuda.Function) {
			grid, block := cuda.Dim3{X: uint32(gx), Y: uint32(gy), Z: uint32(gz)}, cuda.Dim3{X: uint32(cfg.Threads()), Y: 1, Z: 1}
			// Only kernels that load weights ahead of griddepcontrol.wait
			// gain from a dependent launch (the tiled one does not wait at
			// all); a concurrent test saw wrong products when plain
			// launches from several goroutines went as dependents, which
			// LaunchMaybeDependent allows only in a capture.
			err = g.LaunchMaybeDependent(fn, grid, block, kern.PrologueBytes(k), args, dependent && kern.PrefetchLoads() > 0)
			if q != nil {
				array.Check(err, "MatMul", named...)
			}
		}, uses...)
		return err
	}
	arch := g.Dev().Major*10 + g.Dev().Minor
	choose := bc.GemmConfig
	if choose == nil {
		choose = inductor.ChooseGemmConfig
		if in != ir.Float32 {
			choose = inductor.ChooseGemm16Config
		}
	}
	cfg := choose(m, n, k, g.Dev().SMCount, arch, vec)
	// A test's choice that cannot compute this product.
	if in != ir.Float32 && (!cfg.Takes(in) || !cfg.Fits(k, vec)) {
		cfg = inductor.ChooseGemm16Config(m, n, k, g.Dev().SMCount, arch, vec)
	} else if !cfg.Fits(k, vec) {
		cfg = inductor.ChooseGemmConfig(m, n, k, g.Dev().SMCount, arch, vec)
	}
	if cfg.Tensor && cfg.MT == 8 && m > 8 {
		cfg.MT = 0 // the 8-row form computes rows 0 to 7 only
	}
	type shapeKey struct {
		device, m, n, k int
		vec             bool
		in              ir.DType
	}
	sk := shapeKey{g.Dev().Ordinal, m, n, k, vec, in}
	v, tuned := tunedAt.Load(sk)
	if tuned {
		cfg = v.(inductor.GemmConfig)
	}
	if pro != nil && !inductor.PrologueFits(&pro.kernel, cfg, in, k, vec) {
		return nil // before anything is allocated or launched
	}
	if dst != nil {
		out = dst(shape)
	} else {
		out = array.New(xDev, kern.Out, shape)
	}
	if !tuned && pro == nil && bc.Autotune && !g.Stream().CapturingHere() {
		q.Drain() // the search launches now
		cands := slices.DeleteFunc(inductor.GemmCandidates(m, arch), func(c inductor.GemmConfig) bool { return !c.Fits(k, vec) || !c.Takes(in) })
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = c.String()
		}
		kern.Config = inductor.GemmConfig{}
		key := fmt.Sprintf("%s m%d n%d k%d vec%v", kern.Name(), m, n, k, vec) // the name says in
		best := array.Autotune(bc.Artifacts, g, "gemm", key, names, slices.Index(names, cfg.String()),
			func(i int) { c := kern; c.Config = cands[i]; g.KernelIn(bc.Artifacts, c.Name(), c.Source) },
			func(i int) error { return launch(cands[i], nil, false) })
		cfg = cands[best]
		tunedAt.Store(sk, cfg)
	}
	array.Check(launch(cfg, q, early.dependent), "MatMul", named...)
	if pro != nil {
		stats.ProductPrologues.Add(1)
	}
	return out
}
