package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// ScanKernel is an inclusive running sum (CumSum) along one dim: each
// line (the elements along the dim at one position of the other dims)
// is summed in order, in double for floating inputs and long long for
// integers and bools, and each result is rounded once to Out.
//
// Two entry points: Name()+"_block" runs a block of ScanThreads threads a
// line, each thread summing ScanPerThread consecutive elements of a tile
// before a block-wide scan of the threads' sums (Hillis and Steele,
// through shared memory) adds what the earlier threads and tiles hold;
// Name()+"_thread" runs a thread a line, in order, for many short lines.
// Both take: long long lines, long long L (the line's length), const In*
// x, Out* out, long long xs, long long os (the strides along the dim),
// Geometry g over the other dims (stride[0] x's, stride[1] out's).
type ScanKernel struct {
	In, Out ir.DType
}

// The block form's shape.
const (
	ScanThreads   = 256
	ScanPerThread = 4
)

// Name is the kernels' common prefix.
func (k *ScanKernel) Name() string { return fmt.Sprintf("gc_cumsum_%v_to_%v", k.In, k.Out) }

func (k *ScanKernel) acc() (string, ir.Kind) {
	if k.In.IsFloat() {
		return "double", ir.F64
	}
	return "long long", ir.I64
}

// Source generates both entry points.
func (k *ScanKernel) Source() string {
	acc, kind := k.acc()
	in, out := storageC(k.In), storageC(k.Out)
	load := loadC("x[xo + i * xs]", k.In, kind)
	store := func(v string) string { return storeC(v, kind, k.Out) }
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile eager kernel: %s (CumSum)\n%s", k.Name(), cudaPrelude)
	b.WriteString(lineGeometryC)
	fmt.Fprintf(&b, `// A thread a line, in order.
extern "C" __global__ void %[1]s_thread(long long lines, long long L, const %[2]s* __restrict__ x, %[3]s* __restrict__ out,
    long long xs, long long os, Geometry g) {
  for (long long l = (long long)blockIdx.x * blockDim.x + threadIdx.x; l < lines; l += (long long)gridDim.x * blockDim.x) {
    long long xo, oo;
    lineAt(l, g, xo, oo);
    %[4]s s = 0;
    for (long long i = 0; i < L; i++) {
      s += %[5]s;
      out[oo + i * os] = %[6]s;
    }
  }
}

// A block a line: tiles of %[7]d×%[8]d elements; each thread sums its %[8]d,
// the block scans the threads' sums, and carry holds the earlier tiles'.
extern "C" __global__ void __launch_bounds__(%[7]d) %[1]s_block(long long lines, long long L, const %[2]s* __restrict__ x,
    %[3]s* __restrict__ out, long long xs, long long os, Geometry g) {
  __shared__ %[4]s part[%[7]d];
  __shared__ %[4]s carry;
  const int tid = threadIdx.x;
  for (long long l = blockIdx.x; l < lines; l += gridDim.x) {
    long long xo, oo;
    lineAt(l, g, xo, oo);
    if (tid == 0) carry = 0;
    for (long long base = 0; base < L; base += %[7]d * %[8]d) {
      %[4]s v[%[8]d], s = 0;
      #pragma unroll
      for (int j = 0; j < %[8]d; j++) {
        const long long i = base + (long long)tid * %[8]d + j;
        if (i < L) s += %[5]s;
        v[j] = s;
      }
      part[tid] = s;
      __syncthreads();
      for (int off = 1; off < %[7]d; off <<= 1) {
        const %[4]s t = tid >= off ? part[tid - off] : (%[4]s)0;
        __syncthreads();
        part[tid] += t;
        __syncthreads();
      }
      const %[4]s before = carry + (tid > 0 ? part[tid - 1] : (%[4]s)0);
      #pragma unroll
      for (int j = 0; j < %[8]d; j++) {
        const long long i = base + (long long)tid * %[8]d + j;
        if (i < L) out[oo + i * os] = %[9]s;
      }
      __syncthreads(); // every thread has read carry and part
      if (tid == 0) carry += part[%[7]d - 1];
      __syncthreads();
    }
  }
}
`, k.Name(), in, out, acc, load, store("s"), ScanThreads, ScanPerThread, store("before + v[j]"))
	return b.String()
}

// lineGeometryC declares the geometry of kernels that take a line each
// (over the dims other than the line's: sizes, the input's strides in
// stride[0], the output's in stride[1]) and lineAt, a line's offsets.
var lineGeometryC = fmt.Sprintf(`struct Geometry { long long rank; long long size[%d]; long long stride[2][%d]; };

// lineAt is the storage offsets of line l of x (xo) and out (oo).
__device__ __forceinline__ void lineAt(long long l, const Geometry& g, long long& xo, long long& oo) {
  xo = 0; oo = 0;
  for (int d = (int)g.rank - 1; d >= 0; d--) {
    const long long c = l %% g.size[d];
    l /= g.size[d];
    xo += c * g.stride[0][d];
    oo += c * g.stride[1][d];
  }
}

`, MaxRank, MaxRank)
