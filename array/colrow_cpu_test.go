package array

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/ir"
)

// fusedColCase is one region of TestFusedColumnKernelsOnCPU.
type fusedColCase struct {
	name    string
	shape   []int
	red     []bool
	ins     []layoutView
	out     []int // the output's shape: the kept dims, or the full shape (a root per element)
	outDT   ir.DType
	kern    *inductor.ColKernel
	geo     inductor.ColGeometry
	parts   int
	chunk   int
	nOut    int
	nRed    int
	want    []float64
	src     string
	inBufs  []string
	tol     float64
	program string
}

// Fused column kernels (inductor.ColKernel, the compiled form of row
// regions over any dims) compute what their region means, for every
// launch: the column and the row form, threads from 1 to 256 down a
// range, 1 to 8 outputs a thread, split across blocks or not, over random
// shapes, reduced dims and permuted, padded or offset inputs in every
// floating dtype. The regions: a variance (two stages), a product summed
// (two inputs walked), a softmax over a leading dim (a root per element),
// a mean of a prologue and the silu of a max (an epilogue, which a split
// kernel's final pass applies). Each kernel's CUDA C runs on the CPU
// (g++, one thread per GPU thread) against the eager float64 ops.
func TestFusedColumnKernelsOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	ncases := 75
	if testing.Short() {
		ncases = 20
	}
	r := rand.New(rand.NewPCG(18, 2026))
	sizes := []int{1, 2, 3, 5, 8, 17, 33, 64}
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	programs := []string{"var", "mulsum", "softmax", "meanabs", "silumax"}
	forms := map[string]int{}
	var cases []*fusedColCase
	for ci := range ncases {
		prog := programs[ci%len(programs)]
		rank := 2 + r.IntN(3)
		shape := make([]int, rank)
		n := 1
		for d := range shape {
			shape[d] = sizes[r.IntN(len(sizes))]
			if n*shape[d] > 8000 {
				shape[d] = 2
			}
			n *= shape[d]
		}
		if ci%8 == 1 { // a long range over few outputs
			shape = []int{1 + r.IntN(3), 500 + r.IntN(2000)}
			rank = 2
		}
		red := make([]bool, rank)
		var dims []int
		if prog == "softmax" {
			d := r.IntN(rank - 1) // not the last: a row region over Dims
			red[d], dims = true, []int{d}
			shape[d] = max(shape[d], 2)
		} else {
			for len(dims) == 0 || len(dims) == rank {
				dims = dims[:0]
				for d := range red {
					red[d] = r.IntN(2) == 0
					if red[d] {
						dims = append(dims, d)
					}
				}
			}
			if ci%8 == 1 {
				red, dims = []bool{false, true}, []int{1}
			}
			for _, d := range dims { // a reduction over a dim of 1 is a view, not a row region
				shape[d] = max(shape[d], 2)
			}
		}
		dt := dtypes[r.IntN(len(dtypes))]
		if (prog == "meanabs" || prog == "mulsum" || prog == "silumax") && dt.Size() == 2 {
			dt = ir.Float32 // a 16-bit prologue or epilogue is its own region: its value is rounded as stored
		}
		c := &fusedColCase{name: fmt.Sprintf("case%d", ci), shape: shape, red: red, program: prog, outDT: dt}
		region, nin := fusedColRegion(t, prog, shape, dims, dt)
		if region.Row == nil || !slices.Equal(region.Row.ReducedDims(), dims) {
			t.Fatalf("%s: %s over %v of %v: not one row region over those dims", c.name, prog, dims, shape)
		}
		for range nin {
			c.ins = append(c.ins, randomView(r, shape, dt, make([]bool, rank), r.IntN(2) == 0))
		}

		// The geometry, as runDimsGPU lays it out: the inputs, then the
		// contiguous output.
		c.out = ir.ReduceShape(shape, dims, false)
		if region.Expr != nil {
			c.out = shape
		}
		outStrides := make([]int, rank)
		for d, st := rank-1, 1; d >= 0; d-- {
			if red[d] && region.Expr == nil {
				continue
			}
			outStrides[d] = st
			st *= shape[d]
		}
		var strides [][]int
		for _, v := range c.ins {
			strides = append(strides, v.strides)
		}
		geo, column, ok := ColLayout(shape, red, append(strides, outStrides), 0, true)
		if !ok {
			t.Fatalf("%s: no column layout", c.name)
		}
		c.geo = geo
		c.nOut, c.nRed = ir.Numel(ir.ReduceShape(shape, dims, false)), 1
		for _, d := range dims {
			c.nRed *= shape[d]
		}

		// A launch picked at random among the valid ones.
		k := inductor.NewColKernel(region)
		k.Rows = !column && r.IntN(4) != 0 || r.IntN(4) == 0
		kr := geo.KeptRank - 1
		maxVec := 8
		for i, v := range c.ins {
			acc := inductor.ColStrided
			if geo.KeptStride[i][kr] == 1 {
				acc = inductor.ColVec
				maxVec = min(maxVec, colVector(&geo, i, v.offset, max(1, min(8, 16/dt.Size()))))
			}
			k.Access = append(k.Access, acc)
		}
		k.Vec = 1
		if !k.Rows {
			for _, w := range []int{8, 4, 2} {
				if w <= maxVec && int(geo.KeptSize[kr])%w == 0 && r.IntN(3) != 0 {
					k.Vec = w
					break
				}
			}
		}
		if k.Vec == 1 {
			for i := range k.Access {
				if k.Access[i] == inductor.ColVec {
					k.Access[i] = inductor.ColStrided
				}
			}
		}
		k.TY = 1 << r.IntN(9)
		k.TX = max(1, (256/k.TY)>>r.IntN(3))
		c.parts, c.chunk = 1, c.nRed
		if k.Row.CanSplit() && r.IntN(2) == 0 {
			c.parts = 1 + r.IntN(4)
			c.chunk = (c.nRed + c.parts - 1) / c.parts
			c.parts = (c.nRed + c.chunk - 1) / c.chunk
			k.Split = c.parts > 1
		}
		// 32-bit indices where they fit, and now and then the 64-bit
		// form regardless, so that both are checked.
		k.Shape = geo.Shape(c.nOut, c.nRed)
		if r.IntN(4) == 0 {
			k.Shape.Index32 = false
		}
		c.kern = k
		src, err := k.Source()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.src = harnessSource(src)
		form := map[bool]string{false: "column", true: "rows"}[k.Rows]
		if k.Split {
			form += "-split"
		}
		if k.Vec > 1 {
			form += "-vec"
		}
		if region.Expr != nil {
			form += "-root"
		}
		if len(k.Row.Stages) > 1 {
			form += "-stages"
		}
		forms[form]++
		if !k.Shape.Index32 {
			forms["index64"]++
		}
		if k.Shape.KeptRank > 1 && k.Shape.RedRank > 1 {
			forms["ranks2+2"]++
		}
		if k.Split && len(k.Row.Stages) > 1 {
			forms["split-epilogue"]++
		}
		c.tol = map[ir.DType]float64{ir.Float32: 1e-5, ir.Float64: 1e-12, ir.Float16: 4e-3, ir.BFloat16: 2e-2}[dt]
		cases = append(cases, c)
	}
	for _, f := range []string{"column", "rows", "column-split", "rows-split", "column-vec", "column-stages", "rows-stages", "column-root-stages", "rows-root-stages", "split-epilogue", "index64", "ranks2+2"} {
		if forms[f] == 0 && !testing.Short() {
			t.Errorf("no case ran the %s form: %v", f, forms)
		}
	}
	t.Logf("forms: %v", forms)

	dir := t.TempDir()
	var prog strings.Builder
	prog.WriteString(harnessStubs)
	var calls strings.Builder
	for _, c := range cases {
		// Inputs: small values, the reference from the eager float64 ops
		// over their logical values.
		var logical []*Array
		for i, v := range c.ins {
			name := fmt.Sprintf("%s_in%d.bin", c.name, i)
			logical = append(logical, writeHarnessInput(t, r, dir, name, v, c.shape))
			c.inBufs = append(c.inBufs, name)
		}
		c.want = fusedColReference(c, logical)

		k := c.kern
		bx, by := k.Block()
		var lits []string
		for _, x := range c.geo.Bytes() {
			lits = append(lits, fmt.Sprint(x))
		}
		acc := "float"
		if k.Row.Stages[0].Compute == ir.F64 {
			acc = "double"
		}
		nOutElems := ir.Numel(c.out)
		fmt.Fprintf(&calls, "  {\n    using namespace %s;\n", c.name)
		args := []string{fmt.Sprint(c.nOut), fmt.Sprint(c.nRed)}
		if k.Split {
			args = append(args, fmt.Sprint(c.chunk))
		}
		for i, v := range c.ins {
			fmt.Fprintf(&calls, "    char* x%d = load(dir, %q, %d);\n", i, c.inBufs[i], v.storage*v.dt.Size())
			args = append(args, fmt.Sprintf("(const %s*)(x%d + %d)", harnessElem[v.dt], i, v.offset*v.dt.Size()))
		}
		fmt.Fprintf(&calls, "    std::vector<%s> out(%d);\n    std::vector<%s> partial(%d);\n", harnessElem[c.outDT], nOutElems, acc, c.nOut*c.parts)
		args = append(args, "out.data()")
		if k.Split {
			args = append(args, "partial.data()")
		}
		args = append(args, "g")
		fmt.Fprintf(&calls, "    static const unsigned char gb[] = {%s};\n    ColGeometry g;\n    static_assert(sizeof g == sizeof gb);\n    std::memcpy(&g, gb, sizeof g);\n", strings.Join(lits, ","))
		tiles := (c.nOut + k.TX*k.Vec - 1) / (k.TX * k.Vec)
		fmt.Fprintf(&calls, "    launch2(%d, %d, %d, %d, [&] { %s(%s); });\n", tiles, c.parts, bx, by, k.Name(), strings.Join(args, ", "))
		if k.Split {
			fmt.Fprintf(&calls, "    launch2(%d, 1, %d, %d, [&] { %s_final(%d, %d, %d, partial.data(), out.data(), g); });\n",
				(c.nOut+k.TX-1)/k.TX, bx, by, k.Name(), c.nOut, c.parts, c.nRed)
		}
		fmt.Fprintf(&calls, "    save(dir, %q, (const char*)out.data(), %d);\n  }\n", c.name+"_out.bin", nOutElems*c.outDT.Size())
		fmt.Fprintf(&prog, "\nnamespace %s {\n%s\n}\n", c.name, c.src)
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n")
	prog.WriteString(calls.String())
	prog.WriteString("  return 0;\n}\n")
	runHarness(t, cxx, []string{"-std=c++20", "-O1", "-w", "-pthread"}, dir, prog.String())
	for _, c := range cases {
		checkHarnessOutput(t, dir, c.name, c.outDT, c.want, c.tol, func() string {
			return fmt.Sprintf("%s: %s over %v of %v (%v, inputs %v): %s on %d parts", c.name, c.program, c.red, c.shape, c.outDT, c.ins, c.kern.Name(), c.parts)
		})
	}
}

