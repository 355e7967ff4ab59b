package inductor

import (
	"fmt"
	"strings"
	"testing"

	"gocompile/fuse"
	"gocompile/ir"
)

// rowRegions partitions the graphs of softmax, log-softmax, layer norm,
// RMS norm and a row sum with a prologue, in dtype dt, and returns their
// row regions.
func rowRegions(t *testing.T, dt ir.DType) map[string]*fuse.Region {
	t.Helper()
	build := map[string]func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error){
		"softmax": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			return g.Call(ir.OpSoftmax, ir.Attrs{Dim: -1}, "", x)
		},
		"log_softmax": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			return g.Call(ir.OpLogSoftmax, ir.Attrs{Dim: -1}, "", x)
		},
		"layer_norm": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			return g.Call(ir.OpLayerNorm, ir.Attrs{Dims: []int{64}, Scalars: []float64{1e-5}}, "", x, w, b)
		},
		"rms_norm": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			return g.Call(ir.OpRMSNorm, ir.Attrs{Dims: []int{64}, Scalars: []float64{1e-6}}, "", x, w)
		},
		"sum_squares": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			sq, err := g.Call(ir.OpMul, ir.Attrs{}, "", x, x)
			if err != nil {
				return nil, err
			}
			return g.Call(ir.OpSum, ir.Attrs{Dims: []int{-1}}, "", sq)
		},
		"softmax_to_half": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			s, err := g.Call(ir.OpSoftmax, ir.Attrs{Dim: -1}, "", x)
			if err != nil {
				return nil, err
			}
			return g.Call(ir.OpCast, ir.Attrs{DType: ir.Float16}, "", s)
		},
		"amin_keepdim": func(g *ir.Graph, x, w, b *ir.Node) (*ir.Node, error) {
			return g.Call(ir.OpAMin, ir.Attrs{Dims: []int{1}, KeepDim: true}, "", x)
		},
	}
	out := map[string]*fuse.Region{}
	for name, f := range build {
		if name == "softmax_to_half" && (dt == ir.Float16 || dt == ir.BFloat16) {
			continue // a 16-bit softmax already ends in its cast
		}
		g := &ir.Graph{}
		x := g.Input([]int{8, 64}, dt, ir.CPU, "")
		w := g.Input([]int{64}, dt, ir.CPU, "")
		b := g.Input([]int{64}, dt, ir.CPU, "")
		y, err := f(g, x, w, b)
		if err != nil {
			t.Fatal(err)
		}
		g.Outputs = []*ir.Node{y}
		if _, err := ir.Decompose(g); err != nil {
			t.Fatal(err)
		}
		ir.DCE(g)
		rs, err := fuse.Partition(g)
		if err != nil {
			t.Fatal(err)
		}
		last := rs[len(rs)-1]
		if last.Row == nil {
			t.Fatalf("%s: the last region %v is not a row region", name, last)
		}
		out[name] = last
	}
	return out
}

type rowCase struct {
	name string
	k    *RowKernel
}

// rowKernels is every configuration class of row kernel: each region in
// each dtype, persistent and looped, vectorised or not, with contiguous,
// uniform and strided inputs.
func rowKernels(t *testing.T) []rowCase {
	var cases []rowCase
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16} {
		for name, r := range rowRegions(t, dt) {
			for _, cfg := range []struct {
				threads, groups, vec, persist int
				stash                         bool
				cluster                       int
			}{{256, 1, 4, 4, false, 0}, {32, 1, 1, 0, false, 0}, {1024, 1, 1, 8, false, 0}, {4, 32, 1, 2, false, 0}, {1, 128, 4, 1, false, 0},
				{512, 1, 4, 0, true, 0}, {128, 1, 1, 0, true, 0}, {1024, 1, 4, 0, true, 8}, {256, 1, 1, 0, true, 2}} {
				for _, acc := range []RowAccess{RowContig, RowStrided, RowUniform} {
					k := NewRowKernel(r)
					k.Threads, k.Groups, k.Vec, k.Persist, k.Stash, k.Cluster = cfg.threads, cfg.groups, cfg.vec, cfg.persist, cfg.stash, cfg.cluster
					k.Index32 = cfg.threads != 32 // both widths
					for i := range k.Inputs {
						if i == 0 {
							k.Inputs[i].Access = acc
						}
					}
					cases = append(cases, rowCase{fmt.Sprintf("%s/%v/%v", name, dt, k.Name()), k})
					if k.CanSplit() && cfg.persist == 0 && !cfg.stash {
						s := *k
						s.Split = true
						cases = append(cases, rowCase{fmt.Sprintf("%s/%v/%v", name, dt, s.Name()), &s})
					}
					if acc == RowContig && cfg.vec > 1 { // the same, with shifted chunks
						s := *k
						s.Shifted, s.Ref = true, 0
						cases = append(cases, rowCase{fmt.Sprintf("%s/%v/%v", name, dt, s.Name()), &s})
					}
				}
			}
		}
	}
	return cases
}

