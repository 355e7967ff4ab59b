// Package inductor generates and runs gocompile's kernels.
//
// It generates the CUDA kernels of fused pointwise regions (see package
// fuse; PointwiseKernel with Expr set) and the single-op kernels that eager
// ops on CUDA tensors run: pointwise kernels from the registry's expressions (dense
// kernels with vector loads, and strided kernels that index N-d views),
// reductions (a block per output row, split across blocks for long rows,
// accumulating in float32 for 16- and 32-bit floats), and gathers. The
// generated C is self-contained (no CUDA headers), names the op it came
// from, and uses exactly the conversions and primitive semantics of the
// CPU kernels, so both backends agree.
package inductor
