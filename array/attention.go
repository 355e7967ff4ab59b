package array

import (
	"fmt"
	"math"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// attentionKernel is ir.OpAttention: on a GPU the split-key kernels of
// inductor.AttentionKernel, elsewhere its meaning, op.Math, op by op.
func attentionKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	q, k, v := args[0].(*Array), args[1].(*Array), args[2].(*Array)
	var mask *Array
	ts := []*Array{q, k, v}
	if m, ok := args[3].(*Array); ok && m != nil {
		mask = m
		ts = append(ts, m)
	}
	shape, _, out := externTypes(op, &a, ts)
	if q.st.dev == CPU || ir.Numel(shape) == 0 {
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

// gpuAttention runs inductor.AttentionKernel for q, k, v (rank 3 or 4, as
// ir.AttentionFits accepts them) and the optional bool mask into the
// contiguous res.
func gpuAttention(op string, a ir.Attrs, q, k, v, mask, res *Array) {
	g := res.st.gpu.g
	// Rank 3 is rank 4 with one batch entry.
	four := func(t *Array) (shape, strides []int) {
		if len(t.shape) == 3 {
			return append([]int{1}, t.shape...), append([]int{0}, t.strides...)
		}
		return t.shape, t.strides
	}
	qs, qst := four(q)
	ks, kst := four(k)
	vs, vst := four(v)
	B, Hq, L, E := qs[0], qs[1], qs[2], qs[3]
	Hkv, S, Ev := ks[1], ks[2], vs[3]
	G := Hq / Hkv
	scale := float32(1 / math.Sqrt(float64(E)))
	if len(a.Scalars) > 0 && a.Scalars[0] != 0 {
		scale = float32(a.Scalars[0])
	}
	causal := len(a.Scalars) > 1 && a.Scalars[1] != 0
	var mst [4]int64
	var mp cuda.DevicePtr
	if mask != nil {
		scores := []int{B, Hq, L, S}
		st := ir.BroadcastStrides(mask.shape, mask.strides, scores[4-len(q.shape):])
		st = append(make([]int, 4-len(st)), st...)
		for i := range 4 {
			mst[i] = int64(st[i])
		}
		mp = mask.DevicePtr()
	}
	splits, per := inductor.ChooseAttentionSplits(S, B*Hkv, g.dev.SMCount)
	kern := &inductor.AttentionKernel{Elem: q.dtype, Rows: G * L, E: E, Ev: Ev, Mask: mask != nil, Causal: causal,
		MMA: g.dev.Major >= 8 && inductor.AttentionMMAFits(q.dtype, G*L, E, Ev)}
	name := kern.Name()
	f := g.kernel(name, func() (string, error) { return kern.Source(), nil })
	ws := newGPUArray(res.st.dev, ir.Float32, []int{B * Hkv * G * L * splits * (2 + Ev)})
	_, counters := g.SplitWorkspace(op, 0, B*Hkv)

	// Vector loads: 16 bytes of a key row, two elements of a value row.
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
	vecV := vst[3] == 1 && Ev%2 == 0 && aligned(v.DevicePtr(), 2*size, vst[0], vst[1], vst[2])
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
	err := g.stream.Launch(f, cuda.Dim3{X: uint32(splits), Y: uint32(B * Hkv), Z: 1},
		cuda.Dim3{X: inductor.AttentionWarps * 32, Y: 1, Z: 1}, 0, args)
	if err != nil {
		panic(fmt.Sprintf("array: %s: launch: %v", op, err))
	}
}
