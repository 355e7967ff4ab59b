package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// IndexKernel describes a gather along one dim: out[pos] = x[pos with
// pos[dim] replaced by index[...]]. For Gather the index tensor has the
// output's shape (strided); for IndexSelect it is 1-D and read at pos[dim].
// Out-of-range indices are not read: the kernel sets *bad and records one
// offending index, which the host turns into an error.
type IndexKernel struct {
	Elem   ir.DType // element type of x and out (copied bit for bit)
	Index  ir.DType // Int32 or Int64
	Gather bool     // Gather (index shaped like out) rather than IndexSelect
}

// Name is the kernel's entry point.
func (k *IndexKernel) Name() string {
	mode := "index_select"
	if k.Gather {
		mode = "gather"
	}
	return fmt.Sprintf("gc_%s_%v_by_%v", mode, k.Elem, k.Index)
}

// Source generates the kernel. Parameters: long long n (output elements),
// const Elem* x, const Index* index, Elem* out, long long dim, long long
// dimSize, long long* bad (bad[0] set to 1, bad[1] an offending index),
// Geometry g with the output's sizes, stride[0] = x's strides (dim's
// entry is x's stride along dim) and stride[1] = the index's strides
// (IndexSelect: its one stride in entry 0).
func (k *IndexKernel) Source() string {
	return fmt.Sprintf("// gocompile eager kernel: %s\n", k.Name()) + cudaPrelude + k.body()
}

// indexGeometryC is the Geometry struct of the index kernels and
// gc_index_at, which finds element i's position: its coordinate along dim
// (at), and its offsets through stride[0] without dim (o0) and through
// stride[1] with it (o1).
var indexGeometryC = fmt.Sprintf(`struct Geometry { long long rank; long long size[%d]; long long stride[2][%d]; };

__device__ __forceinline__ void gc_index_at(long long i, const Geometry& g, long long dim, long long& at, long long& o0, long long& o1) {
  long long rem = i;
  at = 0, o0 = 0, o1 = 0;
  for (int d = (int)g.rank - 1; d >= 0; d--) {
    long long c = rem %% g.size[d];
    rem /= g.size[d];
    if (d == dim) at = c; else o0 += c * g.stride[0][d];
    o1 += c * g.stride[1][d];
  }
}

`, MaxRank, MaxRank)

func (k *IndexKernel) body() string {
	var b strings.Builder
	b.WriteString(indexGeometryC)
	at := "at * g.stride[1][0]" // IndexSelect: the 1-D index at pos[dim]
	if k.Gather {
		at = "io" // Gather: the index element at the output's position
	}
	fmt.Fprintf(&b, `extern "C" __global__ void %[1]s(long long n, const %[2]s* __restrict__ x, const %[3]s* __restrict__ index,
    %[2]s* __restrict__ out, long long dim, long long dimSize, long long* bad, Geometry g) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long at, xo, io;
    gc_index_at(i, g, dim, at, xo, io);
    long long j = (long long)index[%[4]s];
    if (j < 0) j += dimSize;
    if (j < 0 || j >= dimSize) {
      bad[1] = (long long)index[%[4]s];
      atomicExch((unsigned long long*)bad, 1ull);
      continue;
    }
    out[i] = x[xo + j * g.stride[0][dim]];
  }
}
`, k.Name(), storageC(k.Elem), storageC(k.Index), at)
	return b.String()
}

// IndexCopyKernel writes src into dst along one dim at a 1-D index held
// on the device: dst[pos with pos[dim] = index[pos[dim]]] = src[pos] for
// every position pos of src (both of Elem). Where the index repeats a
// destination, the last occurrence's element is written, as a sequential
// copy leaves it (each thread looks for a later occurrence of its
// destination, so results do not depend on timing, unless the block has
// found the index strictly increasing). An out-of-range
// index is not written: the kernel sets *bad and records it, as
// IndexKernel does.
type IndexCopyKernel struct {
	Elem  ir.DType
	Index ir.DType // Int32 or Int64
}

// Name is the kernel's entry point.
func (k *IndexCopyKernel) Name() string {
	return fmt.Sprintf("gc_index_copy_%v_by_%v", k.Elem, k.Index)
}

// Source generates the kernel. Parameters: long long n (src's elements),
// const Elem* src, const Index* index, long long indexLen, long long
// indexStride, Elem* dst, long long dim, long long dimSize (dst's),
// long long* bad, Geometry g with src's sizes, stride[0] = dst's strides
// and stride[1] = src's.
func (k *IndexCopyKernel) Source() string {
	return indexWriteSource(k.Name(), k.Elem, k.Index, indexIncreasingC, `    bool last = true;
    for (long long a = at + 1; a < indexLen && last && !increasing; a++) {
      long long j2 = (long long)index[a * indexStride];
      if (j2 < 0) j2 += dimSize;
      last = j2 != j;
    }
    if (last) dst[dof + j * g.stride[0][dim]] = src[sof];
`)
}

