package inductor

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gocompile/cuda"
	"gocompile/ir"
)

// gemmEpilogues are epilogues of the shapes fusion hands a GemmKernel:
// none, bias then GELU (Linear+GELU), a residual add stored as bfloat16,
// and SiLU of the product alone.
func gemmEpilogues() []GemmKernel {
	gelu := func(x *ir.Expr) *ir.Expr {
		return ir.Mul(ir.Mul(x, ir.Const(0.5)), ir.Add(ir.Const(1), ir.Erf(ir.Mul(x, ir.Const(0.7071067811865476)))))
	}
	f32 := Operand{DType: ir.Float32, Kind: ir.F32}
	return []GemmKernel{
		{Out: ir.Float32},
		{Epilogue: gelu(ir.Add(ir.Arg(0), ir.Arg(1))), Product: 0, Operands: []Operand{f32, f32},
			Compute: ir.F32, Out: ir.Float32, Label: "bias_gelu", Doc: "v3 = add(v2, bias)\nv4 = gelu(v3)"},
		{Epilogue: ir.Add(ir.Arg(0), ir.Arg(1)), Product: 1, Operands: []Operand{{DType: ir.BFloat16, Kind: ir.F32}, f32},
			Compute: ir.F32, Out: ir.BFloat16, Label: "residual"},
		{Epilogue: ir.Div(ir.Arg(0), ir.Add(ir.Const(1), ir.Exp(ir.Neg(ir.Arg(0))))), Operands: []Operand{f32},
			Compute: ir.F32, Out: ir.Float32, Label: "silu"},
	}
}

// gemmSources is every epilogue in every candidate launch shape for a
// few row counts.
func gemmSources(t *testing.T) []source {
	var ks []source
	seen := map[string]bool{}
	add := func(k GemmKernel) {
		if seen[k.Name()] {
			return
		}
		seen[k.Name()] = true
		body, err := k.body()
		if err != nil {
			t.Fatalf("%s: %v", k.Name(), err)
		}
		ks = append(ks, source{k.Name(), body, k.Source})
	}
	for _, m := range []int{1, 3, 32} {
		for _, c := range GemmCandidates(m, 90) {
			for _, k := range gemmEpilogues() {
				k.Config = c
				for _, in := range []ir.DType{ir.Float32, ir.BFloat16, ir.Float16} {
					k.In = in
					if c.Takes(in) {
						add(k)
						if m < 32 { // products of an input, reading A before the wait
							ready := k
							ready.ReadyA = true
							add(ready)
						}
					}
				}
			}
		}
	}
	// Prologues (a norm computing A) in the warp kernel, for every
	// operand type and row tile.
	for _, in := range []ir.DType{ir.Float32, ir.BFloat16, ir.Float16} {
		regions := rowRegions(t, in)
		for _, name := range []string{"rms_norm", "layer_norm", "softmax"} {
			for _, c := range []GemmConfig{{Warps: 4, NT: 1, MT: 1}, {Warps: 2, NT: 4, MT: 8}} {
				for _, k := range gemmEpilogues()[:2] {
					k.Config, k.In, k.Out = c, in, in
					k.Prologue = NewRowKernel(regions[name])
					add(k)
				}
			}
		}
	}
	return ks
}

func TestGemmKernelsParseAsCpp(t *testing.T) { parseAsCpp(t, gemmSources(t)) }

func TestGPUGemmKernelsCompile(t *testing.T) { compileOnGPU(t, gemmSources(t)) }

func TestGemmKernelSource(t *testing.T) {
	k := gemmEpilogues()[1]
	k.Config = GemmConfig{Warps: 4, NT: 2, MT: 8}
	src, err := k.Source()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"// v3 = add(v2, bias)", "__device__ __forceinline__ float epilogue(float a0, float a1)",
		"const float* x1, long long x1m, long long x1n", "__launch_bounds__(128)", "griddepcontrol.wait", k.Name()} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
	if strings.Count(src, "erff(") != 1 {
		t.Error("the epilogue's expression should appear once, in its device function")
	}
	bad := k
	bad.Epilogue = ir.Add(ir.Arg(0), ir.Param(0))
	if _, err := bad.Source(); err == nil {
		t.Error("an epilogue with op parameters should be refused")
	}
}

