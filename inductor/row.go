package inductor

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"gocompile/fuse"
	"gocompile/ir"
)

// RowAccess says how a row kernel reads an input along a row.
type RowAccess uint8

const (
	// RowContig inputs hold a row's elements next to each other (inner
	// stride 1): the kernel loads them with vector loads when it can.
	RowContig RowAccess = iota
	// RowUniform inputs hold one value per row (inner stride 0).
	RowUniform
	// RowStrided inputs step by their inner stride along a row.
	RowStrided
)

// RowInput is one tensor a row kernel reads.
type RowInput struct {
	DType  ir.DType
	Kind   ir.Kind // kind it is loaded in
	Access RowAccess
}

// RowStage is one row-level value of a row kernel (see fuse.Stage).
type RowStage struct {
	Name    string // the graph node, for comments
	Reduce  bool
	Reducer ir.Reducer
	Expr    *ir.Expr
	Compute ir.Kind
	Kind    ir.Kind
	DType   ir.DType // the value is rounded to it, as a store would
}

// RowKernel is a fused row region: per row of R elements, the stages in
// order (reductions over the row, and values computed once per row from
// them), then the root: Expr per element when it is set, else the last
// stage's value, one per row. Expressions read Arg(i) as input i's element
// (or its row's value, for RowUniform inputs) for i < len(Inputs), and
// Arg(len(Inputs)+k) as stage k's value.
//
// A block of Threads threads handles a row at a time. A persistent kernel
// (Persist > 0) loads each thread's Persist×Vec elements of every input
// into registers once and runs every stage over them; a looped one reads
// the row again for each stage (it then comes from L2).
type RowKernel struct {
	Label   string
	Doc     string // the graph nodes the kernel computes, for the header
	Inputs  []RowInput
	Stages  []RowStage
	Expr    *ir.Expr
	Compute ir.Kind
	Out     ir.DType
	Threads int
	Vec     int // 4: contiguous inputs and the output use 128-bit accesses (R % 4 == 0, aligned rows)
	Persist int
	// Split makes a looped kernel of a region with one stage, a reduction
	// that is the root, reduce a row in several blocks (grid.y): each
	// writes its partial accumulator, and the kernel Name()+"_final"
	// combines a row's partials. For few long rows.
	Split bool
	// Index32 indexes columns with 32-bit integers (valid when a row has
	// fewer than 2^31 - Threads·Vec elements); rows still use 64 bits.
	Index32 bool
}

// CanSplit reports whether the region's rows can be split across blocks:
// its one stage is a reduction, and the root.
func (k *RowKernel) CanSplit() bool {
	return len(k.Stages) == 1 && k.Stages[0].Reduce && k.Expr == nil
}

// Name is the kernel's entry point, unique for its configuration.
func (k *RowKernel) Name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gc_row_%s", k.Label)
	for _, in := range k.Inputs {
		fmt.Fprintf(&b, "_%s%c%s", in.DType, "cus"[in.Access], in.Kind)
	}
	fmt.Fprintf(&b, "_%s_to_%s_t%dv%dp%d", k.Compute, k.Out, k.Threads, k.Vec, k.Persist)
	if k.Split {
		b.WriteString("_split")
	}
	if k.Index32 {
		b.WriteString("_i32")
	}

	return b.String()
}

// NewRowKernel is the kernel of the row region r, with every input
// contiguous along the row; set Inputs[i].Access, Vec, Threads and Persist
// for the layout at hand.
func NewRowKernel(r *fuse.Region) *RowKernel {
	k := &RowKernel{Expr: r.Expr, Compute: r.Compute, Out: r.Root.DType, Doc: r.Describe()}
	for _, in := range r.Inputs {
		k.Inputs = append(k.Inputs, RowInput{DType: in.Node.DType, Kind: in.Kind})
	}
	for _, st := range r.Row.Stages {
		k.Stages = append(k.Stages, RowStage{
			Name: st.Node.Name() + " = " + st.Node.Op.Name, Reduce: st.Reduce, Reducer: st.Reducer,
			Expr: st.Expr, Compute: st.Compute, Kind: st.Kind, DType: st.Node.DType,
		})
	}
	k.Label = rowLabel(k.Stages, r.Expr)
	return k
}

// rowLabel names a row region's kernel by a hash of its expressions.
func rowLabel(stages []RowStage, root *ir.Expr) string {
	h := fnv.New64a()
	for _, s := range stages {
		fmt.Fprintf(h, "%v %v %v %v %v|", s.Reduce, s.Reducer, s.Expr, s.Compute, s.DType)
	}
	fmt.Fprint(h, root)
	return fmt.Sprintf("%016x", h.Sum64())
}

