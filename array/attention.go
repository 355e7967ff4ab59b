package array

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// attentionKernel is ir.OpAttention: on a GPU the split-key kernels of
// inductor.AttentionKernel for few queries, inductor.TiledAttentionKernel
// for many; on the CPU a row at a time (cpuAttention); elsewhere (GPUs
// without tensor-core MMAs where the split kernel does not fit) its
// meaning, op.Math, op by op.
func attentionKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	q, k, v := args[0].(*Array), args[1].(*Array), args[2].(*Array)
	var mask *Array
	ts := []*Array{q, k, v}
	if m, ok := args[3].(*Array); ok && m != nil {
		mask = m
		ts = append(ts, m)
	}
	shape, _, out := externTypes(op, &a, ts)
	if q.st.dev == CPU && ir.Numel(shape) > 0 {
		return cpuAttention(a, q, k, v, mask, out, shape)
	}
	if q.st.dev == CPU || ir.Numel(shape) == 0 || !attentionOnGPU(q, k, v) {
		var mv ir.Value
		if mask != nil {
			mv = mask
		}
		res, err := op.Math(eager{}, a, q, k, v, mv)
		Check(err, op.Title, ts...)
		return res.(*Array)
	}
	res := newGPUArray(q.st.dev, out, shape)
	gpuAttention(op.Title, a, q, k, v, mask, res)
	return res
}

// attentionOnGPU reports whether q's GPU has a kernel for attention of q,
// k and v (as ir.AttentionFits accepts them): the split-key kernel where
// it fits, else the tiled one on devices with tensor-core MMAs (sm_80).
func attentionOnGPU(q, k, v *Array) bool {
	qs, _ := attentionDims(q)
	ks, _ := attentionDims(k)
	vs, _ := attentionDims(v)
	return ir.AttentionSplitFits(qs[1]/ks[1], qs[2], qs[3], vs[3]) ||
		q.st.gpu.g.dev.Major >= 8 && ir.AttentionTiledFits(q.dtype, qs[3], vs[3])
}

// attentionDims are t's shape and strides as rank 4: rank 3 is rank 4
// with one batch entry.
func attentionDims(t *Array) (shape, strides []int) {
	if len(t.shape) == 3 {
		return append([]int{1}, t.shape...), append([]int{0}, t.strides...)
	}
	return t.shape, t.strides
}

// attentionLayout is attention's operands as rank 4: the sizes, the
// strides of q, k and v, the scale, causality, and the mask's strides over
// the scores [B, Hq, L, S] (nil without a mask).
type attentionLayout struct {
	B, Hq, Hkv, G, L, S, E, Ev int
	qst, kst, vst, mst         []int
	scale                      float64
	causal                     bool
}

func newAttentionLayout(a ir.Attrs, q, k, v, mask *Array) attentionLayout {
	qs, qst := attentionDims(q)
	ks, kst := attentionDims(k)
	vs, vst := attentionDims(v)
	l := attentionLayout{B: qs[0], Hq: qs[1], L: qs[2], E: qs[3], Hkv: ks[1], S: ks[2], Ev: vs[3], qst: qst, kst: kst, vst: vst}
	l.G = l.Hq / l.Hkv
	l.scale = 1 / math.Sqrt(float64(l.E))
	if len(a.Scalars) > 0 && a.Scalars[0] != 0 {
		l.scale = a.Scalars[0]
	}
	l.causal = len(a.Scalars) > 1 && a.Scalars[1] != 0
	if mask != nil {
		scores := []int{l.B, l.Hq, l.L, l.S}
		st := ir.BroadcastStrides(mask.shape, mask.strides, scores[4-len(q.shape):])
		l.mst = append(make([]int, 4-len(st)), st...)
	}
	return l
}

