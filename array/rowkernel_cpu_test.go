package array

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/ir"
)

// rowKernelCase is one region of TestRowKernelsOnCPU.
type rowKernelCase struct {
	name, program string
	rows, R       int
	outer         []int // the rows' shape
	ins           []layoutView
	inShapes      [][]int
	kern          *inductor.RowKernel
	geo           inductor.RowGeometry
	parts, chunk  int
	staged        bool // kern's staged passes (RowKernel.StagedPasses) run in turn
	dt            ir.DType
	outLen        int
	want          []float64
	tol           float64
}

// Fused row kernels (inductor.RowKernel, the compiled form of row regions
// over the last dim) compute what their region means, for every launch:
// persistent, looped, stashed and split kernels, several rows a block or
// one, vector or scalar access, over random row counts and lengths (odd
// ones included), rows laid out with gaps or outer dims permuted, in every
// floating dtype. The regions: softmax, log-softmax, layer norm (weight
// and bias), RMS norm (weight), variance, a sum and the negation of a sum
// (an epilogue, which a split kernel's final pass applies). Each kernel's CUDA C
// runs on the CPU (g++, one thread per GPU thread, warp shuffles through
// shared memory) against the eager float64 ops.
func TestRowKernelsOnCPU(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ on this machine")
	}
	ncases := 96
	if testing.Short() {
		ncases = 24
	}
	r := rand.New(rand.NewPCG(19, 2026))
	dtypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	programs := []string{"softmax", "logsoftmax", "layernorm", "rmsnorm", "var", "sum", "neg_of_sum"}
	forms := map[string]int{}
	var cases []*rowKernelCase
	for ci := range ncases {
		c := &rowKernelCase{name: fmt.Sprintf("case%d", ci), program: programs[ci%len(programs)], dt: dtypes[r.IntN(len(dtypes))]}
		if c.program == "neg_of_sum" && c.dt.Size() == 2 {
			c.dt = ir.Float32 // a 16-bit sum's epilogue follows its cast, in a region of its own
		}
		lengths := []int{3, 4, 17, 37, 64, 129, 389, 1000, 1023, 2048, 3001} // a row of 1 is no row region
		c.R = lengths[r.IntN(len(lengths))]
		c.outer = []int{1 + r.IntN(12)}
		if r.IntN(2) == 0 {
			c.outer = []int{1 + r.IntN(4), 1 + r.IntN(5)}
		}
		c.rows = ir.Numel(c.outer)
		shape := append(append([]int(nil), c.outer...), c.R)
		region, nin := rowKernelRegion(t, c.program, shape, c.dt)
		k := inductor.NewRowKernel(region)

		// x: rows in order or the outer dims permuted, sometimes with a gap
		// after each row; weights and biases: one row, broadcast.
		x := randomView(r, shape, c.dt, make([]bool, len(shape)), false)
		if len(c.outer) == 2 && r.IntN(2) == 0 {
			x = orderedView(r, shape, c.dt, make([]bool, len(shape)), []int{1, 0, 2}, r.IntN(4))
		}
		c.ins, c.inShapes = []layoutView{x}, [][]int{shape}
		for range nin - 1 {
			c.ins = append(c.ins, layoutView{dt: c.dt, storage: c.R, strides: []int{1}})
			c.inShapes = append(c.inShapes, []int{c.R})
		}
		c.geo = inductor.RowGeometry{OuterRank: len(c.outer)}
		for d, s := range c.outer {
			c.geo.OuterSize[d] = int64(s)
		}
		// The vectors planGPU picks for these addresses (the harness's
		// buffers are 64-byte aligned; the output too), capped at 4 for a
		// looped kernel a third of the time, as planGPU caps them.
		var ts []inductor.RowTensor
		for i, v := range c.ins {
			var os [inductor.MaxRank]int64
			if i == 0 {
				for d := range c.outer {
					os[d] = int64(v.strides[d])
				}
			}
			c.geo.OuterStride = append(c.geo.OuterStride, os)
			c.geo.InnerStride = append(c.geo.InnerStride, int64(v.strides[len(v.strides)-1]))
			ts = append(ts, inductor.RowTensor{Size: v.dt.Size(), Addr: uint64(v.offset * v.dt.Size()),
				Outer: c.geo.OuterStride[i][:len(c.outer)], Inner: c.geo.InnerStride[i]})
		}
		var out *inductor.RowTensor
		if k.Expr != nil {
			out = &inductor.RowTensor{Size: c.dt.Size(), Outer: make([]int64, len(c.outer)), Inner: 1}
			for d, st := range ir.ContiguousStrides(c.outer) {
				out.Outer[d] = int64(st * c.R)
			}
		}
		maxVec := 8
		if r.IntN(3) == 0 {
			maxVec = 4
		}
		rv := inductor.ChooseRowVector(c.R, c.dt.Size(), maxVec, true, ts, out)
		for i := range c.ins {
			k.Inputs[i].Access = rv.Access[i]
		}

		// A launch picked at random among the valid ones.
		k.Vec, k.Shifted, k.Ref = rv.Vec, rv.Shifted, rv.Ref
		k.Index32 = true
		span := k.Span(c.R)
		vectors := (span + k.Vec - 1) / k.Vec
		pick := ci / len(programs) % 4 // every program meets every launch form
		switch {
		case pick == 0 && vectors <= 256: // short rows: several a block
			k.Threads = 1 << r.IntN(6)
			for k.Threads*8 < vectors {
				k.Threads *= 2
			}
			k.Groups = 128 / k.Threads
			k.Persist = (vectors + k.Threads - 1) / k.Threads
		case pick == 1 && vectors <= 8*1024: // persistent
			k.Threads = 32 << r.IntN(6)
			k.Persist = (vectors + k.Threads - 1) / k.Threads
			if k.Persist > 8 {
				k.Threads, k.Persist = 1024, (vectors+1023)/1024
			}
		case pick == 2: // stashed
			k.Threads, k.Stash = 32<<r.IntN(4), true
		default: // looped, split where it can
			k.Threads = 32 << r.IntN(4)
			if k.CanSplit() || k.CanStage() && r.IntN(3) > 0 {
				c.parts = 1 + r.IntN(4)
				c.chunk = ((span+c.parts-1)/c.parts + k.Vec - 1) / k.Vec * k.Vec
				c.parts = (span + c.chunk - 1) / c.chunk
				k.Split = c.parts > 1 && k.CanSplit()
				c.staged = !k.CanSplit()
			}
		}
		if k.Persist > 8 {
			k.Persist = 0
		}
		c.kern = k
		if _, err := k.Source(); err != nil {
			t.Fatalf("%s: %s: %v", c.name, c.program, err)
		}
		c.outLen = c.rows
		if k.Expr != nil {
			c.outLen = c.rows * c.R
		}
		form := "looped"
		switch {
		case k.Stash:
			form = "stash"
		case k.Split:
			form = "split"
		case k.Persist > 0 && k.Groups > 1:
			form = "groups"
		case k.Persist > 0:
			form = "persistent"
		}
		if k.Vec > 1 {
			form += "-vec"
		}
		if k.Shifted {
			forms["shifted"]++
			forms["shifted-"+form]++
		}
		forms[fmt.Sprintf("vec%d", k.Vec)]++
		if k.Split && len(k.Stages) > 1 {
			forms["split-epilogue"]++
		}
		if c.staged {
			form = "staged"
			if c.parts > 1 {
				forms["staged-parts"]++
			}
		}
		forms[form]++
		c.tol = map[ir.DType]float64{ir.Float32: 2e-5, ir.Float64: 1e-12, ir.Float16: 4e-3, ir.BFloat16: 2e-2}[c.dt]
		cases = append(cases, c)
	}
	for _, f := range []string{"looped", "stash", "split-vec", "groups", "persistent", "persistent-vec", "vec2", "vec4", "vec8", "split-epilogue", "staged", "staged-parts",
		"shifted", "shifted-looped-vec", "shifted-stash-vec", "shifted-persistent-vec", "shifted-split-vec"} {
		if forms[f] == 0 && !testing.Short() {
			t.Errorf("no case ran a %s kernel: %v", f, forms)
		}
	}
	t.Logf("forms: %v", forms)

	dir := t.TempDir()
	var prog, calls strings.Builder
	prog.WriteString(harnessStubs)
	prog.WriteString("#define GC_EXTERN_SHARED extern  // each case's stash_raw, defined in its namespace\n")
	for _, c := range cases {
		var logical []*Array
		for i, v := range c.ins {
			logical = append(logical, writeHarnessInput(t, r, dir, fmt.Sprintf("%s_in%d.bin", c.name, i), v, c.inShapes[i]))
		}
		c.want = rowKernelReference(c.program, logical)

		k := c.kern
		src, err := k.Source()
		if err != nil {
			t.Fatal(err)
		}
		var lits []string
		for _, x := range c.geo.Bytes() {
			lits = append(lits, fmt.Sprint(x))
		}
		acc := "float"
		if k.Stages[0].Compute == ir.F64 {
			acc = "double"
		}
		if c.staged {
			writeStagedCase(t, &prog, &calls, c, lits)
			continue
		}
		fmt.Fprintf(&prog, "\nnamespace %s {\nalignas(16) unsigned char stash_raw[%d];\n%s\n}\n", c.name, max(k.StashBytes((k.Span(c.R)+k.Vec-1)/k.Vec*k.Vec), 16), harnessSource(src))
		fmt.Fprintf(&calls, "  {\n    using namespace %s;\n", c.name)
		args := []string{fmt.Sprint(c.rows), fmt.Sprint(c.R)}
		if k.Split {
			args = append(args, fmt.Sprint(c.chunk))
		}
		for i, v := range c.ins {
			fmt.Fprintf(&calls, "    char* x%d = load(dir, \"%s_in%d.bin\", %d);\n", i, c.name, i, v.storage*v.dt.Size())
			args = append(args, fmt.Sprintf("(const %s*)(x%d + %d)", harnessElem[v.dt], i, v.offset*v.dt.Size()))
		}
		fmt.Fprintf(&calls, "    std::vector<%s> out(%d);\n    std::vector<%s> partial(%d);\n", harnessElem[c.dt], c.outLen, acc, c.rows*max(c.parts, 1))
		args = append(args, "out.data()")
		if k.Split {
			args = append(args, "partial.data()")
		}
		args = append(args, "g")
		fmt.Fprintf(&calls, "    static const unsigned char gb[] = {%s};\n    RowGeometry g;\n    static_assert(sizeof g == sizeof gb);\n    std::memcpy(&g, gb, sizeof g);\n", strings.Join(lits, ","))
		groups := max(k.Groups, 1)
		grid, parts := (c.rows+groups-1)/groups, max(c.parts, 1)
		fmt.Fprintf(&calls, "    launch2(%d, %d, %d, 1, [&] { %s(%s); });\n", grid, parts, k.Threads*groups, k.Name(), strings.Join(args, ", "))
		if k.Split {
			fmt.Fprintf(&calls, "    launch2(%d, 1, %d, 1, [&] { %s_final(%d, %d, %d, partial.data(), out.data()); });\n", c.rows, k.Threads, k.Name(), c.rows, c.parts, c.R)
		}
		fmt.Fprintf(&calls, "    save(dir, \"%s_out.bin\", (const char*)out.data(), %d);\n  }\n", c.name, c.outLen*c.dt.Size())
	}
	prog.WriteString("\nint main(int argc, char** argv) {\n  const char* dir = argv[1];\n")
	prog.WriteString(calls.String())
	prog.WriteString("  return 0;\n}\n")
	runHarness(t, cxx, []string{"-std=c++20", "-O1", "-w", "-pthread"}, dir, prog.String())
	for _, c := range cases {
		checkHarnessOutput(t, dir, c.name, c.dt, c.want, c.tol, func() string {
			return fmt.Sprintf("%s: %s of %d rows of %d (%v, x strides %v at %d): %s on %d parts",
				c.name, c.program, c.rows, c.R, c.dt, c.ins[0].strides, c.ins[0].offset, c.kern.Name(), c.parts)
		})
	}
}