func TestChooseGemmConfig(t *testing.T) {
	tensor := func(split int) GemmConfig { return GemmConfig{Tensor: true, NT: 2, Warps: 4, Split: split} }
	for _, tc := range []struct {
		m, n, k, sms, arch int
		want               GemmConfig
	}{
		{1, 1024, 1024, 132, 90, GemmConfig{Warps: 4, NT: 1, MT: 1}},
		{1, 32000, 2048, 132, 90, GemmConfig{Warps: 4, NT: 4, MT: 1}},
		{3, 4096, 1024, 132, 90, GemmConfig{Warps: 2, NT: 4, MT: 4}},  // 4 warps: 256 blocks
		{3, 16384, 1024, 132, 90, GemmConfig{Warps: 4, NT: 4, MT: 4}}, // 1024 blocks
		{8, 2048, 2048, 132, 90, GemmConfig{Warps: 2, NT: 4, MT: 8}},
		{8, 11264, 2048, 132, 90, GemmConfig{Warps: 4, NT: 4, MT: 8}},
		{16, 2048, 2048, 132, 90, GemmConfig{Tensor: true, NT: 4, Warps: 8, Split: 2}},
		{9, 11264, 2000, 132, 90, GemmConfig{Tensor: true, NT: 4, Warps: 8, Split: 2}},
		{16, 2048, 2040, 132, 90, GemmConfig{Warps: 2, NT: 4, MT: 16}}, // k not a multiple of 16
		{16, 2048, 2048, 108, 80, GemmConfig{Warps: 2, NT: 4, MT: 16}},
		{17, 1024, 1024, 132, 90, tensor(8)},
		{32, 1024, 1024, 132, 90, tensor(8)},
		{64, 7, 112, 132, 90, tensor(1)},
		{64, 7, 304, 132, 90, tensor(2)},
		{64, 7, 300, 132, 90, GemmConfig{Split: 2, Cluster: true}}, // k not a multiple of 16
		{64, 8192, 4096, 132, 90, tensor(1)},
		{32, 1024, 1024, 108, 80, GemmConfig{Split: 8}},
		{64, 7, 100, 108, 80, GemmConfig{Split: 1}},
		{64, 7, 300, 108, 80, GemmConfig{Split: 2}},
		{64, 8192, 4096, 108, 80, GemmConfig{Split: 1}},
	} {
		if got := ChooseGemmConfig(tc.m, tc.n, tc.k, tc.sms, tc.arch, true); got != tc.want {
			t.Errorf("ChooseGemmConfig(%d, %d, %d, %d, sm_%d) = %v, want %v", tc.m, tc.n, tc.k, tc.sms, tc.arch, got, tc.want)
		}
		c := tc.want
		x, y, _ := c.Grid(tc.m, tc.n)
		cols, rows := c.Warps*c.NT, c.MT
		switch {
		case c.Tensor:
			cols, rows = 8*c.NT, 32
		case c.Split > 0:
			cols, rows = gemmTileN, gemmTileM
		}
		if x*cols < tc.n || y*rows < tc.m {
			t.Errorf("grid %d×%d of %v does not cover %d×%d", x, y, c, tc.m, tc.n)
		}
	}
}

// Tensor-core launch shapes outside what the kernel supports are refused
// with the reason.
func TestGemmTensorShapesChecked(t *testing.T) {
	k := gemmEpilogues()[0]
	for _, c := range []GemmConfig{
		{Tensor: true, NT: 0, Warps: 4, Split: 1},
		{Tensor: true, NT: 2, Warps: 4, Split: 3},
		{Tensor: true, NT: 8, Warps: 16, Split: 1},
	} {
		k.Config = c
		if _, err := k.Source(); err == nil {
			t.Errorf("%v: accepted", c)
		}
	}
}

