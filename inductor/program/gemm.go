package program

import (
	"fmt"
	"slices"
	"sync"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/fuse"
	"gocompile/inductor"
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

// findDependentProducts marks the product steps that may launch as
// dependents of the kernel ahead (inductorStep.dependent): a generated
// kernel or product runs before them, and their second operand is an
// input or a constant seen through views, so the loads a GEMM kernel
// issues before griddepcontrol.wait read nothing a kernel of the program
// writes.
func (p *inductorProgram) findDependentProducts() {
	kernelBefore := false
	for i := range p.steps {
		s := &p.steps[i]
		root := s.r.Root
		if s.group == nil && s.row == nil && root.Op == ir.OpMatMul && kernelBefore {
			w, _ := root.Args[1].(*ir.Node)
			for w != nil && w.Kind == ir.CallNode && w.Op.View != nil {
				w, _ = w.Args[0].(*ir.Node)
			}
			s.dependent = w != nil && (w.Kind == ir.InputNode || w.Kind == ir.ConstNode)
		}
		kernelBefore = kernelBefore || s.group != nil || s.row != nil || root.Op == ir.OpMatMul
	}
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
	args := array.NodeArgs(n, vals, p.index)
	x, y := args[0].(*array.Array), args[1].(*array.Array)
	if x.Device() != array.CPU {
		if e := s.epilogue; e != nil {
			t := &p.steps[e.step]
			ins := make([]*array.Array, len(t.args))
			for j, ai := range t.args {
				if j != e.product {
					ins[j] = vals[ai]
				}
			}
			ins = viewInputs(t.group.inputs, ins)
			// The epilogue's value is computed now, at the product's step,
			// not at its own: the buffer plan may give its slot to values
			// still live here (the product's inputs among them), so it
			// gets a tensor of its own.
			dst := func(shape []int) *array.Array { return array.New(x.Device(), t.r.Root.DType, shape) }
			if r := gpuGemm(p.cfg, s.tuned, s.dependent, q, x, y, t, e.product, ins, dst); r != nil {
				vals[t.roots[0]] = r
				return
			}
			if r := gpuLtGemm(p.cfg, q, x, y, t, e.product, ins, dst); r != nil {
				vals[t.roots[0]] = r
				return
			}
		}
		if r := gpuGemm(p.cfg, s.tuned, s.dependent, q, x, y, nil, 0, nil, nil); r != nil {
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

// gpuGemm computes x·y (followed by epilogue step t, whose operand product
// is the product, the others ins) with a GemmKernel into a tensor of
// dst's (or a new one), or returns nil when the kernel does not apply:
// types other than float32, bfloat16 and float16 (x's and y's the same),
// more than inductor.GemmMaxM rows (inductor.Gemm16MaxM for 16-bit
// types), y not read with unit stride along k, or epilogue operands not
// indexable as [row, column]. With dependent, a kernel that loads weights
// ahead of its wait (GemmKernel.PrefetchLoads) launches as a dependent of
// the kernel ahead (findDependentProducts says when that is safe).
func gpuGemm(bc Config, tunedAt *sync.Map, dependent bool, q *array.LaunchQueue, x, y *array.Array, t *inductorStep, product int, ins []*array.Array, dst func(shape []int) *array.Array) *array.Array {
	in := x.DType()
	maxM := inductor.GemmMaxM
	switch {
	case in != y.DType() || len(y.Shape()) != 2 || len(x.Shape()) == 0 || x.Device() != y.Device():
		return nil
	case in == ir.BFloat16 || in == ir.Float16:
		maxM = inductor.Gemm16MaxM
	case in != ir.Float32:
		return nil
	}
	k, n := y.Shape()[0], y.Shape()[1]
	if x.Shape()[len(x.Shape())-1] != k {
		return nil
	}
	m := ir.Numel(x.Shape()[:len(x.Shape())-1])
	if m < 1 || m > maxM || k < 1 || n < 1 {
		return nil
	}
	xst, ok := ir.ViewStrides(x.Shape(), x.Strides(), []int{m, k})
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
	shape := append(append([]int(nil), x.Shape()[:len(x.Shape())-1]...), n)
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
			if in.Device() != x.Device() {
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
	g := array.MustGPU("MatMul", x.Device())
	var out *array.Array
	if dst != nil {
		out = dst(shape)
	} else {
		out = array.New(x.Device(), kern.Out, shape)
	}
	ve := 16 / in.Size() // elements a 16-byte load reads
	vec := k%ve == 0 && lda%int64(ve) == 0 && ldb%int64(ve) == 0 && x.DevicePtr()%16 == 0 && y.DevicePtr()%16 == 0
	// launch launches the kernel with launch shape cfg, or queues the
	// launch on q.
	launch := func(cfg inductor.GemmConfig, q *array.LaunchQueue, dependent bool) error {
		kern := kern
		kern.Config = cfg
		args := q.Args(g)
		defer q.Release(g, args)
		args.Ptr(x.DevicePtr()).I64(lda).Ptr(y.DevicePtr()).I64(ldb).I32(int32(m)).I32(int32(n)).I32(int32(k))
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
		uses := []*array.Array{x, y, out}
		for j, in := range ins {
			if j != product {
				args.Ptr(in.DevicePtr()).I64(ops[j][0]).I64(ops[j][1])
				uses = append(uses, in)
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
			err = g.LaunchMaybeDependent(fn, grid, block, 0, args, dependent && kern.PrefetchLoads() > 0)
			if q != nil {
				array.Check(err, "MatMul", x, y)
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
	if v, ok := tunedAt.Load(sk); ok {
		cfg = v.(inductor.GemmConfig)
	} else if bc.Autotune && !g.Stream().CapturingHere() {
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
	array.Check(launch(cfg, q, dependent), "MatMul", x, y)
	return out
}
