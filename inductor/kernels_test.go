package inductor

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gocompile/cuda"
	"gocompile/ir"

	"golang.org/x/sync/errgroup"
)

// source is one generated kernel: its name and the part after the prelude.
type source struct {
	name, body string
	full       func() (string, error)
}

// allKernels generates every eager kernel configuration tensor can ask
// for: each pointwise op of the registry in every dtype its type rule
// accepts, dense and strided, with a tensor and with a scalar second
// operand, with row- and column-broadcast operands (32- and 64-bit
// indices), and (two ops) with an unroll of 3; every reduction over every
// input dtype, at two unrolls; every gather.
func allKernels(t *testing.T) []source {
	var out []source
	for _, op := range ir.Ops() {
		if op.Kind != ir.Pointwise {
			continue
		}
		for _, dt := range ir.DTypes {
			n := max(op.Arity, 1)
			operands := make([]ir.Operand, n)
			for i := range operands {
				operands[i] = ir.Operand{DType: dt}
				for _, m := range op.Masks {
					if m == i {
						operands[i].DType = ir.Bool
					}
				}
			}
			target := ir.Attrs{DType: ir.Float16}
			compute, outT, err := op.Types(operands, &target)
			if err != nil {
				continue
			}
			variants := []string{"dense", "strided", "strided32", "row", "col64", "nd1"}
			if n > 1 {
				variants = append(variants, "scalar", "mixed", "tile")
			}
			if n > 2 {
				variants = append(variants, "broadcasts")
			}
			if op == ir.OpGELU || op == ir.OpAdd {
				variants = append(variants, "unroll3")
			}
			for _, variant := range variants {
				k := &PointwiseKernel{Op: op, Compute: compute.Compute(), Out: outT,
					Strided: strings.HasPrefix(variant, "strided") || variant == "mixed" || variant == "nd1",
					Tile:    variant == "tile",
					Rank:    map[string]int{"strided": 3, "strided32": 5, "mixed": 2, "nd1": 1, "tile": 4}[variant],
					Index32: variant == "strided32" || variant == "row" || variant == "broadcasts" || variant == "tile" || variant == "nd1"}
				if variant == "unroll3" {
					k.Unroll = 3
				}
				for i, o := range operands {
					kind := compute.Compute()
					if o.DType == ir.Bool && op.Rule != ir.Compare && len(op.Masks) > 0 && i == op.Masks[0] {
						kind = ir.I64
					}
					acc := Dense
					switch {
					case strings.HasPrefix(variant, "strided"):
						acc = Strided
					case variant == "scalar" && i == n-1 && n > 1:
						acc = ScalarArg
					case variant == "mixed":
						acc = []Access{InnerContiguous, InnerBroadcast, Strided}[i%3] // an N-d kernel's three inner kinds
					case variant == "tile":
						acc = []Access{Tiled, InnerContiguous, InnerBroadcast}[i%3]
					case variant == "nd1":
						acc = InnerContiguous
					case variant == "row" && i == n-1:
						acc = RowBroadcast
					case variant == "col64" && i == n-1:
						acc = ColBroadcast
					case variant == "broadcasts" && i > 0:
						acc = []Access{ColBroadcast, Uniform, RowBroadcast}[(i-1)%3]
					case i > 0:
						acc = Uniform
					}
					k.Operands = append(k.Operands, Operand{DType: o.DType, Kind: kind, Access: acc})
				}
				body, err := k.body()
				if err != nil {
					t.Fatalf("%s: %v", k.Name(), err)
				}
				out = append(out, source{k.Name(), body, k.Source})
			}
		}
	}
	reducers := []ir.Reducer{ir.RSum, ir.RMean, ir.RMax, ir.RMin, ir.RArgMax, ir.RArgMin}
	for _, r := range reducers {
		for _, dt := range ir.DTypes {
			for _, unroll := range []int{0, 1} {
				k := &ReduceKernel{Reducer: r, In: dt, Kind: dt.Compute(), Out: dt, Unroll: unroll}
				if r.IsArg() {
					k.Out = ir.Int64
				}
				out = append(out, source{k.Name(), k.body(), func() (string, error) { return k.Source(), nil }})
			}
		}
	}
	for _, dt := range ir.DTypes {
		for _, idx := range []ir.DType{ir.Int32, ir.Int64} {
			for _, g := range []bool{false, true} {
				k := &IndexKernel{Elem: dt, Index: idx, Gather: g}
				out = append(out, source{k.Name(), k.body(), func() (string, error) { return k.Source(), nil }})
			}
		}
	}
	afterPrelude := func(src string) string { return src[strings.Index(src, cudaPrelude)+len(cudaPrelude):] }
	for _, dt := range ir.DTypes {
		for _, idx := range []ir.DType{ir.Int32, ir.Int64} {
			k := &IndexCopyKernel{Elem: dt, Index: idx}
			out = append(out, source{k.Name(), afterPrelude(k.Source()), func() (string, error) { return k.Source(), nil }})
			if dt == ir.Float32 || dt == ir.Float64 {
				k := &IndexAddKernel{Elem: dt, Index: idx}
				out = append(out, source{k.Name(), afterPrelude(k.Source()), func() (string, error) { return k.Source(), nil }})
			}
		}
	}
	for _, dt := range []ir.DType{ir.Float32, ir.Float16, ir.BFloat16} {
		for _, k := range []*AttentionKernel{
			{Elem: dt, Rows: 8, E: 64, Ev: 64},
			{Elem: dt, Rows: 3, E: 17, Ev: 40, Mask: true, Causal: true},
			{Elem: dt, Rows: 1, E: 96, Ev: 130, Mask: true},
			{Elem: dt, Rows: 2, E: 1024, Ev: 1000},
			{Elem: dt, Rows: 8, E: 64, Ev: 64, Mask: true, MMA: true},
			{Elem: dt, Rows: 3, E: 32, Ev: 40, Mask: true, Causal: true, MMA: true},
			{Elem: dt, Rows: 16, E: 128, Ev: 128, MMA: true},
			{Elem: dt, Rows: 5, E: 48, Ev: 48, Causal: true, MMA: true},
			{Elem: dt, Rows: 8, E: 16, Ev: 32, MMA: true},
		} {
			if k.MMA && !AttentionMMAFits(k.Elem, k.Rows, k.E, k.Ev) {
				continue
			}
			out = append(out, source{k.Name(), afterPrelude(k.Source()), func() (string, error) { return k.Source(), nil }})
		}
	}
	for _, dt := range []ir.DType{ir.Float16, ir.BFloat16} {
		for _, k := range []*TiledAttentionKernel{
			{Elem: dt, E: 64, Ev: 64, Causal: true},
			{Elem: dt, E: 16, Ev: 128, Mask: true},
			{Elem: dt, E: 128, Ev: 32, Mask: true, Causal: true},
		} {
			out = append(out, source{k.Name(), afterPrelude(k.Source()), func() (string, error) { return k.Source(), nil }})
		}
	}
	// Horizontal groups: one kernel, several outputs of other types.
	for _, mode := range []string{"dense", "nd", "tile"} {
		accesses := map[string][]Access{
			"dense": {Dense, RowBroadcast, Uniform},
			"nd":    {InnerContiguous, Strided, InnerBroadcast, Uniform},
			"tile":  {Tiled, InnerContiguous, Strided, InnerBroadcast},
		}[mode]
		for _, access := range accesses {
			first := map[string]Access{"dense": Dense, "nd": InnerContiguous, "tile": Tiled}[mode]
			k := &PointwiseKernel{Expr: ir.Mul(ir.Exp(ir.Arg(0)), ir.Arg(1)), Label: "group", Compute: ir.F32, Out: ir.Float32,
				Operands: []Operand{{DType: ir.Float32, Kind: ir.F32, Access: first}, {DType: ir.Float16, Kind: ir.F32, Access: access}},
				Extra: []ExtraOutput{{Expr: ir.Sin(ir.Arg(0)), Compute: ir.F32, Out: ir.BFloat16},
					{Expr: ir.Add(ir.Arg(0), ir.Arg(1)), Compute: ir.F32, Out: ir.Float64}},
				Strided: mode == "nd", Tile: mode == "tile", Rank: 3, Index32: true}
			out = append(out, source{k.Name(), mustBody(t, k), k.Source})
		}
	}
	// A combo: the same expression over operands read two ways (its two
	// device functions must not clash), and another expression.
	adam := ir.Add(ir.Mul(ir.Arg(0), ir.Arg(2)), ir.Arg(1))
	combo := &ComboKernel{Members: []PointwiseKernel{
		{Expr: adam, Label: "m", Compute: ir.F32, Out: ir.Float32, Index32: true, Operands: []Operand{
			{DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.Float32, Kind: ir.F32, Access: Uniform}}},
		{Expr: adam, Label: "m", Compute: ir.F32, Out: ir.Float32, Index32: true, Operands: []Operand{
			{DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.Float32, Kind: ir.F32, Access: Uniform}, {DType: ir.Float32, Kind: ir.F32, Access: Uniform}}},
		{Expr: adam, Label: "m", Compute: ir.F32, Out: ir.Float32, Index32: true, Operands: []Operand{
			{DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.Float32, Kind: ir.F32, Access: Uniform}}},
		{Expr: ir.Sqrt(ir.Arg(0)), Label: "v", Compute: ir.F32, Out: ir.BFloat16, Operands: []Operand{
			{DType: ir.BFloat16, Kind: ir.F32, Access: Dense}}},
		// A unit of three outputs, the last reading the first's value.
		{Expr: adam, Label: "unit", Compute: ir.F32, Out: ir.Float32, Operands: []Operand{
			{DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.Float32, Kind: ir.F32, Access: Dense},
			{DType: ir.Float32, Kind: ir.F32, Access: Uniform}, {DType: ir.BFloat16, Kind: ir.F32, Access: Dense}},
			Extra: []ExtraOutput{{Expr: ir.Mul(ir.Arg(3), ir.Arg(3)), Compute: ir.F32, Out: ir.BFloat16},
				{Expr: ir.Sub(ir.Arg(3), adam), Compute: ir.F32, Out: ir.BFloat16}}},
		// A dense member broadcasting a row and a column (inner sizes).
		{Expr: ir.Mul(ir.Add(ir.Arg(0), ir.Arg(1)), ir.Arg(2)), Label: "bcast", Compute: ir.F32, Out: ir.Float32, Index32: true, Operands: []Operand{
			{DType: ir.Float32, Kind: ir.F32, Access: Dense}, {DType: ir.BFloat16, Kind: ir.F32, Access: RowBroadcast},
			{DType: ir.Float32, Kind: ir.F32, Access: ColBroadcast}}},
		// N-d members (a rotation's halves into strided outputs), two of
		// one expression at other ranks and index widths.
		{Expr: ir.Sub(ir.Mul(ir.Arg(0), ir.Arg(1)), ir.Mul(ir.Arg(2), ir.Arg(3))), Label: "rot", Compute: ir.F32, Out: ir.BFloat16,
			Strided: true, OutStrided: true, Rank: 3, Index32: true, Operands: []Operand{
				{DType: ir.BFloat16, Kind: ir.F32, Access: InnerContiguous}, {DType: ir.Float32, Kind: ir.F32, Access: InnerBroadcast},
				{DType: ir.BFloat16, Kind: ir.F32, Access: Strided}, {DType: ir.Float32, Kind: ir.F32, Access: Uniform}},
			Extra: []ExtraOutput{{Expr: ir.Add(ir.Arg(0), ir.Arg(2)), Compute: ir.F32, Out: ir.BFloat16}}},
		{Expr: ir.Sub(ir.Mul(ir.Arg(0), ir.Arg(1)), ir.Mul(ir.Arg(2), ir.Arg(3))), Label: "rot", Compute: ir.F32, Out: ir.BFloat16,
			Strided: true, Rank: 2, Operands: []Operand{
				{DType: ir.BFloat16, Kind: ir.F32, Access: InnerContiguous}, {DType: ir.Float32, Kind: ir.F32, Access: InnerBroadcast},
				{DType: ir.BFloat16, Kind: ir.F32, Access: InnerContiguous}, {DType: ir.Float32, Kind: ir.F32, Access: InnerBroadcast}}},
	}}
	if src, err := combo.Source(); err != nil {
		t.Fatal(err)
	} else {
		out = append(out, source{combo.Name(), afterPrelude(src), combo.Source})
	}
	// Fused 16-bit intermediates, rounded as their store would be.
	for _, via := range []ir.DType{ir.Float16, ir.BFloat16} {
		for _, kind := range []ir.Kind{ir.F32, ir.F64} {
			dt := map[ir.Kind]ir.DType{ir.F32: ir.Float32, ir.F64: ir.Float64}[kind]
			k := &PointwiseKernel{Expr: ir.Neg(ir.CastVia(ir.Exp(ir.Arg(0)), via, kind)), Label: fmt.Sprintf("rounded_%v_%v", via, kind),
				Compute: kind, Out: via, Operands: []Operand{{DType: dt, Kind: kind, Access: Dense}}}
			out = append(out, source{k.Name(), mustBody(t, k), k.Source})
		}
	}
	return out
}

