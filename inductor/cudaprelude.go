package inductor

import (
	"fmt"

	"gocompile/ir"
)

// cudaPrelude is included at the top of every generated CUDA source: fixed
// width types, loads and stores between storage types and compute kinds
// (the same conversions as the CPU kernels: float16 and bfloat16 round to
// nearest even, anything to bool tests for non-zero, floating to integer
// truncates toward zero), and the helpers the registry's primitives call.
// It needs no headers, so NVRTC compiles it without a CUDA toolkit.
const cudaPrelude = `typedef unsigned char gc_bool;
` + ir.CHalfConversions + `
// gc_launch_dependents lets the kernel launched after this one as its
// programmatic dependent (a product replayed from a CUDA graph, sm_90 and
// later) start now: it issues its weight loads while this kernel runs, and
// waits (griddepcontrol.wait) for this kernel's end before it reads
// anything this kernel writes. Kernels launched plainly are unaffected.
__device__ __forceinline__ void gc_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// gc_grid_wait waits until the kernel this one was launched after as a
// programmatic dependent has finished and its writes are visible (at once
// for a kernel launched plainly). Loads before it may only read what no
// kernel of the program writes.
__device__ __forceinline__ void gc_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// gc_dependent_entry begins a kernel that may be launched as a
// programmatic dependent (array.GPU.LaunchSmall: a small kernel
// replayed from a CUDA graph): it lets its own dependents start, then
// waits for the kernel ahead before it reads anything. Launched early,
// its blocks are resident and waiting when that kernel ends, which saves
// most of a launch's latency.
__device__ __forceinline__ void gc_dependent_entry() {
  gc_launch_dependents();
  gc_grid_wait();
}

// V4 is four values loaded or stored with one vector instruction.
template <typename T> struct __align__(4 * sizeof(T)) V4 { T v[4]; };

// VN is N values (1, 2, 4 or 8, at most 16 bytes) loaded with one vector
// instruction.
template <typename T, int N> struct __align__(N * sizeof(T)) VN { T v[N]; };

// gc_row_v4 loads the vector at flat index i0 (a multiple of 4) of a
// row-broadcast operand, which repeats every inner elements: element i is
// x[i % inner]. When inner is a multiple of 4 the vector lies within one
// repeat, and x aligned makes it one vector load. Otherwise one division
// places the vector, and its elements wrap at most once (inner >= 4).
template <typename T, typename I> __device__ __forceinline__ V4<T> gc_row_v4(const T* x, I i0, I inner) {
  const I r = i0 % inner;
  if ((inner & 3) == 0 && ((unsigned long long)x & (sizeof(V4<T>) - 1)) == 0) return *(const V4<T>*)(x + r);
  V4<T> v;
  if (inner >= 4) {
    #pragma unroll
    for (int j = 0; j < 4; j++) v.v[j] = x[r + j < inner ? r + j : r + j - inner];
    return v;
  }
  #pragma unroll
  for (int j = 0; j < 4; j++) v.v[j] = x[(i0 + j) % inner];
  return v;
}

// gc_col_v4 loads the vector at flat index i0 (a multiple of 4) of a
// column-broadcast operand, which holds one element per run of inner
// elements: element i is x[i / inner]. When inner is a multiple of 4 the
// vector lies within one run: one element, read once. Otherwise one
// division places the vector, which crosses at most one run's end
// (inner >= 4).
template <typename T, typename I> __device__ __forceinline__ V4<T> gc_col_v4(const T* x, I i0, I inner) {
  V4<T> v;
  const I q = i0 / inner;
  if ((inner & 3) == 0) {
    const T e = x[q];
    v.v[0] = e; v.v[1] = e; v.v[2] = e; v.v[3] = e;
    return v;
  }
  if (inner >= 4) {
    const I r = i0 - q * inner;
    #pragma unroll
    for (int j = 0; j < 4; j++) v.v[j] = x[r + j < inner ? q : q + 1];
    return v;
  }
  #pragma unroll
  for (int j = 0; j < 4; j++) v.v[j] = x[(i0 + j) / inner];
  return v;
}
` + ir.CPrelude

// storageC is the C type a dtype is stored as.
func storageC(dt ir.DType) string {
	switch dt {
	case ir.Float32:
		return "float"
	case ir.Float64:
		return "double"
	case ir.Float16:
		return "gc_half"
	case ir.BFloat16:
		return "gc_bf16"
	case ir.Int32:
		return "int"
	case ir.Int64:
		return "long long"
	case ir.Bool:
		return "gc_bool"
	}
	panic(fmt.Sprintf("inductor: no C type for %v", dt))
}

// kindC is the C type values of a compute kind live in.
func kindC(k ir.Kind) string {
	switch k {
	case ir.F32:
		return "float"
	case ir.F64:
		return "double"
	}
	return "long long"
}

// loadC converts the stored value v (of type dt) to kind k.
func loadC(v string, dt ir.DType, k ir.Kind) string {
	switch dt {
	case ir.Float16:
		return fmt.Sprintf("(%s)gc_ld_half(%s)", kindC(k), v)
	case ir.BFloat16:
		return fmt.Sprintf("(%s)gc_ld_bf16(%s)", kindC(k), v)
	case ir.Bool:
		return fmt.Sprintf("(%s)(%s != 0)", kindC(k), v)
	}
	return fmt.Sprintf("(%s)(%s)", kindC(k), v)
}

// storeC converts the value v of kind k to storage type dt.
func storeC(v string, k ir.Kind, dt ir.DType) string {
	switch dt {
	case ir.Float16:
		return fmt.Sprintf("gc_st_half((float)(%s))", v)
	case ir.BFloat16:
		return fmt.Sprintf("gc_st_bf16((float)(%s))", v)
	case ir.Bool:
		return fmt.Sprintf("(gc_bool)((%s) != 0)", v)
	case ir.Int32:
		if k != ir.I64 {
			return fmt.Sprintf("(int)(long long)(%s)", v) // wrap as integers do
		}
		return fmt.Sprintf("(int)(%s)", v)
	}
	return fmt.Sprintf("(%s)(%s)", storageC(dt), v)
}

// fast16 is the line that makes a kernel's float exp and division take
// the hardware's approximations (GC_FAST16, see ir.CPrelude) when every
// value it stores is 16-bit, "" otherwise. A 16-bit kernel computes in
// float32 and spends more instructions per byte than a float32 one: where
// exp, division and conversions dominate (a bfloat16 softmax), these
// bound it more than memory does.
func fast16(outs ...ir.DType) string {
	for _, dt := range outs {
		if dt.Size() != 2 || !dt.IsFloat() {
			return ""
		}
	}
	if len(outs) == 0 {
		return ""
	}
	return "#define GC_FAST16 1\n"
}
