package array

import (
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

// The GPU running-sum kernel (inductor.ScanKernel) computes CumSum in both
// forms, a thread a line and a block a line (tiles, a block-wide scan and
// a carry across tiles), along every dim of odd shapes, over strided
// inputs and every dtype but bool. Its CUDA C runs on the CPU (g++, one
// thread per GPU thread, in step at each __syncthreads) against a float64
// reference; values are small integers, so sums round alike. The block
// form runs where a case has few lines: the harness starts a thread per
// GPU thread.
func TestScanKernelOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	r := rand.New(rand.NewPCG(5, 2026))
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64}
	shapes := [][]int{{5}, {3, 300}, {300, 4}, {2, 3, 1100}, {7, 1}, {1, 1025}, {2, 2500}}
	dir := t.TempDir()
	var prog strings.Builder
	prog.WriteString(harnessStubs)
	type scanCase struct {
		name          string
		shape         []int
		d             int
		in, out       ir.DType
		x             []float64 // row-major values
		xStrides      []int     // x's strides (a permuted layout of its storage)
		want          []float64 // row-major running sums
		lines, length int
	}
	var cases []*scanCase
	var calls strings.Builder
	ci := 0
	for _, shape := range shapes {
		for d := range shape {
			c := &scanCase{name: fmt.Sprintf("scan%d", ci), shape: shape, d: d, in: dtypes[ci%len(dtypes)]}
			ci++
			c.out = c.in
			if !c.in.IsFloat() {
				c.out = ir.Int64
			}
			n := ir.Numel(shape)
			c.x = make([]float64, n)
			for i := range c.x {
				c.x[i] = float64(r.IntN(7) - 3)
			}
			c.length, c.lines = shape[d], n/shape[d]
			// x's storage: its dims in reverse order (column-major), so
			// that lines are strided unless d is the storage's innermost.
			c.xStrides = make([]int, len(shape))
			st := 1
			for i := range shape {
				c.xStrides[i] = st
				st *= shape[i]
			}
			storage := make([]byte, n*c.in.Size())
			idx := make([]int, len(shape))
			for e := range n {
				rem, off := e, 0
				for i := len(shape) - 1; i >= 0; i-- {
					idx[i] = rem % shape[i]
					rem /= shape[i]
					off += idx[i] * c.xStrides[i]
				}
				copy(storage[off*c.in.Size():], encode(c.in, c.x[e]))
			}
			if err := os.WriteFile(filepath.Join(dir, c.name+"_x.bin"), storage, 0o644); err != nil {
				t.Fatal(err)
			}
			inner := 1
			for _, s := range shape[d+1:] {
				inner *= s
			}
			c.want = append([]float64(nil), c.x...)
			for o := 0; o < n/(c.length*inner); o++ {
				for k := 1; k < c.length; k++ {
					for i := range inner {
						c.want[(o*c.length+k)*inner+i] += c.want[(o*c.length+k-1)*inner+i]
					}
				}
			}
			k := &inductor.ScanKernel{In: c.in, Out: c.out}
			fmt.Fprintf(&prog, "\nnamespace %s {\n%s\n}\n", c.name, harnessSource(k.Source()))
			// The geometry over the other dims: x's strides, out's
			// (row-major) strides.
			var sizes, xs, os []string
			ost := ir.ContiguousStrides(shape)
			for i, s := range shape {
				if i != d {
					sizes, xs, os = append(sizes, fmt.Sprint(s)), append(xs, fmt.Sprint(c.xStrides[i])), append(os, fmt.Sprint(ost[i]))
				}
			}
			fmt.Fprintf(&calls, `  {
    using namespace %[1]s;
    auto* x = (const %[2]s*)load(dir, "%[1]s_x.bin", %[3]d);
    Geometry g = {%[4]d, {%[5]s}, {{%[6]s}, {%[7]s}}};
    std::vector<%[8]s> a(%[9]d), b(%[9]d);
    launch(%[10]d, 32, false, [&] { %[11]s_thread(%[10]d, %[12]d, x, a.data(), %[13]d, %[14]d, g); });
    if (%[10]d <= 64) launch(2, %[15]d, true, [&] { %[11]s_block(%[10]d, %[12]d, x, b.data(), %[13]d, %[14]d, g); });
    save(dir, "%[1]s_thread.bin", (const char*)a.data(), %[16]d);
    save(dir, "%[1]s_block.bin", (const char*)b.data(), %[16]d);
  }
`, c.name, harnessElem[c.in], n*c.in.Size(), len(shape)-1, strings.Join(sizes, ", "), strings.Join(xs, ", "), strings.Join(os, ", "),
				harnessElem[c.out], n, c.lines, k.Name(), c.length, c.xStrides[d], ost[d], inductor.ScanThreads, n*c.out.Size())
			cases = append(cases, c)
		}
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n")
	prog.WriteString(calls.String())
	prog.WriteString("  return 0;\n}\n")
	runHarness(t, cxx, []string{"-std=c++20", "-O1", "-w", "-pthread"}, dir, prog.String())
	for _, c := range cases {
		forms := []string{"thread", "block"}
		if c.lines > 64 { // a block a line runs slowly in the harness
			forms = forms[:1]
		}
		for _, form := range forms {
			b, err := os.ReadFile(filepath.Join(dir, c.name+"_"+form+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			for e, w := range c.want {
				w = float64(roundTo(c.out, w))
				if got := decode(c.out, b[e*c.out.Size():]); got != w {
					t.Errorf("%s (%v to %v, shape %v, dim %d), a %s a line: element %d is %v, want %v", c.name, c.in, c.out, c.shape, c.d, form, e, got, w)
					break
				}
			}
		}
	}
}

// roundTo rounds v to dt's precision, as a kernel's one rounding does.
func roundTo(dt ir.DType, v float64) float64 { return decode(dt, encode(dt, v)) }

// The GPU triangle kernel (inductor.TriangleKernel) keeps the lower or
// upper triangle of batched, strided matrices in every dtype but bool:
// its CUDA C runs on the CPU (g++) against an index reference.
func TestTriangleKernelOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64}
	dir := t.TempDir()
	var prog, calls strings.Builder
	prog.WriteString(harnessStubs)
	type triCase struct {
		name  string
		k     *inductor.TriangleKernel
		shape []int
		diag  int
		want  []float64
	}
	var cases []*triCase
	ci := 0
	for _, shape := range [][]int{{3, 5}, {5, 3}, {2, 4, 7}, {1, 1}} {
		for _, diag := range []int{-1, 0, 2} {
			for _, upper := range []bool{false, true} {
				c := &triCase{name: fmt.Sprintf("tri%d", ci), k: &inductor.TriangleKernel{Elem: dtypes[ci%len(dtypes)], Upper: upper},
					shape: shape, diag: diag}
				ci++
				n, r := ir.Numel(shape), len(shape)
				rows, cols := shape[r-2], shape[r-1]
				// x stored with its last two dims swapped: strided reads.
				xst := ir.ContiguousStrides(shape)
				xst[r-1], xst[r-2] = rows, 1
				storage := make([]byte, n*c.k.Elem.Size())
				c.want = make([]float64, n)
				for e := range n {
					i, j, b := e/cols%rows, e%cols, e/(rows*cols)
					v := float64(e%13 - 6)
					copy(storage[(b*rows*cols+j*rows+i)*c.k.Elem.Size():], encode(c.k.Elem, v))
					if upper && j-i >= diag || !upper && j-i <= diag {
						c.want[e] = v
					}
				}
				if err := os.WriteFile(filepath.Join(dir, c.name+"_x.bin"), storage, 0o644); err != nil {
					t.Fatal(err)
				}
				var sizes, strides []string
				for d, s := range shape {
					sizes, strides = append(sizes, fmt.Sprint(s)), append(strides, fmt.Sprint(xst[d]))
				}
				fmt.Fprintf(&prog, "\nnamespace %s {\n%s\n}\n", c.name, harnessSource(c.k.Source()))
				fmt.Fprintf(&calls, `  {
    using namespace %[1]s;
    auto* x = (const %[2]s*)load(dir, "%[1]s_x.bin", %[3]d);
    Geometry g = {%[4]d, {%[5]s}, {{%[6]s}}};
    std::vector<%[2]s> out(%[7]d);
    launch(2, 32, false, [&] { %[8]s(%[7]d, x, out.data(), %[9]d, g); });
    save(dir, "%[1]s_out.bin", (const char*)out.data(), %[3]d);
  }
`, c.name, harnessElem[c.k.Elem], n*c.k.Elem.Size(), r, strings.Join(sizes, ", "), strings.Join(strides, ", "), n, c.k.Name(), diag)
				cases = append(cases, c)
			}
		}
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n" + calls.String() + "  return 0;\n}\n")
	runHarness(t, cxx, []string{"-std=c++20", "-O1", "-w", "-pthread"}, dir, prog.String())
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(dir, c.name+"_out.bin"))
		if err != nil {
			t.Fatal(err)
		}
		for e, w := range c.want {
			if got := decode(c.k.Elem, b[e*c.k.Elem.Size():]); got != w {
				t.Errorf("%s (%s, shape %v, diagonal %d): element %d is %v, want %v", c.name, c.k.Name(), c.shape, c.diag, e, got, w)
				break
			}
		}
	}
}