// 16-bit products take the tensor-core kernel from 8 rows, or from 2 where
// its warps prefetch the whole weight, and the warp kernel otherwise.
func TestChooseGemm16Config(t *testing.T) {
	warp := func(w, nt, mt int) GemmConfig { return GemmConfig{Warps: w, NT: nt, MT: mt} }
	tensor := func(nt, mt int) GemmConfig { return GemmConfig{Tensor: true, Warps: 8, NT: nt, Split: 1, MT: mt} }
	for _, tc := range []struct {
		m, n, k, sms, arch int
		vec                bool
		want               GemmConfig
	}{
		{1, 2048, 2048, 132, 90, true, warp(4, 1, 1)}, // one row: the warp kernel
		{1, 32000, 2048, 132, 90, true, warp(4, 4, 1)},
		{2, 2048, 2048, 132, 90, true, tensor(2, 8)},  // the weight prefetched whole
		{4, 4096, 4096, 132, 90, true, warp(2, 4, 4)}, // k too long to prefetch, few rows
		{8, 4096, 4096, 132, 90, true, tensor(4, 8)},
		{16, 5632, 2048, 132, 90, true, tensor(4, 0)},
		{9, 5632, 2048, 132, 90, true, tensor(4, 0)},
		{8, 5632, 2048, 132, 90, true, tensor(4, 8)},
		{16, 64, 2048, 132, 90, true, tensor(1, 0)}, // few columns: the narrowest group
		{3, 7, 16, 132, 80, true, tensor(1, 8)},
		{1, 2048, 2048, 132, 90, false, warp(4, 1, 1)},
		{1, 4096, 1000, 132, 90, true, warp(4, 2, 1)}, // k not a multiple of 16
		{3, 5632, 2048, 132, 75, true, warp(4, 4, 4)}, // no bfloat16 MMA before sm_80
		{16, 4096, 100, 132, 90, false, warp(2, 4, 16)},
		{9, 7, 100, 132, 90, false, warp(2, 4, 16)},
		{40, 2048, 100, 132, 90, false, warp(2, 4, 16)}, // more rows than a tile: grid.y covers them
	} {
		got := ChooseGemm16Config(tc.m, tc.n, tc.k, tc.sms, tc.arch, tc.vec)
		if got != tc.want {
			t.Errorf("ChooseGemm16Config(%d, %d, %d, %d, sm_%d, vec %v) = %v, want %v", tc.m, tc.n, tc.k, tc.sms, tc.arch, tc.vec, got, tc.want)
		}
		cols, rows := got.Warps*got.NT, got.MT
		if got.Tensor {
			cols, rows = 8*got.NT, Gemm16MaxM
		}
		if x, y, _ := got.Grid(tc.m, tc.n); x*cols < tc.n || y*rows < min(tc.m, Gemm16MaxM) {
			t.Errorf("grid %d×%d of %v does not cover %d×%d", x, y, got, tc.m, tc.n)
		}
		if !got.Takes(ir.BFloat16) || !got.Fits(tc.k, tc.vec) {
			t.Errorf("%v does not take bfloat16 of k %d", got, tc.k)
		}
	}
	k := GemmKernel{Out: ir.BFloat16, In: ir.BFloat16, Config: GemmConfig{Split: 2}}
	if _, err := k.Source(); err == nil || !strings.Contains(err.Error(), "warp kernel") {
		t.Errorf("a tiled 16-bit product: error %v, want one naming the warp kernel", err)
	}
}