// RowGeometry is the layout of a row kernel's inputs: the outer (row)
// shape, and per input its strides over the outer dims and along the row.
// Passed by value as struct { long long orank, osize[8], ostride[n][8],
// istride[n]; } with n = max(len(Inputs), 1).
type RowGeometry struct {
	OuterRank   int
	OuterSize   [MaxRank]int64
	OuterStride [][MaxRank]int64
	InnerStride []int64
}

// Bytes encodes the geometry as the kernel parameter.
func (g *RowGeometry) Bytes() []byte {
	b := putInt64s(nil, int64(g.OuterRank))
	b = putInt64s(b, g.OuterSize[:]...)
	n := max(len(g.OuterStride), 1)
	for i := range n {
		if i < len(g.OuterStride) {
			b = putInt64s(b, g.OuterStride[i][:]...)
		} else {
			b = putInt64s(b, make([]int64, MaxRank)...)
		}
	}
	for i := range n {
		if i < len(g.InnerStride) {
			b = putInt64s(b, g.InnerStride[i])
		} else {
			b = putInt64s(b, 0)
		}
	}
	return b
}

// ChooseRowConfig picks threads per block and the persistent depth for
// rows of r elements, with vec elements per access: a thread handles about
// 4 vectors, blocks have 32 to 1024 threads, and rows of up to 8 vectors
// per thread stay in registers.
func ChooseRowConfig(r, vec int) (threads, persist int) {
	vectors := (r + vec - 1) / vec
	threads = 32
	for threads < 1024 && threads*4 < vectors {
		threads *= 2
	}
	per := (vectors + threads - 1) / threads
	if per <= 8 {
		return threads, per
	}
	return threads, 0
}

// Source generates the kernel's CUDA C. Parameters: long long rows, long
// long R, one const pointer per input, the output pointer, RowGeometry g.
// Launch with Threads threads per block; blocks loop over rows. A Split
// kernel takes long long chunk (the columns each block reduces, a multiple
// of Vec) after R and a pointer to rows×grid.y partial accumulators (of
// the stage's compute kind) after the output, and is launched with grid
// (rows, parts); then Name()+"_final"(long long rows, long long parts, long
// long R, partial, out) with one block of Threads threads per row.
func (k *RowKernel) Source() (string, error) {
	body, err := k.body()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("// gocompile fused row kernel %s: %s\n", k.Label, k.Doc) + cudaPrelude + body, nil
}

func (k *RowKernel) leafKinds() []ir.Kind {
	var kinds []ir.Kind
	for _, in := range k.Inputs {
		kinds = append(kinds, in.Kind)
	}
	for _, s := range k.Stages {
		kinds = append(kinds, s.Kind)
	}
	return kinds
}

