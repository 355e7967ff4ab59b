package tensor

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"gocompile/internal/stats"
	"gocompile/internal/testhook"
)

// A generated kernel that fails to build makes the compiled function run
// its graph eagerly, with the right results and no crash.
func TestGPUInductorFallsBackWhenAKernelFails(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	testhook.KernelFault = func(name string) error {
		if strings.Contains(name, "gc_row_") {
			return errors.New("injected NVRTC failure")
		}
		return nil
	}
	defer func() { testhook.KernelFault = nil }()
	f := func(x *Tensor) *Tensor { return x.MulScalar(3).Softmax(-1).AddScalar(1) }
	x := Randn(1, Float32, 5, 77).ToDevice(dev)
	compiled := Compile(f, WithBackend("inductor"))
	for range 2 {
		sameValues(t, "fallback", compiled(x), f(x))
	}
}

// GOCOMPILE_DEBUG_DIR receives the CUDA C of every generated kernel, which
// names the graph nodes it computes.
func TestGPUDebugDirHasKernelSources(t *testing.T) {
	requireGPU(t)
	dir := t.TempDir()
	t.Setenv("GOCOMPILE_DEBUG_DIR", dir)
	x := Randn(2, Float32, 3, 29).ToDevice(CUDA(0))
	// A row length no other test uses, so the kernel is generated here.
	Compile(func(x *Tensor) *Tensor { return x.LayerNorm([]int{29}, nil, nil, 1e-3) }, WithBackend("inductor"))(x).Float32s()
	files, _ := filepath.Glob(filepath.Join(dir, "gc_row_*.cu"))
	if len(files) == 0 {
		t.Fatalf("no row kernel source in %s", dir)
	}
	src, err := os.ReadFile(files[0])
	if err != nil || !strings.Contains(string(src), "= mean: mean over the row") {
		t.Fatalf("kernel source does not name its nodes (%v):\n%s", err, src)
	}
}

// The first run of a program on a GPU compiles its kernels in parallel
// (array.LaunchQueue), and computes what eager code computes.
func TestGPUFirstRunCompilesInParallel(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	// Constants of this run's own make the kernels new to the process.
	c := float64(time.Now().UnixNano()%1000) / 1000
	f := func(x, w *Tensor) (*Tensor, *Tensor, *Tensor) {
		a := x.MulScalar(1 + c).Softmax(-1)
		b := x.AddScalar(c).LayerNorm([]int{96}, w, nil, 1e-5)
		d := x.SubScalar(c).Mul(w).RMSNorm([]int{96}, w, 1e-6).Exp()
		return a, b, d
	}
	x, w := Randn(1, Float32, 40, 96).To(dev), Randn(2, Float32, 96).To(dev)
	stats.MaxCompiling.Store(0)
	before := stats.KernelSources.Load()
	a, b, d := Compile(f, WithCacheDir(t.TempDir()))(x, w)
	ea, eb, ed := f(x, w)
	nearValues(t, "softmax", a, ea)
	nearValues(t, "layer norm", b, eb)
	nearValues(t, "rms norm", d, ed)
	if n := stats.KernelSources.Load() - before; n < 3 {
		t.Fatalf("%d kernel sources generated, want at least 3 new kernels", n)
	}
	if runtime.NumCPU() > 1 && stats.MaxCompiling.Load() < 2 {
		t.Errorf("at most %d kernels compiled at once; the first run should compile them in parallel", stats.MaxCompiling.Load())
	}
}
