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

// colCase is one reduction of TestColumnReductionsOnCPU.
type colCase struct {
	name             string
	r                ir.Reducer
	shape            []int
	red              []bool
	in               layoutView
	out              ir.DType
	plan             colReducePlan
	keptShape        []int
	keptSt, redSt    []int
	redShape         []int
	src, call, inBuf string
}

// Eager column reductions compute the right values over random layouts:
// ranks 1 to 4, any set of reduced dims, permuted, padded and offset
// inputs, every floating dtype, sums, means, extrema and arg extrema, in
// both the column and the row form, split across blocks or not. Each case
// is planned by planColReduce exactly as gpuReduceColumns plans it, and its
// CUDA C runs on the CPU (compiled with g++, one thread per GPU thread, a
// barrier for __syncthreads) against a float64 reference. Values are small
// integers, so sums are exact; arg reductions must return the first index
// of the extremum.
func TestColumnReductionsOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	defer func(n int) { colShortRunOutputs = n }(colShortRunOutputs)
	colShortRunOutputs = 16 // short unit-stride runs take the column form at test sizes
	ncases := 90
	if testing.Short() {
		ncases = 30
	}
	r := rand.New(rand.NewPCG(17, 2026))
	sizes := []int{1, 2, 3, 5, 7, 16, 17, 33, 64, 100}
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	reducers := []ir.Reducer{ir.RSum, ir.RMean, ir.RMax, ir.RMin, ir.RArgMax, ir.RArgMin}
	var cases []*colCase
	forms := map[string]int{}
	for len(cases) < ncases {
		ci := len(cases)
		rank := 1 + r.IntN(4)
		var shape []int
		n := 1
		for range rank {
			s := sizes[r.IntN(len(sizes))]
			if n*s > 30000 {
				s = 1
			}
			shape = append(shape, s)
			n *= s
		}
		switch ci % 10 {
		case 0: // a long reduced range over few outputs: split
			shape = []int{1 + r.IntN(3), 2000 + r.IntN(6000)}
			rank = 2
		case 5: // the same over two contiguous dims: the row form, split
			shape = []int{1 + r.IntN(3), 70 + r.IntN(40), 120 + r.IntN(100)}
			rank = 3
		}
		c := &colCase{name: fmt.Sprintf("case%d", ci), shape: shape, r: reducers[r.IntN(len(reducers))]}
		c.red = make([]bool, rank)
		any := false
		for !any {
			for d := range c.red {
				c.red[d] = r.IntN(2) == 0
				any = any || c.red[d]
			}
		}
		permute := r.IntN(2) == 0
		switch ci % 10 {
		case 0:
			c.red = []bool{true, false}
		case 5:
			c.red, permute = []bool{false, true, true}, false
		}
		dt := dtypes[r.IntN(len(dtypes))]
		c.in = randomView(r, shape, dt, make([]bool, rank), permute)
		k := ir.F32
		c.out = ir.Float32
		if dt == ir.Float64 {
			k, c.out = ir.F64, ir.Float64
		}
		if c.r.IsArg() {
			c.out = ir.Int64
		}
		for d := range shape {
			if c.red[d] {
				c.redShape = append(c.redShape, shape[d])
				c.redSt = append(c.redSt, c.in.strides[d])
			} else {
				c.keptShape = append(c.keptShape, shape[d])
				c.keptSt = append(c.keptSt, c.in.strides[d])
			}
		}
		vector := func(geo *inductor.ColGeometry) int {
			widest := max(1, min(8, 16/dt.Size()))
			return colVector(geo, 0, c.in.offset, widest)
		}
		p, ok := planColReduce(c.r, dt, k, c.out, c.keptShape, c.keptSt, c.redShape, c.redSt, vector)
		if !ok {
			continue // the row form's kernel: not a column kernel
		}
		if len(cases)%4 == 3 { // the 64-bit form too
			p.kern.Col.Index32 = false
		}
		c.plan = p
		form := "column"
		if p.kern.Rows {
			form = "rows"
		}
		if p.parts > 1 {
			form += "-split"
		}
		if p.kern.Vec > 1 {
			form += fmt.Sprintf("-vec%d", p.kern.Vec)
		}
		forms[form]++
		if !p.kern.Col.Index32 {
			forms["index64"]++
		}
		c.src = harnessSource(p.kern.Source())
		cases = append(cases, c)
	}
	required := []string{"column", "rows", "column-split", "rows-split", "index64"}
	if !testing.Short() { // the vector widths: too few cases for each in -short
		required = append(required, "column-vec2", "column-vec4", "column-vec8")
	}
	for _, f := range required {
		if forms[f] == 0 {
			t.Errorf("no case ran the %s form: %v", f, forms)
		}
	}
	t.Logf("forms: %v", forms)

	dir := t.TempDir()
	var prog strings.Builder
	prog.WriteString(harnessStubs)
	want := map[string][]float64{}
	for _, c := range cases {
		data := make([]float64, c.in.storage)
		var buf []byte
		for e := range data {
			data[e] = float64(r.IntN(17) - 8)
			buf = append(buf, encode(c.in.dt, data[e])...)
		}
		c.inBuf = c.name + "_in.bin"
		if err := os.WriteFile(filepath.Join(dir, c.inBuf), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		want[c.name] = colReference(c, data)

		p := c.plan
		nOut, nRed := ir.Numel(c.keptShape), ir.Numel(c.redShape)
		bx, by := p.kern.Block()
		var lits []string
		for _, x := range p.geo.Bytes() {
			lits = append(lits, fmt.Sprint(x))
		}
		var call strings.Builder
		fmt.Fprintf(&call, "  {\n    using namespace %s;\n", c.name)
		fmt.Fprintf(&call, "    char* x = load(dir, %q, %d);\n", c.inBuf, c.in.storage*c.in.dt.Size())
		fmt.Fprintf(&call, "    std::vector<%s> out(%d);\n    std::vector<Acc> partial(%d);\n", harnessElem[c.out], nOut, nOut*p.parts)
		fmt.Fprintf(&call, "    static const unsigned char gb[] = {%s};\n    ColGeometry g;\n    static_assert(sizeof g == sizeof gb);\n    std::memcpy(&g, gb, sizeof g);\n", strings.Join(lits, ","))
		fmt.Fprintf(&call, "    launch2(%d, %d, %d, %d, [&] { %s(%d, %d, %d, (const %s*)(x + %d), out.data(), partial.data(), g); });\n",
			p.tiles(), p.parts, bx, by, p.kern.Name(), nOut, nRed, p.chunk, harnessElem[c.in.dt], c.in.offset*c.in.dt.Size())
		if p.parts > 1 {
			fmt.Fprintf(&call, "    launch2(%d, 1, %d, %d, [&] { %s_final(%d, %d, %d, partial.data(), out.data(), g); });\n",
				p.finalTiles(), bx, by, p.kern.Name(), nOut, p.parts, nRed)
		}
		fmt.Fprintf(&call, "    save(dir, %q, (const char*)out.data(), %d);\n  }\n", c.name+"_out.bin", nOut*c.out.Size())
		fmt.Fprintf(&prog, "\nnamespace %s {\n%s\n}\n", c.name, c.src)
		c.call = call.String()
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n")
	for _, c := range cases {
		prog.WriteString(c.call)
	}
	prog.WriteString("  return 0;\n}\n")
	runHarness(t, cxx, []string{"-std=c++20", "-O1", "-w", "-pthread"}, dir, prog.String())
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(dir, c.name+"_out.bin"))
		if err != nil {
			t.Fatal(err)
		}
		w := want[c.name]
		es := c.out.Size()
		for o := range w {
			got := decode(c.out, b[o*es:])
			if math.Abs(got-w[o]) > 1e-6*math.Max(1, math.Abs(w[o])) {
				t.Errorf("%s: %v over dims %v of %v (strides %v, %v): %s (rows %v) on (%d,%d) blocks: output %d is %v, want %v",
					c.name, c.r, c.red, c.shape, c.in.strides, c.in.dt, c.plan.kern.Name(), c.plan.kern.Rows, c.plan.tiles(), c.plan.parts, o, got, w[o])
				break
			}
		}
	}
}