func (k *RowKernel) body() (string, error) {
	if k.Vec != 1 && k.Vec != 4 {
		return "", fmt.Errorf("row kernel %s: vector width %d", k.Label, k.Vec)
	}
	kinds := k.leafKinds()
	nIn := len(k.Inputs)
	var b strings.Builder
	fmt.Fprintf(&b, `
#define THREADS %d
#define VEC %d
#define PERSIST %d
struct RowGeometry { long long orank; long long osize[%d]; long long ostride[%d][%[4]d]; long long istride[%[5]d]; };

// block_allreduce combines every thread's v with c and gives each thread
// the result; partials combine in a fixed order, so results repeat exactly.
template <typename T, typename C> __device__ __forceinline__ T block_allreduce(T v, C c) {
  __shared__ T partial[32];
  for (int d = 16; d > 0; d >>= 1) v = c(v, __shfl_xor_sync(0xffffffffu, v, d));
  if (THREADS > 32) {
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < THREADS / 32; w++) v = c(v, partial[w]);
    __syncthreads();
  }
  return v;
}
`, k.Threads, k.Vec, k.Persist, MaxRank, max(nIn, 1))

	b.WriteString(stageCombines(k.Stages))

	// Signature and per-row setup.
	if k.Split && (!k.CanSplit() || k.Persist > 0) {
		return "", fmt.Errorf("row kernel %s: only a looped kernel of one reduction splits", k.Label)
	}
	J := "long long" // column indices
	if k.Index32 {
		J = "int"
	}
	params := []string{"long long rows", "long long R"}
	if k.Split {
		params = append(params, "long long chunk")
	}
	for i, in := range k.Inputs {
		params = append(params, fmt.Sprintf("const %s* __restrict__ x%d", storageC(in.DType), i))
	}
	outType := storageC(k.Out)
	params = append(params, fmt.Sprintf("%s* __restrict__ out", outType))
	if k.Split {
		params = append(params, fmt.Sprintf("%s* __restrict__ partial", kindC(k.Stages[0].Compute)))
	}
	params = append(params, "RowGeometry g")
	fmt.Fprintf(&b, "\nextern \"C\" __global__ void __launch_bounds__(THREADS) %s(\n    %s) {\n", k.Name(), strings.Join(params, ",\n    "))
	if k.Split {
		b.WriteString("  // This block reduces columns [jlo, jhi) of one row.\n")
		b.WriteString("  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {\n")
		fmt.Fprintf(&b, "    const %[1]s jlo = (%[1]s)(blockIdx.y * chunk), jhi = (%[1]s)min(R, (long long)jlo + chunk);\n", J)
	} else {
		b.WriteString("  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {\n")
		fmt.Fprintf(&b, "    const %[1]s jlo = 0, jhi = (%[1]s)R;\n", J)
	}
	if nIn > 0 {
		b.WriteString("    // Each input's offset of the row's first element.\n    long long base[" + fmt.Sprint(nIn) + "] = {0};\n")
		fmt.Fprintf(&b, "    if (g.orank == 1) {  // the common case after merging dims: no division\n      for (int t = 0; t < %d; t++) base[t] = row * g.ostride[t][0];\n    } else {\n", nIn)
		b.WriteString("      for (long long rem = row, d = g.orank - 1; d >= 0; d--) {\n        long long c = rem % g.osize[d];\n        rem /= g.osize[d];\n")
		fmt.Fprintf(&b, "        for (int t = 0; t < %d; t++) base[t] += c * g.ostride[t][d];\n      }\n    }\n", nIn)
	}
	for i, in := range k.Inputs {
		if in.Access == RowUniform {
			fmt.Fprintf(&b, "    const %s u%d = %s;\n", kindC(in.Kind), i, loadC(fmt.Sprintf("x%d[base[%d]]", i, i), in.DType, in.Kind))
		}
	}

	// A persistent kernel holds in registers the inputs its reductions
	// read; inputs only the root reads (a norm's weight and bias) are
	// loaded where the root needs them, saving registers.
	held := make([]bool, nIn)
	for i, in := range k.Inputs {
		for _, st := range k.Stages {
			held[i] = held[i] || (k.Persist > 0 && in.Access != RowUniform && st.Reduce && uses(st.Expr, i))
		}
	}
	// elem names leaf i for the element at register slot q (held inputs)
	// or v (inputs loaded in the loop).
	elem := func(q string) func(i int) string {
		return func(i int) string {
			switch {
			case i >= nIn:
				return fmt.Sprintf("rv%d", i-nIn)
			case k.Inputs[i].Access == RowUniform:
				return fmt.Sprintf("u%d", i)
			case held[i]:
				return fmt.Sprintf("e%d[%s]", i, q)
			}
			return fmt.Sprintf("e%d[v]", i)
		}
	}
	noParam := func(int) string { return "0" }
	// loads fills e<i>[...] of the inputs which selects with the VEC
	// elements from column j0 (into slot base q).
	loads := func(indent, q string, which func(int) bool) string {
		var l strings.Builder
		for i, in := range k.Inputs {
			x := fmt.Sprintf("x%d", i)
			switch {
			case in.Access == RowUniform || !which(i):
			case in.Access == RowContig && k.Vec == 4:
				fmt.Fprintf(&l, "%s{ const V4<%s> v = *(const V4<%[2]s>*)(%s + base[%d] + j0);\n", indent, storageC(in.DType), x, i)
				fmt.Fprintf(&l, "%s  for (int v4 = 0; v4 < 4; v4++) e%d[%s + v4] = %s; }\n", indent, i, q, loadC("v.v[v4]", in.DType, in.Kind))
			case in.Access == RowContig:
				fmt.Fprintf(&l, "%se%d[%s] = %s;\n", indent, i, q, loadC(fmt.Sprintf("%s[base[%d] + j0]", x, i), in.DType, in.Kind))
			default:
				fmt.Fprintf(&l, "%sfor (int v = 0; v < VEC; v++) e%d[%s + v] = %s;\n", indent, i, q,
					loadC(fmt.Sprintf("%s[base[%d] + (j0 + v) * g.istride[%d]]", x, i, i), in.DType, in.Kind))
			}
		}
		return l.String()
	}
	declare := func(indent string, n string, which func(int) bool) string {
		var l strings.Builder
		for i, in := range k.Inputs {
			if in.Access != RowUniform && which(i) {
				fmt.Fprintf(&l, "%s%s e%d[%s];\n", indent, kindC(in.Kind), i, n)
			}
		}
		return l.String()
	}
	// forEach wraps body (code for one element at slot "q", column "j")
	// in the loops over a thread's elements of the row; e reads the inputs
	// that are not held.
	forEach := func(body string, e *ir.Expr) string {
		inLoop := func(i int) bool { return !held[i] && uses(e, i) }
		var l strings.Builder
		if k.Persist > 0 {
			l.WriteString("    #pragma unroll\n    for (int p = 0; p < PERSIST; p++) {\n")
			fmt.Fprintf(&l, "      const %[1]s j0 = ((%[1]s)p * THREADS + threadIdx.x) * VEC;\n", J)
			l.WriteString("      if (j0 < R) {\n")
			l.WriteString(declare("        ", "VEC", inLoop))
			l.WriteString(loads("        ", "0", inLoop))
			l.WriteString("        #pragma unroll\n        for (int v = 0; v < VEC; v++) {\n")
			l.WriteString("          const int q = p * VEC + v;\n          (void)q;\n")
		} else {
			fmt.Fprintf(&l, "    for (%[1]s j0 = jlo + (%[1]s)threadIdx.x * VEC; j0 < jhi; j0 += (%[1]s)THREADS * VEC) {\n", J)
			l.WriteString(declare("      ", "VEC", inLoop))
			l.WriteString(loads("      ", "0", inLoop))
			l.WriteString("      {\n        #pragma unroll\n        for (int v = 0; v < VEC; v++) {\n")
		}
		fmt.Fprintf(&l, "          const %s j = j0 + v;\n          (void)j;\n", J)
		l.WriteString(body)
		l.WriteString("        }\n      }\n    }\n")
		return l.String()
	}
	if k.Persist > 0 {
		b.WriteString("    // The thread's elements of the row, loaded once.\n")
		isHeld := func(i int) bool { return held[i] }
		b.WriteString(declare("    ", "PERSIST * VEC", isHeld))
		b.WriteString("    #pragma unroll\n    for (int p = 0; p < PERSIST; p++) {\n")
		fmt.Fprintf(&b, "      const %[1]s j0 = ((%[1]s)p * THREADS + threadIdx.x) * VEC;\n", J)
		b.WriteString("      if (j0 < R) {\n")
		b.WriteString(loads("        ", "p * VEC", isHeld))
		b.WriteString("      }\n    }\n")
	}

	for s, st := range k.Stages {
		K := kindC(st.Kind)
		if !st.Reduce {
			e, err := st.Expr.C(elem("0"), noParam, kinds, st.Compute)
			if err != nil {
				return "", fmt.Errorf("row kernel %s: stage %s: %w", k.Label, st.Name, err)
			}
			_, ok, err := st.Expr.ParamKinds(kinds, st.Compute)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "    // %s, once per row\n    const %s rv%d = %s;\n", st.Name, K, s, loadC(storeC(e, ok, st.DType), st.DType, st.Kind))
			continue
		}
		e, err := st.Expr.C(elem("q"), noParam, kinds, st.Compute)
		if err != nil {
			return "", fmt.Errorf("row kernel %s: stage %s: %w", k.Label, st.Name, err)
		}
		A := kindC(st.Compute)
		fmt.Fprintf(&b, "    // %s: %v over the row of %s\n    %s acc%d = %s;\n", st.Name, st.Reducer, k.exprDoc(st.Expr), A, s, st.Reducer.CIdentity(st.Compute))
		b.WriteString(forEach(fmt.Sprintf("          acc%[1]d = combine%[1]d()(acc%[1]d, (%[2]s)(%[3]s));\n", s, A, e), st.Expr))
		fmt.Fprintf(&b, "    acc%d = block_allreduce(acc%[1]d, combine%[1]d());\n", s)
		if k.Split {
			fmt.Fprintf(&b, "    if (threadIdx.x == 0) partial[row * gridDim.y + blockIdx.y] = acc%d;\n  }\n}\n", s)
			fmt.Fprintf(&b, `
// The second pass: a row's partial accumulators, combined in order.
extern "C" __global__ void __launch_bounds__(THREADS) %s_final(
    long long rows, long long parts, long long R, const %s* __restrict__ partial, %s* __restrict__ out) {
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    %s acc%d = %s;
    for (long long p = threadIdx.x; p < parts; p += THREADS) acc%[5]d = combine%[5]d()(acc%[5]d, partial[row * parts + p]);
    acc%[5]d = block_allreduce(acc%[5]d, combine%[5]d());
`, k.Name(), A, outType, A, s, st.Reducer.CIdentity(st.Compute))
		}
		fin := fmt.Sprintf("acc%d", s)
		if st.Reducer == ir.RMean {
			fin = fmt.Sprintf("acc%d / (%s)R", s, A)
		}
		fmt.Fprintf(&b, "    const %s rv%d = %s;\n", K, s, loadC(storeC(fin, st.Compute, st.DType), st.DType, st.Kind))
	}

	if k.Expr == nil {
		if len(k.Stages) == 0 {
			return "", fmt.Errorf("row kernel %s: no root", k.Label)
		}
		last := len(k.Stages) - 1
		fmt.Fprintf(&b, "    if (threadIdx.x == 0) out[row] = %s;\n  }\n}\n", storeC(fmt.Sprintf("rv%d", last), k.Stages[last].Kind, k.Out))
		return b.String(), nil
	}
	_, outKind, err := k.Expr.ParamKinds(kinds, k.Compute)
	if err != nil {
		return "", err
	}
	e, err := k.Expr.C(elem("q"), noParam, kinds, k.Compute)
	if err != nil {
		return "", fmt.Errorf("row kernel %s: root: %w", k.Label, err)
	}
	fmt.Fprintf(&b, "    // the root, per element: %s\n", k.exprDoc(k.Expr))
	if k.Vec == 4 {
		fmt.Fprintf(&b, "    %s* orow = out + row * R;\n", outType)
		body := fmt.Sprintf("          r.v[v] = %s;\n", storeC(e, outKind, k.Out))
		loop := forEach(body, k.Expr)
		// Gather the four results of a vector and store them at once.
		loop = strings.Replace(loop, "        #pragma unroll\n        for (int v = 0; v < VEC; v++) {\n",
			fmt.Sprintf("        V4<%s> r;\n        #pragma unroll\n        for (int v = 0; v < VEC; v++) {\n", outType), 1)
		loop = strings.Replace(loop, "        }\n      }\n    }\n",
			fmt.Sprintf("        }\n        *(V4<%s>*)(orow + j0) = r;\n      }\n    }\n", outType), 1)
		b.WriteString(loop)
	} else {
		b.WriteString(forEach(fmt.Sprintf("          if (j < R) out[row * R + j] = %s;\n", storeC(e, outKind, k.Out)), k.Expr))
	}
	b.WriteString("  }\n}\n")
	return b.String(), nil
}

