// Package inductor generates gocompile's GPU kernels as CUDA C for NVRTC.
//
// Kernels that store only bfloat16 or float16 values compute in float32
// with the hardware's exp and division (GC_FAST16): their errors, a few
// float32 ulps, lie far below a 16-bit ulp, and such kernels are as much
// compute as memory.
//
// It generates:
//
//   - PointwiseKernel: the single-op kernels eager ops on CUDA tensors run,
//     from the registry's expressions, and the kernels of fused pointwise
//     regions (Expr set) and horizontal groups (Extra outputs). Dense
//     kernels load several 128-bit vectors per thread; broadcast operands
//     are read by cheap row or column index arithmetic. Other layouts run
//     N-d kernels (a vector per thread along the innermost dim, indices
//     split by fast divisors in 32-bit arithmetic where it fits, a peeled
//     head for views misaligned alike) or, for an operand whose contiguous
//     dim is not the output's, tiled kernels that transpose through shared
//     memory: two dims, or two groups of short dims flattened (a permuted
//     run over [5, 91], an output whose innermost dim is 2) through per-tile
//     offset tables (layout.go). Tiles of 32 read the other operands into
//     registers before the staging barrier, so a tile takes one round trip
//     to memory.
//   - ComboKernel: dense or N-d fused kernels of different shapes
//     (package fuse's combos, a kernel per unit, with Extra outputs for a
//     unit's further members) as one launch, each member over a range of
//     blocks, as a multi-tensor kernel.
//   - RowKernel: a row region of package fuse (softmax, layer norm, RMS
//     norm, reductions with prologues) as one kernel with a block (or, for
//     rows of up to 256 vectors, a warp or part of one) per row: persistent
//     (the row in registers), stashed (the row in shared memory, or spread
//     over a thread block cluster's), looped, or, for few long rows, split
//     across blocks: a lone reduction in one pass and a final one, other
//     regions in a pass per reduction (staged), chosen from the shape and
//     the device (ChooseRowPlan, ChooseRowSplit, ChooseRowStage). Rows
//     read by vectors of up to 16 bytes (ChooseRowVector), also where their
//     length or offset is not a whole number of vectors: a Shifted kernel
//     starts each row's chunks where the row's first element lies past a
//     vector boundary, so only its first and last chunks are partial.
//   - ColKernel: a row region over any dims (a reduction over dim 0 or
//     middle dims, a softmax over a leading dim): adjacent threads take
//     adjacent outputs and read vectors of up to 16 bytes along them, or,
//     in the row form, a warp walks each output's range; a lone reduction
//     splits its range across blocks for few outputs (colrow.go). Each is
//     specialised on its ColShape: the ranks of its kept and reduced dims,
//     so its index loops unroll, and 32-bit indices with magic-number
//     division where the shape allows.
//   - GemmKernel: a matrix product of few rows (inference at small batch)
//     with the pointwise epilogue of the product (bias add, activation,
//     residual) applied before its only store: a warp kernel that holds
//     every row in one tile and streams the weight once, loading its first
//     vectors before griddepcontrol.wait so that, replayed from a CUDA
//     graph as a programmatic dependent, it overlaps the kernel ahead
//     (with ReadyA, A being an input or constant, the whole product does,
//     waiting only before its stores); a
//     tensor-core kernel; or a tiled kernel that splits k across blocks and
//     adds the partial sums in a fixed order (through a thread block
//     cluster's shared memory on sm_90). ChooseGemmConfig and
//     ChooseGemm16Config (bfloat16 and float16, m16n8k16 MMAs adding in
//     float32) pick the launch shape; GemmCandidates lists the ones an
//     autotuner times. The warp kernel may also compute A itself from a
//     row region (a norm), its Prologue, into shared memory
//     (gemm_prologue.go).
//   - AttentionKernel: attention of few queries against many keys (a
//     decode step against a KV cache) in one launch, split along the keys
//     with an online softmax per split (m16n8k16 MMAs for 16-bit operands)
//     and the splits merged in order by the last block to finish.
//   - ReduceKernel, IndexKernel and IndexCopyKernel: eager reductions,
//     gathers and index writes, which check indices on the device.
//
// The generated C is self-contained (no CUDA headers), names the ops and
// graph nodes each part comes from, and uses exactly the conversions and
// primitive semantics of the CPU kernels (the registry's C forms), so both
// devices agree. Package array compiles the sources through NVRTC and
// keeps them in the artifact cache of package kcache; eager ops run the
// single-op kernels, and package inductor/program runs the kernels of a
// compiled graph's regions.
package inductor