// writeStagedCase adds case c's staged passes to the harness program (a
// namespace each) and their launches in turn to calls: each pass over
// rows × parts blocks, then its final pass, with one prev buffer between
// them.
func writeStagedCase(t *testing.T, prog, calls *strings.Builder, c *rowKernelCase, geoBytes []string) {
	k := c.kern
	NS := len(k.Stages)
	fmt.Fprintf(calls, "  {\n")
	var inputs []string
	for i, v := range c.ins {
		fmt.Fprintf(calls, "    char* x%d = load(dir, \"%s_in%d.bin\", %d);\n", i, c.name, i, v.storage*v.dt.Size())
		inputs = append(inputs, fmt.Sprintf("(const %s*)(x%d + %d)", harnessElem[v.dt], i, v.offset*v.dt.Size()))
	}
	fmt.Fprintf(calls, "    std::vector<%s> out(%d);\n    std::vector<%s> prev(%d);\n    std::vector<double> partial(%d);\n",
		harnessElem[c.dt], c.outLen, harnessElem[k.PrevDType()], c.rows*NS, c.rows*c.parts)
	fmt.Fprintf(calls, "    static const unsigned char gb[] = {%s};\n", strings.Join(geoBytes, ","))
	for _, pass := range k.StagedPasses() {
		pk := *k
		pk.Staged, pk.Stage = true, pass
		src, err := pk.Source()
		if err != nil {
			t.Fatalf("%s: stage %d: %v", c.name, pass, err)
		}
		ns := fmt.Sprintf("%s_p%d", c.name, pass)
		fmt.Fprintf(prog, "\nnamespace %s {\n%s\n}\n", ns, harnessSource(src))
		acc := "float"
		if pass < NS && k.Stages[pass].Compute == ir.F64 {
			acc = "double"
		}
		fmt.Fprintf(calls, "    {\n      %s::RowGeometry g;\n      std::memcpy(&g, gb, sizeof g);\n", ns)
		args := append([]string{fmt.Sprint(c.rows), fmt.Sprint(c.R), fmt.Sprint(c.chunk)}, inputs...)
		args = append(args, "out.data()", fmt.Sprintf("(%s*)partial.data()", acc), "prev.data()", "g")
		fmt.Fprintf(calls, "      launch2(%d, %d, %d, 1, [&] { %s::%s(%s); });\n", c.rows, c.parts, k.Threads, ns, pk.Name(), strings.Join(args, ", "))
		if pass < NS {
			fmt.Fprintf(calls, "      launch2(%d, 1, %d, 1, [&] { %s::%s_final(%d, %d, %d, (const %s*)partial.data(), prev.data(), out.data()); });\n",
				c.rows, k.Threads, ns, pk.Name(), c.rows, c.parts, c.R, acc)
		}
		calls.WriteString("    }\n")
	}
	fmt.Fprintf(calls, "    save(dir, \"%s_out.bin\", (const char*)out.data(), %d);\n  }\n", c.name, c.outLen*c.dt.Size())
}

