package array

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/inductor"
	"gocompile/ir"
)

// layoutView is a strided view over a buffer of its own: element index
// idx is at offset + Σ idx[d]·strides[d] (strides 0 on broadcast dims).
type layoutView struct {
	dt      ir.DType
	storage int // elements
	offset  int
	strides []int
}

// randomView makes a view of shape in dtype dt: its dims laid out in a
// random order (a permuted tensor), the innermost sometimes padded (a
// narrowed one), at a random offset, with the dims of bcast broadcast.
func randomView(r *rand.Rand, shape []int, dt ir.DType, bcast []bool, permute bool) layoutView {
	rank := len(shape)
	order := r.Perm(rank)
	if !permute {
		for d := range order {
			order[d] = d
		}
	}
	return orderedView(r, shape, dt, bcast, order, r.IntN(4)*r.IntN(2))
}

// orderedView is randomView with the dims laid out in order (outermost
// first) at offset.
func orderedView(r *rand.Rand, shape []int, dt ir.DType, bcast []bool, order []int, offset int) layoutView {
	rank := len(shape)
	v := layoutView{dt: dt, strides: make([]int, rank), offset: offset}
	step := 1
	for i := rank - 1; i >= 0; i-- { // order[rank-1] is the innermost in memory
		d := order[i]
		if bcast[d] {
			continue
		}
		v.strides[d] = step
		ext := shape[d]
		if i == rank-1 && r.IntN(3) == 0 {
			ext += 1 + r.IntN(3)
		}
		step *= ext
	}
	v.storage = v.offset + step
	return v
}

// at is the storage index of the element at multi-index idx.
func (v layoutView) at(idx []int) int {
	o := v.offset
	for d, i := range idx {
		o += i * v.strides[d]
	}
	return o
}

// encode stores the small integer x as dt's bytes.
func encode(dt ir.DType, x float64) []byte {
	switch dt {
	case ir.Float32:
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(x)))
	case ir.Float64:
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(x))
	case ir.Float16:
		return binary.LittleEndian.AppendUint16(nil, ir.F32ToF16(float32(x)))
	case ir.BFloat16:
		return binary.LittleEndian.AppendUint16(nil, ir.F32ToBF16(float32(x)))
	case ir.Int32:
		return binary.LittleEndian.AppendUint32(nil, uint32(int32(x)))
	case ir.Int64:
		return binary.LittleEndian.AppendUint64(nil, uint64(int64(x)))
	}
	panic(dt)
}

func decode(dt ir.DType, b []byte) float64 {
	switch dt {
	case ir.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case ir.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case ir.Float16:
		return float64(ir.F16ToF32(binary.LittleEndian.Uint16(b)))
	case ir.BFloat16:
		return float64(ir.BF16ToF32(binary.LittleEndian.Uint16(b)))
	case ir.Int32:
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case ir.Int64:
		return float64(int64(binary.LittleEndian.Uint64(b)))
	}
	panic(dt)
}

