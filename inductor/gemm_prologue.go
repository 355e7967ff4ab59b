package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// A product's prologue: the row region that computes A (a normalization
// such as RMSNorm or LayerNorm ahead of a Linear layer), run by the
// product's own blocks instead of a kernel of its own. Each block computes
// its MT rows of A into shared memory once, every thread taking columns
// tid, tid + threads, …: the region's reductions over the row, block-wide,
// then its root per element, rounded to A's type as the region's store
// would round it. The warps then read A from there. A decode step's norm
// then costs no launch, and its value is never written to memory and read
// back.

// PrologueFits reports whether p can be the prologue of a product of K
// columns of A with launch shape c and operands of type in: the warp
// kernel (others read A in fragments), 16-byte vectors (vec), inputs
// contiguous along the row or one value a row, a root per element of A's
// type, and the block's MT rows of A within prologueMaxBytes of shared
// memory.
func PrologueFits(p *RowKernel, c GemmConfig, in ir.DType, k int, vec bool) bool {
	if p == nil || p.Expr == nil || p.Out != in || c.Tensor || c.Split != 0 || !vec {
		return false
	}
	for _, x := range p.Inputs {
		if x.Access == RowStrided {
			return false
		}
	}
	for _, st := range p.Stages {
		if st.Reduce && st.Reducer.IsArg() {
			return false
		}
	}
	return k%PrologueVector(p) == 0 && c.MT*k*in.Size() <= prologueMaxBytes
}

// prologueMaxBytes is the most shared memory a prologue's rows of A take:
// a block gets 48 KB without asking for more, the reductions' partial
// sums included.
const prologueMaxBytes = 47 << 10

// PrologueVector is how many elements of a row the prologue p reads at a
// time from each input read along the row: one 16-byte vector of the
// widest. Those inputs' rows must start at multiples of it (in elements,
// and of its bytes in memory).
func PrologueVector(p *RowKernel) int {
	pv := 8
	for _, in := range p.Inputs {
		pv = min(pv, 16/in.DType.Size())
	}
	return max(pv, 1)
}

// PrologueBytes is the dynamic shared memory a kernel with a prologue
// takes for k columns of A: its rows of A.
func (k *GemmKernel) PrologueBytes(cols int) int {
	if k.Prologue == nil {
		return 0
	}
	return k.Config.MT * cols * k.in().Size()
}

// prologueName is the part of the kernel's name that names its prologue.
func (k *GemmKernel) prologueName() string {
	p := k.Prologue
	if p == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "_pro%s", p.Label)
	for _, in := range p.Inputs {
		fmt.Fprintf(&b, "_%s%c%s", in.DType, "cus"[in.Access], in.Kind)
	}
	fmt.Fprintf(&b, "_%s", p.Compute)
	return b.String()
}

// prologueParams are the prologue's kernel parameters: per input a
// pointer and its row stride (its stride along the row is 1, or 0 for
// one value a row).
func (k *GemmKernel) prologueParams() []string {
	var ps []string
	for i, in := range k.Prologue.Inputs {
		ps = append(ps, fmt.Sprintf("const %s* p%d, long long p%dm", storageC(in.DType), i, i))
	}
	return ps
}

