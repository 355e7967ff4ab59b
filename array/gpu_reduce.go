package array

import (
	"fmt"
	"sync"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// gpuReduce reduces x over the dims red (kept dims keep, in order) into
// res, accumulating in kind k.
func gpuReduce(r ir.Reducer, x *Array, k ir.Kind, keptShape, keptStrides, redShape, redStrides []int, res *Array) {
	nOut, nRed := res.Numel(), ir.Numel(redShape)
	if nOut == 0 {
		return
	}
	g := res.st.gpu.g
	oshape, ostr := Coalesce(keptShape, keptStrides)
	rshape, rstr := Coalesce(redShape, redStrides)
	if len(oshape) > inductor.MaxRank || len(rshape) > inductor.MaxRank {
		Throw(r.String(), []*Array{x}, "make the input contiguous first", "too many dims for a GPU reduction")
	}
	var geo inductor.ReduceGeometry
	geo.OuterRank, geo.InnerRank = len(oshape), len(rshape)
	for d, s := range oshape {
		geo.OuterSize[d], geo.OuterStr[d] = int64(s), int64(ostr[0][d])
	}
	for d, s := range rshape {
		geo.InnerSize[d], geo.InnerStr[d] = int64(s), int64(rstr[0][d])
	}
	kern := &inductor.ReduceKernel{Reducer: r, In: x.dtype, Kind: k, Out: res.dtype, Unroll: reduceUnroll}
	var src string
	gen := func() (string, error) {
		if src == "" {
			src = kern.Source()
		}
		return src, nil
	}
	fn := g.kernel(kern.Name(), gen)

	// Long rows with few outputs are split across blocks so every SM works:
	// reduceWaves times as many blocks as the device holds at once (one
	// wave: every block starts at once and none waits for a straggler),
	// each with at least reduceMinChunk elements. Chunks are whole vectors,
	// so that a contiguous row aligned at its start stays aligned in every
	// chunk.
	parts := 1
	if nOut < 2*g.dev.SMCount && nRed > 8*inductor.ReduceBlock {
		resident := reduceWaves * g.residentBlocks(fn, inductor.ReduceBlock) * g.dev.SMCount
		parts = max(1, min((nRed+reduceMinChunk-1)/reduceMinChunk, (resident+nOut-1)/nOut, 65535))
	}
	chunk := (nRed + parts - 1) / parts
	chunk = max(1, (chunk+inductor.VectorWidth-1)/inductor.VectorWidth) * inductor.VectorWidth
	parts = max(1, (nRed+chunk-1)/chunk)
	// Short rows are reduced a warp each, as are rows up to
	// reduceWarpRowsLong when there are enough of them to fill the device
	// four times over.
	warpRows := parts == 1 && (nRed <= reduceWarpRowsMax ||
		nRed <= reduceWarpRowsLong && nOut >= 4*inductor.WarpRowsPerBlock*g.dev.SMCount)
	var partial *Array
	if parts > 1 {
		partial = newGPUArray(res.st.dev, ir.Int64, []int{nOut * parts * kern.AccBytes() / 8})
	}
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.I64(int64(nOut)).I64(int64(nRed)).I64(int64(chunk)).Ptr(x.DevicePtr()).Ptr(res.DevicePtr())
	if partial != nil {
		args.Ptr(partial.DevicePtr())
	} else {
		args.Ptr(0)
	}
	grid := cuda.Dim3{X: uint32(nOut), Y: uint32(parts), Z: 1}
	if warpRows {
		args.I32(1)
		grid.X = uint32((nOut + inductor.WarpRowsPerBlock - 1) / inductor.WarpRowsPerBlock)
	} else {
		args.I32(0)
	}
	args.Bytes(geo.Bytes(), 8)
	err := g.stream.Launch(fn, grid, cuda.Dim3{X: inductor.ReduceBlock, Y: 1, Z: 1}, 0, args)
	if err != nil {
		panic(fmt.Sprintf("array: %v: launch: %v", r, err))
	}
	if parts > 1 {
		final := g.kernel(kern.Name()+"_final", gen)
		args.Reset().I64(int64(nOut)).I64(int64(parts)).I64(int64(nRed)).Ptr(partial.DevicePtr()).Ptr(res.DevicePtr())
		err := g.stream.Launch(final, cuda.Dim3{X: uint32(nOut), Y: 1, Z: 1}, cuda.Dim3{X: inductor.ReduceBlock, Y: 1, Z: 1}, 0, args)
		if err != nil {
			panic(fmt.Sprintf("array: %v: launch: %v", r, err))
		}
	}
}

// Launch shape of reductions, tuned on an H200 (see gpuReduce and
// TestGPUTuneLaunch).
var (
	reduceUnroll       = inductor.DefaultReduceUnroll
	reduceWaves        = 1
	reduceMinChunk     = 4096
	reduceWarpRowsMax  = 1024 // rows this short are reduced a warp each,
	reduceWarpRowsLong = 4096 // and rows this short when there are many
)

// residency caches residentBlocks per kernel.
var residency sync.Map // *cuda.Function -> int

// residentBlocks is how many blocks of fn, of block threads each, one SM
// runs at once, as its registers and the SM's threads allow (the kernels
// this serves use little shared memory).
func (g *GPU) residentBlocks(fn *cuda.Function, block int) int {
	if v, ok := residency.Load(fn); ok {
		return v.(int)
	}
	threads := 2048 // threads per SM, by compute capability
	switch d := g.dev; {
	case d.Major == 7 && d.Minor == 5:
		threads = 1024
	case d.Major == 8 && d.Minor > 0 && d.Minor != 7, d.Major >= 12:
		threads = 1536
	}
	n := threads / block
	if regs, _, _, err := fn.Attributes(); err == nil && regs > 0 {
		perWarp := (regs*32 + 255) / 256 * 256 // registers are allocated per warp, 256 at a time
		n = min(n, g.dev.MaxRegistersPerBlock/(perWarp*(block/32)))
	}
	n = max(n, 1)
	residency.Store(fn, n)
	return n
}