// harnessStubs stand in for CUDA's built-ins so generated kernels run on
// the CPU: every thread of a block is a thread of its own, and
// __syncthreads is a barrier across them.
const harnessStubs = `#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __align__(n) alignas(n)
#define __shared__ static
#define __launch_bounds__(n)
struct gc_dim3 { unsigned x, y, z; };
static thread_local gc_dim3 blockIdx, threadIdx;
static gc_dim3 gridDim, blockDim;
static std::barrier<>* gc_bar;
inline void __syncthreads() { gc_bar->arrive_and_wait(); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
inline long long __double_as_longlong(double f) { long long i; std::memcpy(&i, &f, 8); return i; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline float gc_h2f(unsigned short h) { _Float16 x; std::memcpy(&x, &h, 2); return (float)x; }
inline unsigned short gc_f2h(float f) { _Float16 x = (_Float16)f; unsigned short h; std::memcpy(&h, &x, 2); return h; }
using std::min; using std::max;
inline float rsqrtf(float x) { return 1 / std::sqrt(x); }
inline double rsqrt(double x) { return 1 / std::sqrt(x); }

// launch runs f over grid blocks of block threads; with sync, the
// threads of a block run concurrently, in step at each __syncthreads.
template <class F> void launch(unsigned grid, unsigned block, bool sync, F f) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  if (!sync) {
    for (unsigned b = 0; b < grid; b++)
      for (unsigned t = 0; t < block; t++) {
        blockIdx = {b, 0, 0};
        threadIdx = {t, 0, 0};
        f();
      }
    return;
  }
  std::barrier<> bar(block);
  gc_bar = &bar;
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < block; t++)
    ts.emplace_back([&, t] {
      threadIdx = {t, 0, 0};
      for (unsigned b = 0; b < grid; b++) {
        blockIdx = {b, 0, 0};
        f();
        bar.arrive_and_wait();
      }
    });
  for (auto& t : ts) t.join();
}

// launch2 runs f over a grid of gx×gy blocks of bx×by threads, the
// threads of a block concurrently, in step at each __syncthreads.
template <class F> void launch2(unsigned gx, unsigned gy, unsigned bx, unsigned by, F f) {
  gridDim = {gx, gy, 1};
  blockDim = {bx, by, 1};
  const unsigned n = bx * by;
  std::barrier<> bar(n);
  gc_bar = &bar;
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < n; t++)
    ts.emplace_back([&, t] {
      threadIdx = {t % bx, t / bx, 0};
      for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
          blockIdx = {x, y, 0};
          f();
          bar.arrive_and_wait();
        }
    });
  for (auto& t : ts) t.join();
}

// Warp shuffles: __shfl_xor_sync exchanges through a block-wide buffer
// between two barriers, so every thread of the block must call it, as
// row kernels' block_allreduce does; __shfl_down_sync is compiled, never
// run.
template <class T> T __shfl_xor_sync(unsigned, T v, int lane) {
  static T slot[1024];
  const unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  slot[t] = v;
  __syncthreads();
  const T w = slot[t ^ (unsigned)lane];
  __syncthreads();
  return w;
}
template <class T> T __shfl_down_sync(unsigned, T v, int) { std::abort(); return v; }

// load reads a tensor's buffer from dir/name into memory aligned to 64
// bytes.
static char* load(const char* dir, const char* name, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "rb");
  char* p = (char*)aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
  fclose(f);
  return p;
}

static void save(const char* dir, const char* name, const char* p, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
  fclose(f);
}
`

// harnessElem is the C type the harness reads and writes each storage
// dtype as.
var harnessElem = map[ir.DType]string{ir.Float32: "float", ir.Float64: "double", ir.Float16: "unsigned short", ir.BFloat16: "unsigned short",
	ir.Int32: "int", ir.Int64: "long long"}

// harnessSource is a generated kernel's source as the harness compiles it:
// the prelude's inline PTX half conversions replaced by the stubs', and
// entry points in C++ linkage (each case's kernels sit in a namespace).
func harnessSource(src string) string {
	src = strings.ReplaceAll(src, `asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));`, "f = gc_h2f(h);")
	src = strings.ReplaceAll(src, `asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));`, "h = gc_f2h(f);")
	return strings.ReplaceAll(src, `extern "C" `, "")
}

// runHarness compiles the harness program prog with cxx and flags and
// runs it with dir, where it reads its inputs and writes its outputs.
func runHarness(t *testing.T, cxx string, flags []string, dir, prog string) {
	t.Helper()
	cpp := filepath.Join(dir, "kernels.cpp")
	if err := os.WriteFile(cpp, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kernels")
	if out, err := exec.Command(cxx, append(flags, "-o", bin, cpp)...).CombinedOutput(); err != nil {
		lines := strings.Split(string(out), "\n")
		t.Fatalf("generated kernels do not compile:\n%s", strings.Join(lines[:min(len(lines), 40)], "\n"))
	}
	run := exec.Command(bin, dir)
	run.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("kernels failed: %v\n%s", err, out)
	}
}

