package inductor

import (
	"encoding/binary"
	"fmt"
	"strings"

	"gocompile/ir"
)

// MaxRank is the largest rank the strided kernels index (after adjacent
// dims are merged, which leaves most tensors with one to three).
const MaxRank = 8

// Access says how a kernel reads an operand.
type Access uint8

const (
	// Dense operands hold element i at position i (after the data pointer,
	// which carries the view's offset).
	Dense Access = iota
	// Uniform operands hold one element that every index reads.
	Uniform
	// Strided operands are indexed through the kernel's Geometry.
	Strided
	// ScalarArg operands are Go numbers passed as kernel parameters.
	ScalarArg
)

// Operand is one input of a pointwise kernel.
type Operand struct {
	DType  ir.DType // storage type (ScalarArg: unused)
	Kind   ir.Kind  // kind it is loaded in
	Access Access
}

// PointwiseKernel describes a single-op (eager) pointwise kernel: the op,
// how each operand is read, and the output.
type PointwiseKernel struct {
	Op *ir.Op
	// Expr and Label describe a fused kernel instead of Op: its whole
	// expression, and a name unique to it.
	Expr     *ir.Expr
	Label    string
	Operands []Operand
	Compute  ir.Kind
	Out      ir.DType
	// Strided is true when the output or any operand needs N-d indexing:
	// the kernel then takes a Geometry and indexes every tensor through it.
	Strided bool
	// Index32 makes a strided kernel split indices with 32-bit arithmetic
	// (much cheaper on GPUs than 64-bit division); valid when n < 2^31.
	// Offsets are still summed in 64 bits.
	Index32 bool
}

// Name is the kernel's entry point, unique for its configuration.
func (k *PointwiseKernel) Name() string {
	var b strings.Builder
	b.WriteString("gc_")
	b.WriteString(k.label())
	for _, o := range k.Operands {
		b.WriteByte('_')
		if o.Access == ScalarArg {
			b.WriteString("s" + o.Kind.String())
			continue
		}
		b.WriteString(o.DType.String())
		b.WriteByte("dus"[o.Access])
	}
	b.WriteString("_" + k.Compute.String() + "_to_" + k.Out.String())
	if k.Strided {
		b.WriteString("_nd")
		if k.Index32 {
			b.WriteString("32")
		}
	}
	return b.String()
}

// Geometry is the N-d layout a strided kernel indexes by: the iteration
// shape and, per tensor (the output first, then each tensor operand in
// order), strides in elements. It is passed to the kernel by value.
type Geometry struct {
	Rank    int
	Sizes   [MaxRank]int64
	Strides [][MaxRank]int64
}

// Bytes encodes g as the kernel's geometry parameter: struct { long long
// rank; long long size[MaxRank]; long long stride[n][MaxRank]; }.
func (g *Geometry) Bytes() []byte {
	b := make([]byte, 0, 8*(1+MaxRank*(1+len(g.Strides))))
	b = putInt64s(b, int64(g.Rank))
	b = putInt64s(b, g.Sizes[:]...)
	for _, st := range g.Strides {
		b = putInt64s(b, st[:]...)
	}
	return b
}

