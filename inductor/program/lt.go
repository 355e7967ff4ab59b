package program

import (
	"fmt"
	"sync"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// Float32 products too tall for the generated GEMM can run through
// cuBLASLt: with the bias add of their epilogue fused into the library's
// kernel (CUBLASLT_EPILOGUE_BIAS, exact), and in MaxAutotune mode with the
// fastest of cuBLASLt's ranked algorithms for the shape, timed on the
// device. Other epilogues (activations) stay a fused kernel after the
// product: cuBLASLt's GELU is the tanh approximation, and its ReLU need
// not propagate NaN as max(x, 0) does.

// ltPlans holds each shape's cuBLASLt description, per device, and
// ltTuned the algorithm MaxAutotune chose for it.
var ltPlans, ltTuned sync.Map // ltKey → *cuda.LtGemm, int

type ltKey struct {
	device  int
	m, n, k int
	a, b    cuda.LtMatrix
	epi     cuda.LtEpilogue
}

// ltOperand describes a 2-D view with strides st as a cuBLASLt operand,
// if one of its dims has unit stride.
func ltOperand(rows, cols int, st []int) (cuda.LtMatrix, bool) {
	switch {
	case st[1] == 1 || cols == 1:
		ld := st[0]
		if rows == 1 {
			ld = max(ld, cols)
		}
		return cuda.LtMatrix{LD: ld}, ld >= max(cols, 1)
	case st[0] == 1 || rows == 1:
		ld := st[1]
		if cols == 1 {
			ld = max(ld, rows)
		}
		return cuda.LtMatrix{Trans: true, LD: ld}, ld >= max(rows, 1)
	}
	return cuda.LtMatrix{}, false
}

// biasOperand reports which operand of a fused epilogue e is a bias added
// to the product (operand product): e is product + bias or bias +
// product.
func biasOperand(e *ir.Expr, product int) (int, bool) {
	if e == nil || e.Prim != ir.PAdd || len(e.Args) != 2 {
		return 0, false
	}
	a, b := e.Args[0], e.Args[1]
	if a.Prim != ir.PArg || b.Prim != ir.PArg {
		return 0, false
	}
	switch {
	case a.Index == product && b.Index != product:
		return b.Index, true
	case b.Index == product && a.Index != product:
		return a.Index, true
	}
	return 0, false
}

// gpuLtGemm computes x·y (with epilogue step t's bias add, when t is not
// nil) through cuBLASLt into a tensor of dst's (or a new one), or returns
// nil when it does not apply: types other than float32, operands without
// a unit-stride dim, an epilogue other than a bias add of a float32
// vector, or, without an epilogue, any mode but MaxAutotune (the plain
// cuBLAS product is the default there).
func gpuLtGemm(bc Config, q *array.LaunchQueue, x, y *array.Array, t *inductorStep, product int, ins []*array.Array, dst func(shape []int) *array.Array) *array.Array {
	if x.DType() != ir.Float32 || y.DType() != ir.Float32 || len(y.Shape()) != 2 || len(x.Shape()) == 0 || x.Device() != y.Device() {
		return nil
	}
	if t == nil && !bc.Autotune {
		return nil
	}
	k, n := y.Shape()[0], y.Shape()[1]
	if x.Shape()[len(x.Shape())-1] != k || k < 1 || n < 1 {
		return nil
	}
	m := ir.Numel(x.Shape()[:len(x.Shape())-1])
	if m < 1 {
		return nil
	}
	xst, ok := ir.ViewStrides(x.Shape(), x.Strides(), []int{m, k})
	if !ok {
		return nil
	}
	a, okA := ltOperand(m, k, xst)
	b, okB := ltOperand(k, n, y.Strides())
	if !okA || !okB {
		return nil
	}
	shape := append(append([]int(nil), x.Shape()[:len(x.Shape())-1]...), n)
	epi, bias := cuda.LtNoEpilogue, cuda.DevicePtr(0)
	if t != nil {
		g := t.group
		j, ok := biasOperand(g.kernel.Expr, product)
		if !ok || g.kernel.Out != ir.Float32 || g.kernel.Compute != ir.F32 || g.kinds[product] != ir.F32 || g.kinds[j] != ir.F32 {
			return nil
		}
		in := ins[j]
		if in.DType() != ir.Float32 || in.Device() != x.Device() {
			return nil
		}
		st, ok := ir.ViewStrides(shape, ir.BroadcastStrides(in.Shape(), in.Strides(), shape), []int{m, n})
		if !ok || st[0] != 0 || (st[1] != 1 && n > 1) {
			return nil // not one float32 vector along the columns
		}
		epi, bias = cuda.LtBias, in.DevicePtr()
	}
	g := array.MustGPU("MatMul", x.Device())
	lt, err := g.Dev().BLASLt()
	if err != nil {
		return nil // no cuBLASLt: the cuBLAS product and the fused epilogue
	}
	key := ltKey{g.Dev().Ordinal, m, n, k, a, b, epi}
	v, ok := ltPlans.Load(key)
	if !ok {
		plan, err := lt.NewGemm(m, n, k, a, b, epi)
		if err != nil {
			return nil
		}
		v, _ = ltPlans.LoadOrStore(key, plan)
	}
	plan := v.(*cuda.LtGemm)
	count, err := plan.Algorithms(8)
	if err != nil {
		return nil
	}
	q.Drain() // cuBLASLt launches now
	var out *array.Array
	if dst != nil {
		out = dst(shape)
	} else {
		out = array.New(x.Device(), ir.Float32, shape)
	}
	algo := 0
	if v, ok := ltTuned.Load(key); ok && bc.Autotune {
		algo = v.(int)
	} else if bc.Autotune && !g.Stream().CapturingHere() && count > 1 {
		names := make([]string, count)
		for i := range names {
			names[i] = fmt.Sprintf("lt%d", i)
		}
		what := fmt.Sprintf("cublasLt %d m%d n%d k%d a%v b%v epilogue%d", lt.Version, m, n, k, a, b, epi)
		algo = array.Autotune(bc.Artifacts, g, "matmul", what, names, 0, func(int) {},
			func(i int) error { return plan.Run(g.Stream(), i, x.DevicePtr(), y.DevicePtr(), out.DevicePtr(), bias) })
		ltTuned.Store(key, algo)
	}
	array.Check(plan.Run(g.Stream(), algo, x.DevicePtr(), y.DevicePtr(), out.DevicePtr(), bias), "MatMul", x, y)
	stats.LtProducts.Add(1)
	return out
}