// layoutCase is one kernel run of TestPointwiseLayoutsOnCPU.
type layoutCase struct {
	name    string
	shape   []int
	views   []layoutView // outputs, then tensor operands
	nout    int
	scalar  bool // the third operand is a number (7)
	kernel  *inductor.PointwiseKernel
	src     string
	call    string
	buffers []string
}

// Generated pointwise kernels compute the right values over random
// layouts: ranks 1 to 5, permuted, narrowed, offset and broadcast
// operands, outputs that are permuted or narrowed views, extra outputs,
// every storage dtype but bool, and a scalar operand. Each case is
// planned by planPointwise exactly as GPUKernelIn plans it, and its CUDA C
// is run on the CPU (compiled with g++, one thread per GPU thread) against
// a float64 reference: values are small integers, exact in every dtype, and
// output elements outside the view must stay untouched. Dense, N-d (with
// head peeling) and tiled kernels all occur.
//
// It runs with the tile edge chosen by the kernels (32 for these dtypes
// but 16-bit ones) and forced to 64; -short runs the first only, with
// fewer cases.
func TestPointwiseLayoutsOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	// AddressSanitizer, where g++ has it, catches reads and writes outside
	// the tensors.
	flags := []string{"-std=c++20", "-O0", "-w", "-pthread"}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe+".cpp", []byte("int main() { return 0; }\n"), 0o644); err == nil &&
		exec.Command(cxx, "-fsanitize=address", "-o", probe, probe+".cpp").Run() == nil {
		flags = append(flags, "-fsanitize=address")
	}
	// UndefinedBehaviorSanitizer's alignment check catches a vector
	// access the GPU would fault on.
	if exec.Command(cxx, "-fsanitize=alignment", "-o", probe, probe+".cpp").Run() == nil {
		flags = append(flags, "-fsanitize=alignment", "-fno-sanitize-recover=alignment")
	}
	edges, cases := []int{0, 64}, 160
	if testing.Short() {
		edges, cases = edges[:1], 60
	}
	defer func(e int) { pointwiseTileEdge = e }(pointwiseTileEdge)
	for _, edge := range edges {
		t.Run(fmt.Sprintf("edge%d", edge), func(t *testing.T) {
			pointwiseTileEdge = edge
			testLayoutsOnCPU(t, cxx, flags, uint64(edge), cases)
		})
	}
}