// stageCombines is the combine functor (combine<s>) of each reduction
// stage s; row and column kernels fold with them.
func stageCombines(stages []RowStage) string {
	var b strings.Builder
	for s, st := range stages {
		if st.Reduce {
			K := kindC(st.Compute)
			fmt.Fprintf(&b, "// %s: %v\nstruct combine%d { __device__ __forceinline__ %s operator()(%[4]s a, %[4]s b) const { return %[5]s; } };\n",
				st.Name, st.Reducer, s, K, st.Reducer.CCombine("a", "b"))
		}
	}
	return b.String()
}

// uses reports whether e reads Arg(i).
func uses(e *ir.Expr, i int) bool {
	seen := map[*ir.Expr]bool{}
	var walk func(e *ir.Expr) bool
	walk = func(e *ir.Expr) bool {
		if e == nil || seen[e] {
			return false
		}
		seen[e] = true
		if e.Prim == ir.PArg && e.Index == i {
			return true
		}
		for _, a := range e.Args {
			if walk(a) {
				return true
			}
		}
		return false
	}
	return walk(e)
}

var argName = regexp.MustCompile(`\bx(\d+)\b`)

// exprDoc prints e for a comment, naming arguments as the kernel's code
// does: x<i> for input i, rv<k> for stage k's value.
func (k *RowKernel) exprDoc(e *ir.Expr) string {
	return argName.ReplaceAllStringFunc(e.String(), func(m string) string {
		i, _ := strconv.Atoi(m[1:])
		if i >= len(k.Inputs) {
			return fmt.Sprintf("rv%d", i-len(k.Inputs))
		}
		return m
	})
}