// rowKernelRegion is the one row region of program over the last dim of
// an input of shape and dtype dt (with a weight and bias where the program
// takes them), and its number of inputs.
func rowKernelRegion(t *testing.T, program string, shape []int, dt ir.DType) (*fuse.Region, int) {
	t.Helper()
	g := &ir.Graph{}
	x := g.Input(shape, dt, ir.CPU, "")
	last := len(shape) - 1
	R := shape[last]
	var y *ir.Node
	var err error
	nin := 1
	switch program {
	case "softmax":
		y, err = g.Call(ir.OpSoftmax, ir.Attrs{Dim: last}, "", x)
	case "logsoftmax":
		y, err = g.Call(ir.OpLogSoftmax, ir.Attrs{Dim: last}, "", x)
	case "layernorm":
		w, b := g.Input([]int{R}, dt, ir.CPU, ""), g.Input([]int{R}, dt, ir.CPU, "")
		y, err = g.Call(ir.OpLayerNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-5}}, "", x, w, b)
		nin = 3
	case "rmsnorm":
		w := g.Input([]int{R}, dt, ir.CPU, "")
		y, err = g.Call(ir.OpRMSNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-6}}, "", x, w)
		nin = 2
	case "var":
		y, err = g.Call(ir.OpVar, ir.Attrs{Dims: []int{last}, Scalars: []float64{1}}, "", x)
	case "sum":
		y, err = g.Call(ir.OpSum, ir.Attrs{Dims: []int{last}}, "", x)
	case "neg_of_sum": // an epilogue once per row
		if y, err = g.Call(ir.OpSum, ir.Attrs{Dims: []int{last}}, "", x); err == nil {
			y, err = g.Call(ir.OpNeg, ir.Attrs{}, "", y)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return oneRegion(t, g, y, nin, fmt.Sprintf("%s of %v %v", program, shape, dt)), nin
}

// rowKernelReference is the program by the eager float64 ops.
func rowKernelReference(program string, in []*Array) []float64 {
	last := len(in[0].Shape()) - 1
	R := in[0].Shape()[last]
	var y *Array
	switch program {
	case "softmax":
		y = Apply(ir.OpSoftmax, ir.Attrs{Dim: last}, in[0])
	case "logsoftmax":
		y = Apply(ir.OpLogSoftmax, ir.Attrs{Dim: last}, in[0])
	case "layernorm":
		y = Apply(ir.OpLayerNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-5}}, in[0], in[1], in[2])
	case "rmsnorm":
		y = Apply(ir.OpRMSNorm, ir.Attrs{Dims: []int{R}, Scalars: []float64{1e-6}}, in[0], in[1])
	case "var":
		y = Apply(ir.OpVar, ir.Attrs{Dims: []int{last}, Scalars: []float64{1}}, in[0])
	case "sum":
		y = Apply(ir.OpSum, ir.Attrs{Dims: []int{last}}, in[0])
	case "neg_of_sum":
		y = Apply(ir.OpNeg, ir.Attrs{}, Apply(ir.OpSum, ir.Attrs{Dims: []int{last}}, in[0]))
	}
	return y.Float64s()
}