// The GPU sort kernel (inductor.SortKernel) gives ArgSort's stable order
// in both directions, with ties and NaN, over strided lines of lengths
// from 1 to SortMax and every dtype but bool: its CUDA C runs on the CPU
// (g++, a thread per GPU thread, in step at each __syncthreads) against
// the host kernel.
func TestSortKernelOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64}
	r := rand.New(rand.NewPCG(9, 2026))
	dir := t.TempDir()
	var prog, calls strings.Builder
	prog.WriteString(harnessStubs)
	type sortCase struct {
		name string
		x    *Array
		desc bool
	}
	var cases []*sortCase
	ci := 0
	for _, L := range []int{1, 5, 300, inductor.SortMax} {
		for _, desc := range []bool{false, true} {
			dt := dtypes[ci%len(dtypes)]
			c := &sortCase{name: fmt.Sprintf("sort%d", ci), desc: desc}
			ci++
			// Two lines of L stored column-major (strided lines), values
			// with ties, a NaN in floating ones.
			const lines = 2
			v := make([]float64, lines*L)
			for i := range v {
				v[i] = float64(r.IntN(9) - 4)
			}
			if dt.IsFloat() && L > 3 {
				v[2] = math.NaN()
				v[4], v[6] = math.Copysign(0, -1), 0 // -0 and 0 tie
			}
			base := newArray(ir.Float64, []int{L, lines})
			copy(base.st.data.([]float64), v)
			typed := newArray(dt, []int{L, lines})
			copyInto(typed, base)
			c.x = Apply(ir.OpPermute, ir.Attrs{Dims: []int{1, 0}}, typed) // [lines, L]: lines one element apart, strided along L
			storage := make([]byte, lines*L*dt.Size())
			for i, f := range vAsStored(typed) {
				copy(storage[i*dt.Size():], encode(dt, f))
			}
			if err := os.WriteFile(filepath.Join(dir, c.name+"_x.bin"), storage, 0o644); err != nil {
				t.Fatal(err)
			}
			P := 1
			for P < L {
				P <<= 1
			}
			k := &inductor.SortKernel{Elem: dt}
			fmt.Fprintf(&prog, "\nnamespace %s {\n%s\n}\n", c.name, harnessSource(k.Source()))
			descArg := 0
			if desc {
				descArg = 1
			}
			fmt.Fprintf(&calls, `  {
    using namespace %[1]s;
    auto* x = (const %[2]s*)load(dir, "%[1]s_x.bin", %[3]d);
    Geometry g = {1, {%[4]d}, {{%[5]d}, {%[6]d}}};
    std::vector<long long> out(%[7]d);
    launch(2, %[8]d, true, [&] { %[9]s(%[4]d, %[6]d, %[10]d, x, out.data(), %[4]d, 1, %[11]d, g); });
    save(dir, "%[1]s_out.bin", (const char*)out.data(), %[7]d * 8);
  }
`, c.name, harnessElem[dt], lines*L*dt.Size(), lines, 1, L, lines*L, inductor.SortThreads, k.Name(), P, descArg)
			cases = append(cases, c)
		}
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n" + calls.String() + "  return 0;\n}\n")
	runHarness(t, cxx, []string{"-std=c++20", "-O1", "-w", "-pthread"}, dir, prog.String())
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(dir, c.name+"_out.bin"))
		if err != nil {
			t.Fatal(err)
		}
		step := 1
		if c.desc {
			step = -1
		}
		want := argsortKernel(ir.OpArgSort, ir.Attrs{Dim: 1, Step: step}, []ir.Value{c.x}).st.data.([]int64)
		for e, w := range want {
			if got := int64(decode(ir.Int64, b[e*8:])); got != w {
				t.Errorf("%s (%v, shape %v, descending %v): element %d is %d, want %d", c.name, c.x.dtype, c.x.shape, c.desc, e, got, w)
				break
			}
		}
	}
}

// vAsStored is a contiguous CPU array's elements as float64, in storage
// order.
func vAsStored(a *Array) []float64 {
	f := newArray(ir.Float64, a.shape)
	copyInto(f, a)
	return f.st.data.([]float64)
}
