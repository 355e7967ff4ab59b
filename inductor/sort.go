package inductor

import (
	"fmt"

	"gocompile/ir"
)

// SortKernel is ArgSort on a GPU: a block a line sorts the line's keys
// with their indices in shared memory (a bitonic network over the line
// padded to a power of two), comparing (key, index) pairs so that the
// order is stable. Keys are the values mapped to unsigned integers in
// their order (NaN above every number, -0 equal to 0), complemented for a
// descending sort. Lines longer than SortMax do not fit in a block's
// shared memory: the host sorts those. Parameters: long long lines, long
// long L, long long P (the padded length), const Elem* x, long long* out,
// long long xs, long long os (strides along the dim), int desc, Geometry
// g over the other dims (stride[0] x's, stride[1] out's).
type SortKernel struct {
	Elem ir.DType
}

// SortMax is the longest line SortKernel sorts; SortThreads its block.
const (
	SortMax     = 2048
	SortThreads = 256
)

// Name is the kernel's entry point.
func (k *SortKernel) Name() string { return fmt.Sprintf("gc_argsort_%v", k.Elem) }

// Source generates the kernel.
func (k *SortKernel) Source() string {
	key := "gc_sortkey_int((long long)(v))"
	load := "x[xo + i * xs]"
	if k.Elem.IsFloat() {
		key = "gc_sortkey_float(v)"
		load = loadC(load, k.Elem, ir.F64)
	}
	return fmt.Sprintf(`// gocompile eager kernel: %[1]s (ArgSort)
%[2]s%[3]s
// The order of values as unsigned integers: NaN above every number, -0
// and 0 equal.
__device__ __forceinline__ unsigned long long gc_sortkey_float(double v) {
  if (v != v) return 0xFFFFFFFFFFFFFFFFull;
  if (v == 0) v = 0;
  const unsigned long long b = (unsigned long long)__double_as_longlong(v);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ unsigned long long gc_sortkey_int(long long v) {
  return (unsigned long long)v ^ 0x8000000000000000ull;
}

extern "C" __global__ void __launch_bounds__(%[4]d) %[1]s(long long lines, long long L, long long P, const %[5]s* __restrict__ x,
    long long* __restrict__ out, long long xs, long long os, int desc, Geometry g) {
  __shared__ unsigned long long key[%[6]d];
  __shared__ int idx[%[6]d];
  const int tid = threadIdx.x;
  for (long long l = blockIdx.x; l < lines; l += gridDim.x) {
    long long xo, oo;
    lineAt(l, g, xo, oo);
    for (int i = tid; i < P; i += %[4]d) {
      if (i < L) {
        const auto v = %[7]s;
        const unsigned long long kv = %[8]s;
        key[i] = desc ? ~kv : kv;
      } else {
        key[i] = 0xFFFFFFFFFFFFFFFFull; // padding sorts last: its index is above every element's
      }
      idx[i] = i;
    }
    __syncthreads();
    for (int size = 2; size <= P; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int i = tid; i < P; i += %[4]d) {
          const int j = i ^ stride;
          if (j > i) {
            const bool up = (i & size) == 0;
            const bool greater = key[i] > key[j] || (key[i] == key[j] && idx[i] > idx[j]);
            if (greater == up) {
              const unsigned long long tk = key[i]; key[i] = key[j]; key[j] = tk;
              const int ti = idx[i]; idx[i] = idx[j]; idx[j] = ti;
            }
          }
        }
        __syncthreads();
      }
    }
    for (int i = tid; i < L; i += %[4]d) out[oo + i * os] = idx[i];
    __syncthreads(); // the keys are reused by the next line
  }
}
`, k.Name(), cudaPrelude, lineGeometryC, SortThreads, storageC(k.Elem), SortMax, load, key)
}