// colReference reduces the case's input data in float64, outputs in the
// kept dims' row-major order, arg reductions giving the first index of
// the extremum in the reduced dims' row-major order.
func colReference(c *colCase, data []float64) []float64 {
	nOut, nRed := ir.Numel(c.keptShape), ir.Numel(c.redShape)
	w := make([]float64, nOut)
	coord := func(i int, shape []int) []int {
		idx := make([]int, len(shape))
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
		return idx
	}
	for o := range nOut {
		ko := coord(o, c.keptShape)
		var acc float64
		best := -1
		for ri := range nRed {
			ro := coord(ri, c.redShape)
			off := c.in.offset
			for d, i := range ko {
				off += i * c.keptSt[d]
			}
			for d, i := range ro {
				off += i * c.redSt[d]
			}
			v := data[off]
			switch c.r {
			case ir.RSum, ir.RMean:
				acc += v
			case ir.RMax, ir.RArgMax:
				if best < 0 || v > acc {
					acc, best = v, ri
				}
			case ir.RMin, ir.RArgMin:
				if best < 0 || v < acc {
					acc, best = v, ri
				}
			}
		}
		switch c.r {
		case ir.RMean:
			acc /= float64(nRed)
		case ir.RArgMax, ir.RArgMin:
			acc = float64(best)
		}
		w[o] = acc
	}
	return w
}