// prologueC is the code, run by every thread of the block after
// griddepcontrol.wait, that fills As (shared memory, MT rows of K
// elements) with the block's rows of A and points a[i] at them. The
// inputs are read with plain loads (the kernel ahead may have written
// them), in vectors of PrologueVector elements.
func (k *GemmKernel) prologueC() (string, error) {
	p := k.Prologue
	kinds := p.leafKinds()
	nIn := len(p.Inputs)
	var b strings.Builder
	pv := PrologueVector(p)
	// forEach is a loop over the thread's columns, PV at a time: the
	// vectors of the inputs e reads (every load of an unrolled group of
	// iterations in flight at once), then body per element, with x<i>
	// input i's element.
	forEach := func(e *ir.Expr, body string) string {
		var s strings.Builder
		fmt.Fprintf(&s, "      #pragma unroll 4\n      for (int k = tid * PV; k < K; k += %d * PV) {\n", k.Config.Threads())
		for i, in := range p.Inputs {
			if uses(e, i) && in.Access == RowContig {
				fmt.Fprintf(&s, "        const VN<%s, PV> v%d = *(const VN<%[1]s, PV>*)(r%d + k);\n", storageC(in.DType), i, i)
			}
		}
		s.WriteString("        #pragma unroll\n        for (int q = 0; q < PV; q++) {\n")
		for i, in := range p.Inputs {
			if !uses(e, i) {
				continue
			}
			at := fmt.Sprintf("v%d.v[q]", i)
			if in.Access == RowUniform {
				at = fmt.Sprintf("r%d[0]", i)
			}
			fmt.Fprintf(&s, "          const %s x%d = %s;\n", kindC(in.Kind), i, loadC(at, in.DType, in.Kind))
		}
		s.WriteString(body + "        }\n      }\n")
		return s.String()
	}
	elem := func(i int) string {
		if i < nIn {
			return fmt.Sprintf("x%d", i)
		}
		return fmt.Sprintf("rv%d", i-nIn)
	}
	fmt.Fprintf(&b, "    // The prologue, %s: the block's rows of A into shared memory.\n", p.Doc)
	b.WriteString("#ifndef GC_EXTERN_SHARED\n#define GC_EXTERN_SHARED extern __shared__ __align__(16)\n#endif\n")
	b.WriteString("    GC_EXTERN_SHARED unsigned char gc_prologue_smem[];\n")
	fmt.Fprintf(&b, "    %s* As = (%[1]s*)gc_prologue_smem;\n", storageC(k.in()))
	fmt.Fprintf(&b, "    const int tid = threadIdx.x, PV = %d;\n    #pragma unroll 1\n    for (int i = 0; i < MT; i++) {\n", pv)
	b.WriteString("      const long long m = min(m0 + i, M - 1);\n")
	for i, in := range p.Inputs {
		fmt.Fprintf(&b, "      const %s* r%d = p%d + m * p%dm;\n", storageC(in.DType), i, i, i)
	}
	for s, st := range p.Stages {
		K := kindC(st.Kind)
		if !st.Reduce {
			v, err := p.onceValue(st, elem, kinds, "product prologue")
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "      // %s, once per row\n      const %s rv%d = %s;\n", st.Name, K, s, v)
			continue
		}
		e, err := st.Expr.C(elem, noParam, kinds, st.Compute)
		if err != nil {
			return "", fmt.Errorf("product prologue %s: stage %s: %w", p.Label, st.Name, err)
		}
		A := kindC(st.Compute)
		fmt.Fprintf(&b, "      // %s: %v over the row of %s\n      %s acc%d = %s;\n", st.Name, st.Reducer, p.exprDoc(st.Expr), A, s, st.Reducer.CIdentity(st.Compute))
		b.WriteString(forEach(st.Expr, fmt.Sprintf("          acc%d = combine%[1]d()(acc%[1]d, (%s)(%s));\n", s, A, e)))
		fmt.Fprintf(&b, "      acc%d = gc_prologue_allreduce(acc%[1]d, combine%[1]d());\n", s)
		fin := fmt.Sprintf("acc%d", s)
		if st.Reducer == ir.RMean {
			fin = fmt.Sprintf("acc%d / (%s)K", s, A)
		}
		fmt.Fprintf(&b, "      const %s rv%d = %s;\n", K, s, loadC(storeC(fin, st.Compute, st.DType), st.DType, st.Kind))
	}
	e, outKind, err := p.rootC(elem, kinds, "product prologue")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "      // the root, per element: %s\n", p.exprDoc(p.Expr))
	b.WriteString(forEach(p.Expr, fmt.Sprintf("          As[i * K + k + q] = %s;\n", storeC(e, outKind, k.in()))))
	b.WriteString("    }\n")
	b.WriteString("    __syncthreads();\n    #pragma unroll\n    for (int i = 0; i < MT; i++) a[i] = As + i * K;\n")
	return b.String(), nil
}

// prologueHelpers are the prologue's reductions: each stage's combine,
// and a block-wide reduction in a fixed order (results repeat exactly).
func (k *GemmKernel) prologueHelpers() string {
	return stageCombines(k.Prologue.Stages) + fmt.Sprintf(`
// gc_prologue_allreduce combines the v of every thread of the block with
// c and gives each the result.
template <typename T, typename C> __device__ __forceinline__ T gc_prologue_allreduce(T v, C c) {
  __shared__ T partial[%d];
  for (int d = 16; d > 0; d >>= 1) v = c(v, __shfl_xor_sync(0xffffffffu, v, d));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < %[1]d; w++) v = c(v, partial[w]);
  __syncthreads();
  return v;
}
`, k.Config.Threads()/32)
}
