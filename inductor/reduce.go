package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// ReduceKernel describes a single-op reduction kernel. A launch has one
// block per output element (grid.x) and, for long rows, several blocks per
// row (grid.y) that write partial accumulators; a second kernel (Final)
// then combines the partials. Values accumulate in Kind; max, min and the
// arg reductions carry the index of their value so that partial results
// merge to PyTorch's answer (the first index on ties, the first NaN wins).
type ReduceKernel struct {
	Reducer ir.Reducer
	In      ir.DType
	Kind    ir.Kind
	Out     ir.DType
}

// Name is the kernel's entry point; the final pass is Name()+"_final".
func (k *ReduceKernel) Name() string {
	return fmt.Sprintf("gc_%v_%v_%v_to_%v", k.Reducer, k.In, k.Kind, k.Out)
}

// AccBytes is the size of one partial accumulator.
func (k *ReduceKernel) AccBytes() int { return 16 }

// ReduceGeometry is the layout of a reduction's input: out index o and
// reduced index r address element offset(o over Outer) + offset(r over
// Inner). Passed by value as struct { long long orank, osize[8],
// ostride[8], rrank, rsize[8], rstride[8]; }.
type ReduceGeometry struct {
	OuterRank           int
	OuterSize, OuterStr [MaxRank]int64
	InnerRank           int
	InnerSize, InnerStr [MaxRank]int64
}

// Bytes encodes the geometry as the kernel parameter.
func (g *ReduceGeometry) Bytes() []byte {
	b := putInt64s(nil, int64(g.OuterRank))
	b = putInt64s(b, g.OuterSize[:]...)
	b = putInt64s(b, g.OuterStr[:]...)
	b = putInt64s(b, int64(g.InnerRank))
	b = putInt64s(b, g.InnerSize[:]...)
	return putInt64s(b, g.InnerStr[:]...)
}

// ReduceBlock is the number of threads per block of reduction kernels.
const ReduceBlock = 256

// Source generates both kernels. Parameters of Name(): long long nOut,
// long long nRed, long long chunk (reduced elements per block), const In*
// x, Out* out, Acc* partial (used when gridDim.y > 1), ReduceGeometry g.
// Parameters of the final pass: long long nOut, long long parts, long long
// nRed, const Acc* partial, Out* out (one block per output).
func (k *ReduceKernel) Source() string {
	return fmt.Sprintf("// gocompile eager kernel for reduction %q of %v, accumulating in %v\n",
		k.Reducer.String(), k.In, kindC(k.Kind)) + cudaPrelude + k.body()
}

func (k *ReduceKernel) body() string {
	K := kindC(k.Kind)
	var b strings.Builder
	fmt.Fprintf(&b, `
struct ReduceGeometry {
  long long orank; long long osize[%[1]d]; long long ostride[%[1]d];
  long long rrank; long long rsize[%[1]d]; long long rstride[%[1]d];
};
struct __align__(16) Acc { %[2]s v; long long i; };  // i: index of v, -1 when empty

`, MaxRank, K)

	b.WriteString(k.Reducer.CMerge()) // the reducer's merge, as package ir defines it
	fmt.Fprintf(&b, `
__device__ __forceinline__ Acc shfl_down(Acc a, int d) {
  Acc r; r.v = __shfl_down_sync(0xffffffffu, a.v, d); r.i = __shfl_down_sync(0xffffffffu, a.i, d); return r;
}

// block_reduce leaves the merge of every thread's accumulator in thread 0.
__device__ Acc block_reduce(Acc a) {
  __shared__ Acc warps[32];
  for (int d = 16; d > 0; d >>= 1) a = merge(a, shfl_down(a, d));
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) warps[w] = a;
  __syncthreads();
  if (w == 0) {
    Acc e; e.v = 0; e.i = -1;
    a = lane < (int)((blockDim.x + 31) >> 5) ? warps[lane] : e;
    for (int d = 16; d > 0; d >>= 1) a = merge(a, shfl_down(a, d));
  }
  return a;
}

`)
	// finish turns an accumulator into the stored result.
	result := "a.v"
	switch {
	case k.Reducer == ir.RMean:
		result = fmt.Sprintf("a.v / (%s)nRed", K)
	case k.Reducer.IsArg():
		result = "a.i"
	}
	resultKind := k.Kind
	if k.Reducer.IsArg() {
		resultKind = ir.I64
	}
	fmt.Fprintf(&b, "__device__ __forceinline__ %s finish(Acc a, long long nRed) { return %s; }\n\n", storageC(k.Out),
		storeC(result, resultKind, k.Out))

	fmt.Fprintf(&b, `extern "C" __global__ void __launch_bounds__(%[1]d) %[2]s(
    long long nOut, long long nRed, long long chunk, const %[3]s* __restrict__ x,
    %[4]s* __restrict__ out, Acc* __restrict__ partial, ReduceGeometry g) {
  long long o = blockIdx.x;
  long long base = 0, rem = o;
  for (int d = (int)g.orank - 1; d >= 0; d--) { base += (rem %% g.osize[d]) * g.ostride[d]; rem /= g.osize[d]; }
  long long r0 = (long long)blockIdx.y * chunk, r1 = min(nRed, r0 + chunk);
  Acc a; a.v = 0; a.i = -1;
  for (long long r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    long long off = base, q = r;
    if (g.rrank == 1) {
      off += q * g.rstride[0];
    } else {
      for (int d = (int)g.rrank - 1; d >= 0; d--) { off += (q %% g.rsize[d]) * g.rstride[d]; q /= g.rsize[d]; }
    }
    Acc e; e.v = %[5]s; e.i = r;
    a = merge(a, e);
  }
  a = block_reduce(a);
  if (threadIdx.x == 0) {
    if (gridDim.y == 1) out[o] = finish(a, nRed);
    else partial[o * gridDim.y + blockIdx.y] = a;
  }
}

extern "C" __global__ void __launch_bounds__(%[1]d) %[2]s_final(
    long long nOut, long long parts, long long nRed, const Acc* __restrict__ partial, %[4]s* __restrict__ out) {
  long long o = blockIdx.x;
  Acc a; a.v = 0; a.i = -1;
  for (long long p = threadIdx.x; p < parts; p += blockDim.x) a = merge(a, partial[o * parts + p]);
  a = block_reduce(a);
  if (threadIdx.x == 0) out[o] = finish(a, nRed);
}
`, ReduceBlock, k.Name(), storageC(k.In), storageC(k.Out), loadC("x[off]", k.In, k.Kind))
	return b.String()
}