func mustBody(t *testing.T, k *PointwiseKernel) string {
	t.Helper()
	b, err := k.body()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKernelNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	ks := allKernels(t)
	if len(ks) < 300 {
		t.Fatalf("only %d kernel configurations", len(ks))
	}
	for _, k := range ks {
		if seen[k.name] {
			t.Errorf("two configurations are named %s", k.name)
		}
		seen[k.name] = true
	}
}

// Generated kernels name their op and carry its semantics once.
func TestPointwiseSourceReadable(t *testing.T) {
	k := &PointwiseKernel{Op: ir.OpGELU, Compute: ir.F32, Out: ir.BFloat16,
		Operands: []Operand{{DType: ir.BFloat16, Kind: ir.F32, Access: Dense}}}
	src, err := k.Source()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`eager kernel for op "gelu"`,
		"// gelu = mul(mul(0.5, x0), add(1, erf(mul(x0, 0.7071067811865476))))",
		"erff((a0 * 0.707106769f))",
		"V4<gc_bf16>",
		"gc_st_bf16", "gc_ld_bf16",
		"extern \"C\" __global__ void gc_gelu_bfloat16d_f32_to_bfloat16(",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
	if strings.Count(src, "erff(") != 1 {
		t.Error("the op's expression should appear once, in its device function")
	}
}