// writeHarnessInput fills the storage of view v, a tensor of the given
// shape, with small values (multiples of 1/8, exact in every dtype),
// writes it to dir/name for the harness, and returns its logical values
// as a float64 array.
func writeHarnessInput(t *testing.T, r *rand.Rand, dir, name string, v layoutView, shape []int) *Array {
	t.Helper()
	data := make([]float64, v.storage)
	var buf []byte
	for e := range data {
		data[e] = float64(r.IntN(33)-16) / 8
		buf = append(buf, encode(v.dt, data[e])...)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	vals := make([]float64, ir.Numel(shape))
	idx := make([]int, len(shape))
	for e := range vals {
		rem := e
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d] = rem % shape[d]
			rem /= shape[d]
		}
		vals[e] = data[v.at(idx)]
	}
	return FromFloat64s(vals, ir.Float64, shape...)
}

// checkHarnessOutput compares the harness's output dir/name_out.bin, of
// dtype dt, with want, each element within tol relative (absolute below
// 1); describe names the case in the first mismatch reported.
func checkHarnessOutput(t *testing.T, dir, name string, dt ir.DType, want []float64, tol float64, describe func() string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+"_out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	es := dt.Size()
	for o, w := range want {
		if got := decode(dt, b[o*es:]); math.Abs(got-w) > tol*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: element %d is %v, want %v", describe(), o, got, w)
			return
		}
	}
}