// Every row kernel configuration is valid C++ with the CUDA built-ins
// stubbed.
func TestRowKernelsParseAsCpp(t *testing.T) { parseAsCpp(t, rowSources(t)) }

// rowSources is every row kernel configuration as a source.
func rowSources(t *testing.T) []source {
	var ks []source
	for _, c := range rowKernels(t) {
		body, err := c.k.body()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ks = append(ks, source{c.k.Name(), body, c.k.Source})
	}
	return ks
}

// The generated source names the graph nodes it computes.
func TestRowKernelSourceNamesNodes(t *testing.T) {
	r := rowRegions(t, ir.Float32)["softmax"]
	k := NewRowKernel(r)
	k.Threads, k.Vec, k.Persist = 256, 4, 4
	src, err := k.Source()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"= amax: amax over the row", "= sum: sum over the row", "block_allreduce", "VN<float, VEC>", "// the root, per element"} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
}

// Every row kernel configuration compiles with NVRTC.
func TestGPURowKernelsCompile(t *testing.T) { compileOnGPU(t, rowSources(t)) }

// A kernel's name identifies its source: kernels are cached by name, so two
// configurations with one name would share the first one's code.
func TestRowKernelNamesIdentifySources(t *testing.T) {
	seen := map[string]string{}
	for _, c := range rowKernels(t) {
		src, err := c.k.Source()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[c.k.Name()]; ok && prev != src {
			t.Errorf("%s names two different kernels", c.k.Name())
		}
		seen[c.k.Name()] = src
	}
}

// No generated source carries a Go formatting error ("%!d(MISSING)" and
// the like): text with its own % signs, such as inline PTX operands, must
// not pass through a format string.
func TestKernelSourcesHaveNoFormatErrors(t *testing.T) {
	for _, s := range append(append(rowSources(t), allKernels(t)...), gemmSources(t)...) {
		src, err := s.full()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if i := strings.Index(src, "%!"); i >= 0 {
			t.Errorf("%s: formatting error in the source: %q", s.name, src[max(0, i-40):min(len(src), i+40)])
		}
	}
}

// Rereads holds for the regions that read a row again after reducing it
// (softmax, norms), not for a lone reduction of a prologue.
func TestRowKernelRereads(t *testing.T) {
	for name, r := range rowRegions(t, ir.Float32) {
		k := NewRowKernel(r)
		want := name != "sum_squares" && name != "amin_keepdim"
		if got := k.Rereads(); got != want {
			t.Errorf("%s: Rereads() = %v, want %v", name, got, want)
		}
		if want == k.CanSplit() {
			t.Errorf("%s: Rereads() = %v and CanSplit() = %v: a lone reduction reads its row once", name, want, k.CanSplit())
		}
	}
}

// ChooseRowSplit splits where rows leave SMs idle (few rows, or a count
// just past a wave), never below four passes of a block a part, and
// keeps a block a row where rows fill many waves.
func TestChooseRowSplit(t *testing.T) {
	d := RowDevice{SMs: 132}
	resident := d.SMs * 2048 / SplitThreads
	for _, c := range []struct {
		r, vec, rows, threads int
		split                 bool // want more than one part
	}{
		{r: 1 << 20, vec: 4, rows: 1, threads: 1024, split: true},
		{r: 780912, vec: 4, rows: 10, threads: 1024, split: true},
		{r: 86110, vec: 4, rows: 313, threads: 1024, split: true}, // 1.2 waves a block a row
		{r: 50000, vec: 4, rows: 100, threads: 1024, split: true},
		{r: 8192, vec: 4, rows: 1, threads: 1024, split: false},           // one part is four passes
		{r: 4096, vec: 1, rows: 5, threads: 1024, split: false},           // ... of 512 threads
		{r: 100000, vec: 4, rows: 100 * 264, threads: 1024, split: false}, // 100 full waves
		{r: 3000, vec: 4, rows: 100000, threads: 256, split: false},
	} {
		p := ChooseRowSplit(d, c.r, c.vec, c.rows, c.threads)
		what := fmt.Sprintf("r=%d vec=%d rows=%d threads=%d: %d parts", c.r, c.vec, c.rows, c.threads, p)
		if (p > 1) != c.split {
			t.Errorf("%s, want split %v", what, c.split)
		}
		if p > 1 && (c.r+p-1)/p < 4*SplitThreads*c.vec {
			t.Errorf("%s: parts of fewer than four passes", what)
		}
		if maxParts := (c.r + 4*SplitThreads*c.vec - 1) / (4 * SplitThreads * c.vec); p > 1 && p < maxParts && c.rows*p < resident/2 {
			t.Errorf("%s: %d blocks leave most of the %d resident slots idle", what, c.rows*p, resident)
		}
	}
	for _, bad := range [][4]int{{0, 4, 10, 1024}, {100, 4, 0, 1024}} {
		if p := ChooseRowSplit(d, bad[0], bad[1], bad[2], bad[3]); p != 1 {
			t.Errorf("ChooseRowSplit%v = %d, want 1", bad, p)
		}
	}
}