// Every generated kernel is valid C++ (CUDA built-ins stubbed), checked
// with the host compiler: the cheap half of what NVRTC checks on a GPU.
func TestGeneratedSourcesParseAsCpp(t *testing.T) { parseAsCpp(t, allKernels(t)) }

// parseAsCpp checks that the kernels parse as C++ with the host compiler,
// in one translation unit (each in its namespace, as compileOnGPU puts
// them in one module).
func parseAsCpp(t *testing.T, ks []source) {
	t.Helper()
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	var b strings.Builder
	b.WriteString(cppStubs)
	b.WriteString(strings.ReplaceAll(cudaPrelude, "asm(", "gc_asm("))
	for i, k := range ks {
		fmt.Fprintf(&b, "\nnamespace k%d {\n%s\n#undef THREADS\n#undef VEC\n#undef PERSIST\n}\n", i, k.body)
	}
	path := filepath.Join(t.TempDir(), "kernels.cpp")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cxx, "-std=c++17", "-fsyntax-only", "-w", path).CombinedOutput()
	if err != nil {
		lines := strings.Split(string(out), "\n")
		t.Fatalf("generated kernels do not parse:\n%s", strings.Join(lines[:min(len(lines), 40)], "\n"))
	}
}

// cppStubs stand in for the CUDA built-ins so the host compiler can parse
// generated kernels.
const cppStubs = `#include <cmath>
#include <cstring>
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __restrict__
#define __align__(n) alignas(n)
#define __launch_bounds__(n)
#define __cluster_dims__(...)
#define __shared__ static
#define GC_EXTERN_SHARED extern
#define gc_asm(...) ((void)0)
struct gc_dim3 { unsigned x, y, z; };
static gc_dim3 blockIdx, threadIdx, gridDim, blockDim;
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
template <typename T> T __shfl_down_sync(unsigned, T v, int) { return v; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
struct float4 { float x, y, z, w; };
struct uint4 { unsigned int x, y, z, w; };
struct uint2 { unsigned int x, y; };
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = (unsigned long long)y << 32 | x, r = 0;
  for (int i = 0; i < 4; i++) r |= ((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return (unsigned)r;
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct float2 { float x, y; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <typename T> T __ldcg(const T* p) { return *p; }
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) { auto o = *p; *p += v; return o; }
inline float atomicAdd(float* p, float v) { auto o = *p; *p += v; return o; }
inline double atomicAdd(double* p, double v) { auto o = *p; *p += v; return o; }
template <typename T> T __ldg(const T* p) { return *p; }
template <typename T> T __shfl_xor_sync(unsigned, T v, int) { return v; }
template <typename T> T __shfl_sync(unsigned, T v, int) { return v; }
inline void __syncthreads() {}
inline int __syncthreads_and(int p) { return p; }
inline int atomicMin(int* p, int v) { auto o = *p; *p = std::min(o, v); return o; }
inline int atomicMax(int* p, int v) { auto o = *p; *p = std::max(o, v); return o; }
inline int __syncthreads_or(int p) { return p; }
inline bool __any_sync(unsigned, bool p) { return p; }
inline unsigned long long __cvta_generic_to_shared(const void* p) { return (unsigned long long)p; }
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) { auto o = *p; *p = v; return o; }
using std::min; using std::max;
inline float rsqrtf(float x) { return 1 / std::sqrt(x); }
inline double rsqrt(double x) { return 1 / std::sqrt(x); }
`