// indexIncreasingC is IndexCopyKernel's prologue: whether the index is
// strictly increasing.
const indexIncreasingC = `  // Strictly increasing destinations (a cache's positions) repeat none:
  // the block checks that once, in a pass over the index, where it is not
  // longer than 65536, instead of each element looking for a later
  // occurrence of its own.
  bool ok = indexLen <= 65536;
  for (long long a = threadIdx.x; ok && a + 1 < indexLen; a += blockDim.x) {
    long long j1 = (long long)index[a * indexStride], j2 = (long long)index[(a + 1) * indexStride];
    if (j1 < 0) j1 += dimSize;
    if (j2 < 0) j2 += dimSize;
    ok = j1 < j2;
  }
  const bool increasing = __syncthreads_and(ok);
`

// indexWriteSource is the source of an index write kernel (IndexCopyKernel's
// parameters) whose write of src[sof] to dst at index j is write, after
// prologue.
func indexWriteSource(name string, elem, index ir.DType, prologue, write string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile eager kernel: %s\n%s", name, cudaPrelude)
	b.WriteString(indexGeometryC)
	fmt.Fprintf(&b, `extern "C" __global__ void %[1]s(long long n, const %[2]s* __restrict__ src, const %[3]s* __restrict__ index,
    long long indexLen, long long indexStride, %[2]s* __restrict__ dst, long long dim, long long dimSize, long long* bad, Geometry g) {
  gc_dependent_entry();
%[5]s  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long at, dof, sof;
    gc_index_at(i, g, dim, at, dof, sof);
    long long j = (long long)index[at * indexStride];
    if (j < 0) j += dimSize;
    if (j < 0 || j >= dimSize) {
      bad[1] = (long long)index[at * indexStride];
      atomicExch((unsigned long long*)bad, 1ull);
      continue;
    }
%[4]s  }
}
`, name, storageC(elem), storageC(index), write, prologue)
	return b.String()
}

// IndexAddKernel adds src into dst along one dim at a 1-D index held on
// the device: dst[pos with pos[dim] = index[pos[dim]]] += src[pos] for
// every position pos of src, with atomic adds, so repeated indices add up
// (in an order that depends on timing, as torch.index_add on a GPU). Elem
// is Float32 or Float64 (16-bit types add into a float32 copy). Its
// parameters are IndexCopyKernel's.
type IndexAddKernel struct {
	Elem  ir.DType
	Index ir.DType
}

// Name is the kernel's entry point.
func (k *IndexAddKernel) Name() string { return fmt.Sprintf("gc_index_add_%v_by_%v", k.Elem, k.Index) }

// Source generates the kernel.
func (k *IndexAddKernel) Source() string {
	return indexWriteSource(k.Name(), k.Elem, k.Index, "", "    atomicAdd(dst + dof + j * g.stride[0][dim], src[sof]);\n")
}

// IntMatMulSource is a plain integer matrix product over contiguous
// batches, for the types cuBLAS does not multiply: out[b][i][j] =
// sum_p a[b][i][p] * c[b][p][j], wrapping as integers do. Parameters:
// const long long* a, const long long* c, long long* out, long long batch,
// m, k, n. Launch one thread per output element.
const IntMatMulName = "gc_matmul_int64"

// IntMatMulSource is the source of IntMatMulName.
const IntMatMulSource = `// gocompile eager kernel: integer matmul
extern "C" __global__ void gc_matmul_int64(const long long* __restrict__ a, const long long* __restrict__ c,
    long long* __restrict__ out, long long batch, long long m, long long k, long long n) {
  long long total = batch * m * n;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    long long j = e % n, i = (e / n) % m, b = e / (m * n);
    const long long* ar = a + (b * m + i) * k;
    const long long* cc = c + b * k * n + j;
    long long s = 0;
    for (long long p = 0; p < k; p++) s += ar[p] * cc[p * n];
    out[e] = s;
  }
}
`

// TriangleKernel keeps the lower (Tril) or upper (Triu) triangle of the
// last two dims and zeroes the rest: element [..., i, j] is kept where
// j - i <= diag (lower) or j - i >= diag (upper). Parameters: long long n
// (output elements), const Elem* x, Elem* out (contiguous), long long
// diag, Geometry g with the output's sizes and stride[0] = x's strides.
// Launch one thread per element, grid-stride.
type TriangleKernel struct {
	Elem  ir.DType
	Upper bool
}

// Name is the kernel's entry point.
func (k *TriangleKernel) Name() string {
	if k.Upper {
		return fmt.Sprintf("gc_triu_%v", k.Elem)
	}
	return fmt.Sprintf("gc_tril_%v", k.Elem)
}

// Source generates the kernel.
func (k *TriangleKernel) Source() string {
	keep := "j - i <= diag"
	if k.Upper {
		keep = "j - i >= diag"
	}
	return fmt.Sprintf(`// gocompile eager kernel: %[1]s
%[2]sstruct Geometry { long long rank; long long size[%[3]d]; long long stride[1][%[3]d]; };

extern "C" __global__ void %[1]s(long long n, const %[4]s* __restrict__ x, %[4]s* __restrict__ out, long long diag, Geometry g) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
    long long rem = e, xo = 0, i = 0, j = 0;
    for (int d = (int)g.rank - 1; d >= 0; d--) {
      const long long c = rem %% g.size[d];
      rem /= g.size[d];
      xo += c * g.stride[0][d];
      if (d == g.rank - 1) j = c;
      if (d == g.rank - 2) i = c;
    }
    out[e] = (%[5]s) ? x[xo] : (%[4]s)0;
  }
}
`, k.Name(), cudaPrelude, MaxRank, storageC(k.Elem), keep)
}