// The weight loads a product's kernel issues before griddepcontrol.wait
// stay there in the machine code the device's NVRTC makes: a load moved
// past the wait would not overlap the kernel ahead under a programmatic
// dependent launch (ptxas moves non-coherent loads there); with ReadyA,
// every load precedes it and no store does. It reads the
// SASS with cuobjdump, which a machine with the CUDA toolkit has.
func TestGPUGemmWeightLoadsBeforeWait(t *testing.T) {
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
	dev, err := cuda.GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	if dev.Major < 9 {
		t.Skip("griddepcontrol needs sm_90")
	}
	objdump, err := exec.LookPath("cuobjdump")
	if err != nil {
		objdump = "/usr/local/cuda/bin/cuobjdump"
		if _, err := os.Stat(objdump); err != nil {
			t.Skip("no cuobjdump to read the machine code")
		}
	}
	for _, in := range []ir.DType{ir.BFloat16, ir.Float32} {
		for _, c := range []GemmConfig{
			ChooseGemm16Config(1, 2048, 2048, 132, 90, true),
			ChooseGemm16Config(4, 4096, 4096, 132, 90, true),
			ChooseGemm16Config(2, 2048, 2048, 132, 90, true),
			ChooseGemm16Config(16, 4096, 4096, 132, 90, true),
			ChooseGemmConfig(8, 2048, 2048, 132, 90, true),
			ChooseGemmConfig(16, 2048, 2048, 132, 90, true),
		} {
			for _, ready := range []bool{false, true} {
				k := GemmKernel{Out: in, In: in, Config: c, ReadyA: ready}
				if !c.Takes(in) || k.PrefetchLoads() == 0 {
					continue
				}
				src, err := k.Source()
				if err != nil {
					t.Fatal(err)
				}
				res, err := cuda.Compile(src, k.Name()+".cu", dev)
				if err != nil {
					t.Fatalf("%s: %v", k.Name(), err)
				}
				if res.CUBIN == nil {
					t.Skip("NVRTC made PTX only: no machine code to read")
				}
				path := filepath.Join(t.TempDir(), k.Name()+".cubin")
				if err := os.WriteFile(path, res.CUBIN, 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(objdump, "-sass", path).CombinedOutput()
				if err != nil {
					t.Fatalf("cuobjdump: %v\n%s", err, out)
				}
				// The kernel's own function (the float32 tensor-core kernel
				// calls a separate one for non-finite sums).
				_, fn, found := strings.Cut(string(out), "Function : "+k.Name()+"\n")
				if !found {
					t.Fatalf("%s: not in cuobjdump's output", k.Name())
				}
				fn, _, _ = strings.Cut(fn, "Function : ")
				before, after, found := strings.Cut(fn, "ACQBULK")
				if !found {
					t.Fatalf("%s: no griddepcontrol.wait (ACQBULK) in its machine code", k.Name())
				}
				// The code after the wait, to the kernel's end (its first
				// EXIT not under a predicate; what follows is cold code,
				// such as the float32 kernel's call for non-finite sums).
				if end := kernelExit.FindStringIndex(after); end != nil {
					after = after[:end[0]]
				}
				if n := strings.Count(before, "LDG"); n < k.PrefetchLoads() {
					t.Errorf("%s: %d loads before griddepcontrol.wait, want the %d weight loads", k.Name(), n, k.PrefetchLoads())
				}
				// Without ReadyA, A is loaded after the wait; with it, every
				// load comes before (the kernel has no epilogue operands),
				// and no store: the kernel ahead may still read what this
				// one writes.
				switch loadsAfter := strings.Count(after, "LDG"); {
				case !ready && loadsAfter == 0:
					t.Errorf("%s: no loads after griddepcontrol.wait, want A's", k.Name())
				case ready && loadsAfter > 0:
					t.Errorf("%s: %d loads after griddepcontrol.wait, want none (ReadyA)", k.Name(), loadsAfter)
				}
				if w := globalWrite.FindString(before); w != "" {
					t.Errorf("%s: %s before griddepcontrol.wait", k.Name(), w)
				}
			}
		}
	}
}

// globalWrite matches a SASS instruction that writes global memory, and
// kernelExit an EXIT no predicate guards.
var (
	globalWrite = regexp.MustCompile(`\b(STG|ATOMG|ATOM|RED)\.[A-Z0-9.]*`)
	kernelExit  = regexp.MustCompile(`\*/\s+EXIT\s*;`)
)

// PrologueFits takes the warp kernel with whole vectors and rows of A that
// leave room in a block's 48 KB of shared memory for the reductions'
// partial sums, and nothing else.
func TestPrologueFits(t *testing.T) {
	rms := NewRowKernel(rowRegions(t, ir.BFloat16)["rms_norm"])
	warp := GemmConfig{Warps: 4, NT: 4, MT: 1}
	for _, c := range []struct {
		name string
		cfg  GemmConfig
		k    int
		vec  bool
		want bool
	}{
		{"a decode step's norm", warp, 2048, true, true},
		{"a row of 47 KB", warp, 47 << 9, true, true},
		{"a row of 48 KB: no room for the partial sums", warp, 48 << 9, true, false},
		{"eight rows of 2048", GemmConfig{Warps: 2, NT: 4, MT: 8}, 2048, true, true},
		{"sixteen rows of 2048", GemmConfig{Warps: 2, NT: 4, MT: 16}, 2048, true, false},
		{"k not whole vectors", warp, 2044, true, false},
		{"unaligned operands", warp, 2048, false, false},
		{"the tensor-core kernel", GemmConfig{Tensor: true, NT: 4, Warps: 8, Split: 1, MT: 8}, 2048, true, false},
		{"the tiled kernel", GemmConfig{Split: 2}, 2048, true, false},
	} {
		if got := PrologueFits(rms, c.cfg, ir.BFloat16, c.k, c.vec); got != c.want {
			t.Errorf("%s: PrologueFits = %v, want %v", c.name, got, c.want)
		}
	}
	if PrologueFits(rms, warp, ir.Float32, 2048, true) {
		t.Error("a bfloat16 norm should not compute a float32 product's operand")
	}
}