// ChooseRowStage stages only where the model finds the looped form well
// short of filling the SMs (rows far fewer than the SMs, or very long),
// not where a block a row already keeps most SMs busy.
func TestChooseRowStage(t *testing.T) {
	d := RowDevice{SMs: 132}
	for _, c := range []struct {
		r, rows int
		stage   bool
	}{
		{r: 780912, rows: 10, stage: true},
		{r: 123775, rows: 50, stage: true},
		{r: 1 << 20, rows: 1, stage: true},
		{r: 76047, rows: 92, stage: false},
		{r: 158353, rows: 84, stage: false},
		{r: 8192, rows: 4, stage: false}, // too short to split at all
		{r: 50000, rows: 1000, stage: false},
	} {
		p := ChooseRowStage(d, c.r, 4, c.rows, 1024)
		if (p > 1) != c.stage {
			t.Errorf("r=%d rows=%d: %d parts, want staged %v", c.r, c.rows, p, c.stage)
		}
		if s := ChooseRowSplit(d, c.r, 4, c.rows, 1024); p > 1 && p != s {
			t.Errorf("r=%d rows=%d: %d parts, ChooseRowSplit gives %d", c.r, c.rows, p, s)
		}
	}
}

// ChooseRowVector picks plain vectors where rows allow them, shifted ones
// where the plain form would read a scalar at a time and rows are long
// enough, with the inputs that do not lie like the reference read element
// by element; the output must lie alike too.
func TestChooseRowVector(t *testing.T) {
	rows := func(R int64, addr uint64) RowTensor {
		return RowTensor{Size: 4, Addr: addr, Outer: []int64{R}, Inner: 1}
	}
	weight := RowTensor{Size: 4, Addr: 0x1000, Outer: []int64{0}, Inner: 1}
	out := func(R int64, addr uint64) *RowTensor { o := rows(R, addr); return &o }
	for _, c := range []struct {
		name    string
		R       int
		maxVec  int
		shift   bool
		ins     []RowTensor
		out     *RowTensor
		vec     int
		shifted bool
		access  []RowAccess
	}{
		{"aligned rows", 4096, 8, true, []RowTensor{rows(4096, 0x1000), weight}, out(4096, 0x2000), 4, false, []RowAccess{RowContig, RowContig}},
		{"even rows: vectors of 2, never shifted", 4098, 8, true, []RowTensor{rows(4098, 0x1000)}, out(4098, 0x2000), 2, false, []RowAccess{RowContig}},
		{"odd rows", 4097, 8, true, []RowTensor{rows(4097, 0x1000), weight}, out(4097, 0x2000), 4, true, []RowAccess{RowContig, RowStrided}},
		{"odd rows, shift off", 4097, 8, false, []RowTensor{rows(4097, 0x1000)}, out(4097, 0x2000), 1, false, []RowAccess{RowContig}},
		{"odd rows, capped", 4097, 2, true, []RowTensor{rows(4097, 0x1000)}, out(4097, 0x2000), 2, true, []RowAccess{RowContig}},
		{"short odd rows", 127, 8, true, []RowTensor{rows(127, 0x1000)}, out(127, 0x2000), 1, false, []RowAccess{RowContig}},
		{"odd rows of 64 vectors of 2", 255, 8, true, []RowTensor{rows(255, 0x1000)}, out(255, 0x2000), 2, true, []RowAccess{RowContig}},
		{"a view at an odd offset", 4096, 8, true, []RowTensor{rows(4096, 0x1004), weight}, out(4096, 0x2000), 1, false, []RowAccess{RowContig, RowContig}},
		{"a view at an odd offset, a reduction", 4096, 8, true, []RowTensor{rows(4096, 0x1004)}, nil, 4, true, []RowAccess{RowContig}},
		{"the output lies otherwise", 4097, 8, true, []RowTensor{rows(4097, 0x1004)}, out(4097, 0x2000), 1, false, []RowAccess{RowContig}},
		{"uniform and strided inputs", 4097, 8, true, []RowTensor{{Size: 4, Addr: 0x3000, Outer: []int64{1}}, rows(4097, 0x1000), {Size: 4, Addr: 0x3000, Outer: []int64{1}, Inner: 3}}, nil, 4, true,
			[]RowAccess{RowUniform, RowContig, RowStrided}},
		{"no input with rows", 4097, 8, true, []RowTensor{weight}, nil, 1, false, []RowAccess{RowContig}},
	} {
		rv := ChooseRowVector(c.R, 4, c.maxVec, c.shift, c.ins, c.out)
		if rv.Vec != c.vec || rv.Shifted != c.shifted || fmt.Sprint(rv.Access) != fmt.Sprint(c.access) {
			t.Errorf("%s: vec %d shifted %v access %v, want %d %v %v", c.name, rv.Vec, rv.Shifted, rv.Access, c.vec, c.shifted, c.access)
		}
		if rv.Shifted && (rv.Ref < 0 || rv.Access[rv.Ref] != RowContig) {
			t.Errorf("%s: reference input %d", c.name, rv.Ref)
		}
	}
}