// Every generated kernel compiles with NVRTC and loads on the GPU.
func TestGPUKernelsCompile(t *testing.T) {
	ks := allKernels(t)
	if testing.Short() {
		ks = ks[:40]
	}
	compileOnGPU(t, ks)
}

// compileOnGPU compiles the kernels with NVRTC and loads them, many to a
// module (one NVRTC call each) so that hundreds take seconds; a module
// that fails is compiled kernel by kernel to name the culprit.
func compileOnGPU(t *testing.T, ks []source) {
	t.Helper()
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
	dev, err := cuda.GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	load := func(src, name string, names []string) error {
		res, err := cuda.Compile(src, name+".cu", dev)
		if err != nil {
			return err
		}
		mod, err := dev.LoadCompiled(res)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		for _, n := range names {
			if _, err := mod.Function(n); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
		return nil
	}
	// NVRTC compiles one program on one thread: batches go to all cores.
	const perModule = 40
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for lo := 0; lo < len(ks); lo += perModule {
		batch := ks[lo:min(lo+perModule, len(ks))]
		g.Go(func() error {
			var b strings.Builder
			b.WriteString(cudaPrelude)
			var names []string
			for i, k := range batch {
				fmt.Fprintf(&b, "\nnamespace k%d {\n%s\n#undef THREADS\n#undef VEC\n#undef PERSIST\n}\n", i, k.body)
				names = append(names, k.name)
			}
			if load(b.String(), fmt.Sprintf("batch%d", lo), names) == nil {
				return nil
			}
			for _, k := range batch {
				src, err := k.full()
				if err == nil {
					err = load(src, k.name, []string{k.name})
				}
				if err != nil {
					t.Errorf("%s: %v", k.name, err)
				}
			}
			return nil
		})
	}
	g.Wait()
}

// Geometry parameters are laid out as the kernels' structs: long longs,
// little-endian, in declaration order.
func TestGeometryBytes(t *testing.T) {
	g := Geometry{Rank: 2, Strides: make([][MaxRank]int64, 2)}
	g.Sizes[0], g.Sizes[1] = 3, 5
	g.Strides[1][1] = -7
	b := g.Bytes()
	word := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	if len(b) != 8*(1+MaxRank*3) || word(0) != 2 || word(1) != 3 || word(2) != 5 || word(1+MaxRank+MaxRank+1) != -7 {
		t.Fatalf("geometry bytes: %v", b)
	}
	r := ReduceGeometry{OuterRank: 1, InnerRank: 2}
	r.InnerStr[1] = 9
	rb := r.Bytes()
	if len(rb) != 8*(2+4*MaxRank) || int64(binary.LittleEndian.Uint64(rb[8*(1+2*MaxRank):])) != 2 ||
		int64(binary.LittleEndian.Uint64(rb[8*(2+3*MaxRank+1):])) != 9 {
		t.Fatalf("reduce geometry bytes: %v", rb)
	}
}
