package tensor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A generated kernel that fails to build makes the compiled function run
// its graph eagerly, with the right results and no crash.
func TestGPUInductorFallsBackWhenAKernelFails(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	kernelFault = func(name string) error {
		if strings.Contains(name, "gc_row_") {
			return errors.New("injected NVRTC failure")
		}
		return nil
	}
	defer func() { kernelFault = nil }()
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