func testLayoutsOnCPU(t *testing.T, cxx string, flags []string, seed uint64, ncases int) {
	r := rand.New(rand.NewPCG(16, seed))
	sizes := []int{1, 2, 3, 4, 5, 7, 16, 17, 33, 40, 64, 65}
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64}
	var cases []*layoutCase
	modes := map[string]int{}
	for ci := range ncases {
		rank := 1 + r.IntN(5)
		var shape []int
		n := 1
		for range rank {
			s := sizes[r.IntN(len(sizes))]
			if n*s > 40000 {
				s = 1
			}
			shape = append(shape, s)
			n *= s
		}
		if ci%4 == 2 { // two long inner dims
			shape = []int{1 + r.IntN(3), 16 + r.IntN(60), 16 + r.IntN(60)}[r.IntN(2):]
			rank, n = len(shape), ir.Numel(shape)
		}
		if ci%8 == 0 { // long rows of odd length
			shape, rank = []int{1023 + 2*r.IntN(3000)}, 1
			n = shape[0]
		}
		oddBroadcasts := ci%8 == 3 // a dense kernel whose row and column broadcasts repeat every odd number of elements
		groupedTile := ci%8 == 5   // a permuted operand whose contiguous run spans two short dims, an output whose inner dims are short
		if groupedTile {
			shape, rank = []int{3 + r.IntN(5), 6 + r.IntN(7), 8 + r.IntN(9), 8 + r.IntN(9)}, 4
			n = ir.Numel(shape)
		}
		if oddBroadcasts {
			shape, rank = []int{2 + r.IntN(40), 5 + 2*r.IntN(31)}, 2
			n = ir.Numel(shape)
		}
		c := &layoutCase{name: fmt.Sprintf("case%d", ci), shape: shape, scalar: ci%5 == 4}
		noB := make([]bool, rank)
		// The output: contiguous, or a permuted or narrowed view.
		outDT := dtypes[r.IntN(len(dtypes))]
		c.views = append(c.views, randomView(r, shape, outDT, noB, ci%3 == 0))
		if ci%4 == 2 && r.IntN(2) == 0 || oddBroadcasts || groupedTile { // a contiguous output
			c.views[0] = layoutView{dt: outDT, storage: n, strides: ir.ContiguousStrides(shape)}
		}
		if ci%4 == 1 {
			c.views = append(c.views, randomView(r, shape, ir.Float32, noB, false)) // an extra output
		}
		c.nout = len(c.views)
		nin := 3
		if c.scalar {
			nin = 2
		}
		k := &inductor.PointwiseKernel{Label: c.name, Out: outDT}
		k.Expr = ir.Add(ir.Mul(ir.Arg(0), ir.Arg(1)), ir.Arg(2))
		var operands []inductor.Operand
		compute := ir.I64
		for i := range nin {
			dt := dtypes[r.IntN(len(dtypes))]
			if i == 0 && r.IntN(2) == 0 {
				dt = outDT
			}
			bcast := make([]bool, rank)
			if i > 0 {
				for d := range bcast {
					bcast[d] = r.IntN(3) == 0
				}
			}
			// Operands laid out like the output half the time.
			v := randomView(r, shape, dt, bcast, r.IntN(2) == 0)
			if ci%4 == 2 { // the first operand's two inner dims swapped (tiled), the others in order
				order := r.Perm(rank - 2)
				if i == 0 {
					order = append(order, rank-1, rank-2)
				} else {
					order = append(order, rank-2, rank-1)
				}
				v = orderedView(r, shape, dt, bcast, order, 2*r.IntN(2))
			}
			if r.IntN(2) == 0 && c.views[0].offset == 0 && (ci%4 != 2 || i > 0) {
				v = c.views[0]
				v.dt = dt
				for d := range bcast {
					if bcast[d] {
						v.strides[d] = 0
					}
				}
				v.strides = append([]int(nil), v.strides...)
			}
			if groupedTile && i == 0 {
				v = orderedView(r, shape, dt, bcast, []int{3, 2, 1, 0}, 2*r.IntN(2))
			}
			if oddBroadcasts { // dense, a row broadcast, a column broadcast
				v = layoutView{dt: dt, storage: n, strides: ir.ContiguousStrides(shape)}
				switch i {
				case 1:
					v.strides, v.storage = []int{1, 0}, shape[0]
				case 2:
					v.strides, v.storage = []int{0, 1}, shape[1]
				}
			}
			c.views = append(c.views, v)
			operands = append(operands, inductor.Operand{DType: dt, Access: inductor.Strided})
			switch {
			case dt == ir.Float64:
				compute = ir.F64
			case dt.IsFloat() && compute != ir.F64:
				compute = ir.F32
			}
		}
		if c.scalar {
			operands = append(operands, inductor.Operand{Access: inductor.ScalarArg})
		}
		if outDT.IsFloat() && compute == ir.I64 {
			compute = ir.F32
		}
		if outDT == ir.Float64 {
			compute = ir.F64
		}
		for i := range operands {
			operands[i].Kind = compute
		}
		k.Compute = compute
		if c.nout > 1 {
			k.Extra = []inductor.ExtraOutput{{Expr: ir.Add(ir.Arg(0), ir.Arg(2)), Compute: compute, Out: ir.Float32}}
		}
		var strides [][]int
		var lts []layoutTensor
		for ti, v := range c.views {
			strides = append(strides, append([]int(nil), v.strides...))
			lts = append(lts, layoutTensor{uintptr(64*(1000+ti) + v.offset*v.dt.Size()), v.dt.Size()})
		}
		geo, inners, ok := planPointwise(k, shape, strides, c.nout, operands, lts)
		if !ok {
			t.Fatalf("%s: no plan", c.name)
		}
		c.kernel = k
		src, err := k.Source()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.src = harnessSource(src)
		mode := "dense"
		switch {
		case k.Tile && (k.TileA > 1 || k.TileB > 1):
			mode = "tile-grouped"
		case k.Tile:
			mode = "tile"
		case k.Strided && geo.Vec && geo.RowHead:
			mode = "nd-rowhead"
		case k.Strided && geo.Vec && geo.Head > 0:
			mode = "nd-head"
		case k.Strided:
			mode = "nd"
		default:
			for _, in := range inners {
				if in >= 4 && in%4 != 0 { // a broadcast whose vectors cross runs
					mode = "dense-odd-broadcast"
				}
			}
		}
		modes[mode]++
		c.name += "_" + strings.ReplaceAll(mode, "-", "_")

		// The call: pointers (operands, then outputs), the scalar, then the
		// geometry or the dense kernel's parameters.
		var call strings.Builder
		fmt.Fprintf(&call, "  {\n")
		for ti, v := range c.views {
			name := fmt.Sprintf("%s_t%d.bin", c.name, ti)
			c.buffers = append(c.buffers, name)
			fmt.Fprintf(&call, "    char* b%d = load(dir, %q, %d);\n", ti, name, v.storage*v.dt.Size())
		}
		args := []string{fmt.Sprint(n)}
		for ti := c.nout; ti < len(c.views); ti++ {
			v := c.views[ti]
			args = append(args, fmt.Sprintf("(const %s*)(b%d + %d)", harnessElem[v.dt], ti, v.offset*v.dt.Size()))
		}
		for ti := range c.nout {
			v := c.views[ti]
			args = append(args, fmt.Sprintf("(%s*)(b%d + %d)", harnessElem[v.dt], ti, v.offset*v.dt.Size()))
		}
		if c.scalar {
			args = append(args, "7")
		}
		var grid, block int
		if geo != nil {
			gb := k.Bytes(geo)
			var lits []string
			for _, x := range gb {
				lits = append(lits, fmt.Sprint(x))
			}
			fmt.Fprintf(&call, "    static const unsigned char gb[] = {%s};\n", strings.Join(lits, ","))
			fmt.Fprintf(&call, "    %s::GcGeo g;\n    static_assert(sizeof g == sizeof gb);\n    std::memcpy(&g, gb, sizeof g);\n", c.name)
			args = append(args, "g")
			grid, block = k.Launch(geo, 128)
		} else {
			args = append(args, "1")
			for _, in := range inners {
				args = append(args, fmt.Sprint(in))
			}
			block = 128
			grid = (n + k.TileElems(block) - 1) / k.TileElems(block)
		}
		fmt.Fprintf(&call, "    launch(%d, %d, %v, [&] { %s::%s(%s); });\n", grid, block, k.Tile, c.name, k.Name(), strings.Join(args, ", "))
		for ti := range c.nout {
			fmt.Fprintf(&call, "    save(dir, %q, b%d, %d);\n", c.name+fmt.Sprintf("_out%d.bin", ti), ti, c.views[ti].storage*c.views[ti].dt.Size())
		}
		call.WriteString("  }\n")
		c.call = call.String()
		cases = append(cases, c)
	}
	for _, m := range []string{"dense", "dense-odd-broadcast", "nd", "nd-head", "nd-rowhead", "tile", "tile-grouped"} {
		if modes[m] == 0 {
			t.Errorf("no case ran a %s kernel: %v", m, modes)
		}
	}
	t.Logf("kernels: %v", modes)

	// Inputs: small integers; outputs: a sentinel the kernel must keep
	// outside the view.
	dir := t.TempDir()
	const sentinel = 99
	want := map[string][]float64{}
	for _, c := range cases {
		data := make([][]float64, len(c.views))
		for ti, v := range c.views {
			data[ti] = make([]float64, v.storage)
			var buf []byte
			for e := range data[ti] {
				x := float64(sentinel)
				if ti >= c.nout {
					x = float64(r.IntN(17) - 8)
				}
				data[ti][e] = x
				buf = append(buf, encode(v.dt, x)...)
			}
			if err := os.WriteFile(filepath.Join(dir, c.buffers[ti]), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for m := range c.nout {
			w := append([]float64(nil), data[m]...)
			idx := make([]int, len(c.shape))
			for e := 0; e < ir.Numel(c.shape); e++ {
				rem := e
				for d := len(c.shape) - 1; d >= 0; d-- {
					idx[d] = rem % c.shape[d]
					rem /= c.shape[d]
				}
				a := func(i int) float64 {
					if i == 2 && c.scalar {
						return 7
					}
					return data[c.nout+i][c.views[c.nout+i].at(idx)]
				}
				x := a(0)*a(1) + a(2)
				if m == 1 {
					x = a(0) + a(2)
				}
				if c.views[m].dt == ir.Int32 || c.views[m].dt == ir.Int64 {
					x = math.Trunc(x)
				}
				w[c.views[m].at(idx)] = x
			}
			want[fmt.Sprintf("%s_out%d.bin", c.name, m)] = w
		}
	}

	var prog strings.Builder
	prog.WriteString(harnessStubs)
	for _, c := range cases {
		fmt.Fprintf(&prog, "\nnamespace %s {\n%s\n}\n", c.name, c.src)
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n")
	for _, c := range cases {
		prog.WriteString(c.call)
	}
	prog.WriteString("  return 0;\n}\n")
	runHarness(t, cxx, flags, dir, prog.String())
	for _, c := range cases {
		for m := range c.nout {
			name := fmt.Sprintf("%s_out%d.bin", c.name, m)
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			v, w := c.views[m], want[name]
			es := v.dt.Size()
			for e := range w {
				if got := decode(v.dt, b[e*es:]); got != w[e] {
					t.Errorf("%s (%s, shape %v, strides %v) output %d: storage element %d is %v, want %v",
						c.name, c.kernel.Name(), c.shape, layoutStrides(c), m, e, got, w[e])
					break
				}
			}
		}
	}
}

func layoutStrides(c *layoutCase) [][]int {
	var s [][]int
	for _, v := range c.views {
		s = append(s, v.strides)
	}
	return s
}

// BenchmarkPlanPointwise is the host cost of planning a GPU pointwise
// launch (no GPU needed): a contiguous 1-D add, and a transposed one that
// is tiled (with its kernel name and geometry, as GPUKernelIn makes them).
func BenchmarkPlanPointwise(b *testing.B) {
	ops := []inductor.Operand{{DType: ir.Float32, Kind: ir.F32, Access: inductor.Strided}, {DType: ir.Float32, Kind: ir.F32, Access: inductor.Strided}}
	lts := []layoutTensor{{1 << 20, 4}, {2 << 20, 4}, {3 << 20, 4}}
	for _, c := range []struct {
		name    string
		shape   []int
		strides [][]int
	}{
		{"dense", []int{999_983}, [][]int{{1}, {1}, {1}}},
		{"transposed", []int{8192, 8192}, [][]int{{8192, 1}, {1, 8192}, {8192, 1}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			k := &inductor.PointwiseKernel{Op: ir.OpAdd, Compute: ir.F32, Out: ir.Float32}
			b.ReportAllocs()
			for range b.N {
				geo, _, _ := planPointwise(k, c.shape, c.strides, 1, ops, lts)
				_ = k.Name()
				if geo != nil {
					_ = k.Bytes(geo)
				}
			}
		})
	}
}