// putInt64s appends vs as little-endian 64-bit integers, the layout of a
// kernel's long long parameters.
func putInt64s(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// VectorWidth is how many elements a thread of a dense kernel handles.
const VectorWidth = 4

// Source generates the CUDA C of the kernel. Launch it with one thread per
// VectorWidth elements (dense) or per element (strided), grid-stride.
// Parameters, in order: long long n; one pointer per tensor operand; the
// output pointer; one value per scalar operand (of its kind); one value per
// op parameter (of the kind the expression uses it in); then, for dense
// kernels, int aligned (all dense pointers aligned for vector access), and
// for strided kernels the Geometry.
func (k *PointwiseKernel) Source() (string, error) {
	body, err := k.body()
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("// gocompile eager kernel for op %q: %s\n", k.label(), k.doc())
	if k.Op == nil {
		head = fmt.Sprintf("// gocompile fused kernel %s\n", k.label())
	}
	return head + cudaPrelude + body, nil
}

func (k *PointwiseKernel) expr() *ir.Expr {
	if k.Op == nil {
		return k.Expr
	}
	return k.Op.Expr
}

func (k *PointwiseKernel) label() string {
	if k.Op == nil {
		return k.Label
	}
	return k.Op.Name
}

func (k *PointwiseKernel) doc() string {
	if k.Op == nil {
		return k.Expr.String()
	}
	return k.Op.Doc
}

// ParamKinds is the kind of each op parameter the kernel takes.
func (k *PointwiseKernel) ParamKinds() ([]ir.Kind, error) {
	argKinds := make([]ir.Kind, len(k.Operands))
	for i, o := range k.Operands {
		argKinds[i] = o.Kind
	}
	pk, _, err := k.expr().ParamKinds(argKinds, k.Compute)
	return pk, err
}

// body is the kernel's source after the prelude.
func (k *PointwiseKernel) body() (string, error) {
	argKinds := make([]ir.Kind, len(k.Operands))
	for i, o := range k.Operands {
		argKinds[i] = o.Kind
	}
	paramKinds, outKind, err := k.expr().ParamKinds(argKinds, k.Compute)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.label(), err)
	}
	expr, err := k.expr().C(
		func(i int) string { return fmt.Sprintf("a%d", i) },
		func(i int) string { return fmt.Sprintf("p%d", i) },
		argKinds, k.Compute)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.label(), err)
	}

	var b strings.Builder
	// The op's semantics, once, as a device function of the loaded values.
	var fargs []string
	for i, o := range k.Operands {
		fargs = append(fargs, fmt.Sprintf("%s a%d", kindC(o.Kind), i))
	}
	for i, pk := range paramKinds {
		fargs = append(fargs, fmt.Sprintf("%s p%d", kindC(pk), i))
	}
	fmt.Fprintf(&b, "\n// %s = %v\n", k.label(), k.expr())
	fmt.Fprintf(&b, "__device__ __forceinline__ %s op_%s(%s) {\n  return %s;\n}\n\n",
		kindC(outKind), k.label(), strings.Join(fargs, ", "), expr)

	// Kernel signature.
	params := []string{"long long n"}
	ti := 0
	for i, o := range k.Operands {
		if o.Access == ScalarArg {
			continue
		}
		params = append(params, fmt.Sprintf("const %s* __restrict__ x%d", storageC(o.DType), i))
		ti++
	}
	params = append(params, fmt.Sprintf("%s* __restrict__ out", storageC(k.Out)))
	for i, o := range k.Operands {
		if o.Access == ScalarArg {
			params = append(params, fmt.Sprintf("%s s%d", kindC(o.Kind), i))
		}
	}
	for i, pk := range paramKinds {
		params = append(params, fmt.Sprintf("%s p%d", kindC(pk), i))
	}
	mixed := false // a dense kernel with some operands read through the geometry
	for _, o := range k.Operands {
		mixed = mixed || (!k.Strided && o.Access == Strided)
	}
	idx := "long long"
	if k.Index32 {
		idx = "unsigned int"
	}
	if k.Strided || mixed {
		fmt.Fprintf(&b, "struct Geometry { long long rank; long long size[%d]; long long stride[%d][%d]; };\n\n",
			MaxRank, ti+1, MaxRank)
	}
	if mixed {
		fmt.Fprintf(&b, `// gc_offset is the storage offset of flat index i in tensor t of g.
__device__ __forceinline__ long long gc_offset(const Geometry& g, int t, %[1]s i) {
  long long o = 0;
  for (int d = (int)g.rank - 1; d >= 0; d--) {
    %[1]s size = (%[1]s)g.size[d], c = i %% size;
    i /= size;
    o += (long long)c * g.stride[t][d];
  }
  return o;
}

`, idx)
	}
	if k.Strided {
		params = append(params, "Geometry g")
	} else {
		params = append(params, "int aligned")
		if mixed {
			params = append(params, "Geometry g")
		}
	}
	// tensorIndex is each operand's position among the geometry's tensors
	// (the output is 0).
	tensorIndex := map[int]int{}
	ti = 0
	for i, o := range k.Operands {
		if o.Access != ScalarArg {
			ti++
			tensorIndex[i] = ti
		}
	}
	fmt.Fprintf(&b, "extern \"C\" __global__ void %s(\n    %s) {\n", k.Name(), strings.Join(params, ",\n    "))

	call := func(load func(i int, o Operand) string) string {
		var as []string
		for i, o := range k.Operands {
			as = append(as, load(i, o))
		}
		for i := range paramKinds {
			as = append(as, fmt.Sprintf("p%d", i))
		}
		return fmt.Sprintf("op_%s(%s)", k.label(), strings.Join(as, ", "))
	}
	// Uniform operands are read once.
	for i, o := range k.Operands {
		if o.Access == Uniform {
			fmt.Fprintf(&b, "  const %s u%d = %s;\n", kindC(o.Kind), i, loadC(fmt.Sprintf("x%d[0]", i), o.DType, o.Kind))
		}
	}
	fixed := func(i int, o Operand) (string, bool) {
		switch o.Access {
		case Uniform:
			return fmt.Sprintf("u%d", i), true
		case ScalarArg:
			return fmt.Sprintf("s%d", i), true
		}
		return "", false
	}

	if k.Strided {
		fmt.Fprintf(&b, "  for (%[1]s i = (%[1]s)blockIdx.x * blockDim.x + threadIdx.x; i < (%[1]s)n; i += (%[1]s)gridDim.x * blockDim.x) {\n", idx)
		fmt.Fprintf(&b, "    %s rem = i;\n", idx)
		b.WriteString("    long long o_out = 0")
		for i, o := range k.Operands {
			if o.Access == Strided {
				fmt.Fprintf(&b, ", o%d = 0", i)
			}
		}
		b.WriteString(";\n    for (int d = (int)g.rank - 1; d >= 0; d--) {\n")
		fmt.Fprintf(&b, "      %[1]s size = (%[1]s)g.size[d], c = rem %% size;\n      rem /= size;\n      o_out += (long long)c * g.stride[0][d];\n", idx)
		ti = 0
		for i, o := range k.Operands {
			if o.Access == ScalarArg {
				continue
			}
			ti++
			if o.Access == Strided {
				fmt.Fprintf(&b, "      o%d += (long long)c * g.stride[%d][d];\n", i, ti)
			}
		}
		b.WriteString("    }\n")
		expr := call(func(i int, o Operand) string {
			if s, ok := fixed(i, o); ok {
				return s
			}
			return loadC(fmt.Sprintf("x%d[o%d]", i, i), o.DType, o.Kind)
		})
		fmt.Fprintf(&b, "    out[o_out] = %s;\n  }\n}\n", storeC(expr, outKind, k.Out))
		return b.String(), nil
	}

	// Dense: each thread handles VectorWidth consecutive elements, with one
	// vector load per operand when every pointer is aligned for it.
	fmt.Fprintf(&b, "  const long long step = (long long)gridDim.x * blockDim.x * %d;\n", VectorWidth)
	fmt.Fprintf(&b, "  for (long long i0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * %d; i0 < n; i0 += step) {\n", VectorWidth)
	fmt.Fprintf(&b, "    if (aligned && i0 + %d <= n) {\n", VectorWidth)
	for i, o := range k.Operands {
		if o.Access == Dense {
			fmt.Fprintf(&b, "      const V4<%s> v%d = *(const V4<%s>*)(x%d + i0);\n", storageC(o.DType), i, storageC(o.DType), i)
		}
	}
	fmt.Fprintf(&b, "      V4<%s> r;\n      #pragma unroll\n      for (int j = 0; j < %d; j++) {\n", storageC(k.Out), VectorWidth)
	// denseLoad loads every operand at flat index flat: dense ones from vec
	// (the vector path's v<i>.v[j], or x<i>[i]), strided ones through the
	// geometry.
	denseLoad := func(flat, vec string) func(i int, o Operand) string {
		return func(i int, o Operand) string {
			if s, ok := fixed(i, o); ok {
				return s
			}
			if o.Access == Strided {
				return loadC(fmt.Sprintf("x%d[gc_offset(g, %d, (%s)(%s))]", i, tensorIndex[i], idx, flat), o.DType, o.Kind)
			}
			return loadC(fmt.Sprintf(vec, i), o.DType, o.Kind)
		}
	}
	expr = call(denseLoad("i0 + j", "v%d.v[j]"))
	fmt.Fprintf(&b, "        r.v[j] = %s;\n      }\n", storeC(expr, outKind, k.Out))
	fmt.Fprintf(&b, "      *(V4<%s>*)(out + i0) = r;\n", storageC(k.Out))
	b.WriteString("    } else {\n")
	fmt.Fprintf(&b, "      for (long long i = i0; i < n && i < i0 + %d; i++) {\n", VectorWidth)
	expr = call(denseLoad("i", "x%d[i]"))
	fmt.Fprintf(&b, "        out[i] = %s;\n      }\n    }\n  }\n}\n", storeC(expr, outKind, k.Out))
	return b.String(), nil
}