// gpuAttention runs inductor.AttentionKernel or, for more queries than it
// takes, inductor.TiledAttentionKernel for q, k, v (rank 3 or 4, as
// ir.AttentionFits accepts them) and the optional bool mask into the
// contiguous res.
func gpuAttention(op string, a ir.Attrs, q, k, v, mask, res *Array) {
	g := res.st.gpu.g
	l := newAttentionLayout(a, q, k, v, mask)
	qst, kst, vst := l.qst, l.kst, l.vst
	B, Hkv, G, L, S, E, Ev, causal := l.B, l.Hkv, l.G, l.L, l.S, l.E, l.Ev, l.causal
	scale := float32(l.scale)
	var mst [4]int64
	var mp cuda.DevicePtr
	if mask != nil {
		for i := range 4 {
			mst[i] = int64(l.mst[i])
		}
		mp = mask.DevicePtr()
	}
	if !ir.AttentionSplitFits(G, L, E, Ev) {
		tiledAttention(op, g, q, k, v, res, qst, kst, vst, mst, mp, B, Hkv, G, L, S, scale, causal)
		return
	}
	splits, per := inductor.ChooseAttentionSplits(S, B*Hkv, g.dev.SMCount, attentionSplitKeys)
	kern := &inductor.AttentionKernel{Elem: q.dtype, Rows: G * L, E: E, Ev: Ev, Mask: mask != nil, Causal: causal,
		MMA: g.dev.Major >= 8 && inductor.AttentionMMAFits(q.dtype, G*L, E, Ev)}
	name := kern.Name()
	f := g.kernel(name, func() (string, error) { return kern.Source(), nil })
	ws := newGPUArray(res.st.dev, ir.Float32, []int{B * Hkv * G * L * splits * (2 + Ev)})
	_, counters := g.SplitWorkspace(op, 0, B*Hkv)

	// Vector loads: 16 bytes of a key row, two elements of a value row (the
	// tensor-core kernel: 16-byte aligned value rows).
	size := int64(q.dtype.Size())
	aligned := func(ptr cuda.DevicePtr, bytes int64, strides ...int) bool {
		if uint64(ptr)%uint64(bytes) != 0 {
			return false
		}
		for _, s := range strides {
			if int64(s)*size%bytes != 0 {
				return false
			}
		}
		return true
	}
	vecK := kst[3] == 1 && E%inductor.AttentionVector(q.dtype) == 0 && aligned(k.DevicePtr(), 16, kst[0], kst[1], kst[2])
	var vecV bool
	if kern.MMA {
		// The tensor-core kernel reads pieces of Ev/8 features a lane.
		vecV = vst[3] == 1 && Ev%16 == 0 && aligned(v.DevicePtr(), 16, vst[0], vst[1], vst[2])
	} else {
		vecV = vst[3] == 1 && Ev%2 == 0 && aligned(v.DevicePtr(), 2*size, vst[0], vst[1], vst[2])
	}
	flag := func(b bool) int32 {
		if b {
			return 1
		}
		return 0
	}

	args := g.GetArgs()
	defer g.PutArgs(args)
	args.Ptr(q.DevicePtr()).Ptr(k.DevicePtr()).Ptr(v.DevicePtr()).Ptr(mp)
	for _, st := range [][]int{qst, kst, vst} {
		for _, s := range st {
			args.I64(int64(s))
		}
	}
	for _, s := range mst {
		args.I64(s)
	}
	args.I32(int32(Hkv)).I32(int32(G)).I32(int32(L)).I32(int32(S)).I32(int32(per)).F32(scale).I32(flag(vecK)).I32(flag(vecV))
	args.Ptr(ws.DevicePtr()).Ptr(counters).Ptr(res.DevicePtr())
	err := g.LaunchSmall(f, cuda.Dim3{X: uint32(splits), Y: uint32(B * Hkv), Z: 1},
		cuda.Dim3{X: uint32(kern.Warps()) * 32, Y: 1, Z: 1}, 0, args, res.Numel())
	if err != nil {
		panic(fmt.Sprintf("array: %s: launch: %v", op, err))
	}
}

// attentionSplitKeys is the fewest keys a split of the few-query
// attention kernel takes; GOCOMPILE_ATTN_SPLIT_KEYS sets it, to measure
// other splits.
var attentionSplitKeys = func() int {
	if n, err := strconv.Atoi(os.Getenv("GOCOMPILE_ATTN_SPLIT_KEYS")); err == nil && n >= 32 {
		return n
	}
	return 128
}()

// tiledAttention runs inductor.TiledAttentionKernel: gpuAttention's
// operands, strides and shapes, for more queries than the split kernel
// takes.
func tiledAttention(op string, g *GPU, q, k, v, res *Array, qst, kst, vst []int, mst [4]int64, mp cuda.DevicePtr,
	B, Hkv, G, L, S int, scale float32, causal bool) {
	E, Ev := q.shape[len(q.shape)-1], v.shape[len(v.shape)-1]
	kern := &inductor.TiledAttentionKernel{Elem: q.dtype, E: E, Ev: Ev, Mask: mp != 0, Causal: causal}
	f := g.kernel(kern.Name(), func() (string, error) { return kern.Source(), nil })
	// Rows staged 16 bytes at a time where they are contiguous and every
	// row starts 16-byte aligned.
	size := int64(q.dtype.Size())
	rows16 := func(t *Array, st []int) int32 {
		if st[3] != 1 || uint64(t.DevicePtr())%16 != 0 {
			return 0
		}
		for _, s := range st[:3] {
			if int64(s)*size%16 != 0 {
				return 0
			}
		}
		return 1
	}
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.Ptr(q.DevicePtr()).Ptr(k.DevicePtr()).Ptr(v.DevicePtr()).Ptr(mp)
	for _, st := range [][]int{qst, kst, vst} {
		for _, s := range st {
			args.I64(int64(s))
		}
	}
	for _, s := range mst {
		args.I64(s)
	}
	vecM := int32(0)
	if mp != 0 && mst[3] == 1 && uint64(mp)%16 == 0 && mst[0]%16 == 0 && mst[1]%16 == 0 && mst[2]%16 == 0 {
		vecM = 1
	}
	args.I32(int32(Hkv)).I32(int32(G)).I32(int32(L)).I32(int32(S)).F32(scale).I32(rows16(k, kst)).I32(rows16(v, vst)).I32(vecM)
	args.Ptr(res.DevicePtr())
	tiles := (G*L + inductor.TiledAttentionRows - 1) / inductor.TiledAttentionRows
	err := g.stream.Launch(f, cuda.Dim3{X: uint32(tiles), Y: uint32(B * Hkv), Z: 1},
		cuda.Dim3{X: inductor.TiledAttentionWarps * 32, Y: 1, Z: 1}, 0, args)
	if err != nil {
		panic(fmt.Sprintf("array: %s: launch: %v", op, err))
	}
}