// oneRegion decomposes g, whose output is y, and returns its one fused
// region, which must be a row region of nin inputs.
func oneRegion(t *testing.T, g *ir.Graph, y *ir.Node, nin int, what string) *fuse.Region {
	t.Helper()
	g.Outputs = []*ir.Node{y}
	if _, err := ir.Decompose(g); err != nil {
		t.Fatal(err)
	}
	rs, err := fuse.Partition(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Row == nil || len(rs[0].Inputs) != nin {
		t.Fatalf("%s: %d regions, want one row region of %d inputs", what, len(rs), nin)
	}
	return rs[0]
}

// fusedColRegion is the one row region of program over dims of an input
// (or two) of shape and dtype dt, and its number of inputs.
func fusedColRegion(t *testing.T, program string, shape, dims []int, dt ir.DType) (*fuse.Region, int) {
	t.Helper()
	g := &ir.Graph{}
	x := g.Input(shape, dt, ir.CPU, "")
	call := func(op *ir.Op, a ir.Attrs, args ...*ir.Node) *ir.Node {
		vals := make([]ir.Value, len(args))
		for i, n := range args {
			vals[i] = n
		}
		n, err := g.Call(op, a, "", vals...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var y *ir.Node
	nin := 1
	switch program {
	case "var":
		y = call(ir.OpVar, ir.Attrs{Dims: dims, Scalars: []float64{1}}, x)
	case "mulsum":
		y = call(ir.OpSum, ir.Attrs{Dims: dims}, call(ir.OpMul, ir.Attrs{}, x, g.Input(shape, dt, ir.CPU, "")))
		nin = 2
	case "softmax":
		y = call(ir.OpSoftmax, ir.Attrs{Dim: dims[0]}, x)
	case "meanabs":
		y = call(ir.OpMean, ir.Attrs{Dims: dims}, call(ir.OpAbs, ir.Attrs{}, x))
	case "silumax": // an epilogue once per output
		y = call(ir.OpSiLU, ir.Attrs{}, call(ir.OpAMax, ir.Attrs{Dims: dims}, x))
	}
	return oneRegion(t, g, y, nin, fmt.Sprintf("%s over %v of %v %v", program, dims, shape, dt)), nin
}

// fusedColReference is the case's program by the eager float64 ops over
// its inputs' logical values.
func fusedColReference(c *fusedColCase, in []*Array) []float64 {
	var dims []int
	for d, r := range c.red {
		if r {
			dims = append(dims, d)
		}
	}
	var y *Array
	switch c.program {
	case "var":
		y = Apply(ir.OpVar, ir.Attrs{Dims: dims, Scalars: []float64{1}}, in[0])
	case "mulsum":
		y = Apply(ir.OpSum, ir.Attrs{Dims: dims}, Apply(ir.OpMul, ir.Attrs{}, in[0], in[1]))
	case "softmax":
		y = Apply(ir.OpSoftmax, ir.Attrs{Dim: dims[0]}, in[0])
	case "meanabs":
		y = Apply(ir.OpMean, ir.Attrs{Dims: dims}, Apply(ir.OpAbs, ir.Attrs{}, in[0]))
	case "silumax":
		y = Apply(ir.OpSiLU, ir.Attrs{}, Apply(ir.OpAMax, ir.Attrs{Dims: dims}, in[0]))
	}
	return y.Float64s()
}
