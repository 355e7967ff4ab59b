package tensor

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gocompile/cuda"
	"gocompile/internal/buildid"
	"gocompile/internal/stats"
)

// A new process that compiles a function an earlier process compiled,
// with the same cache directory (WithCacheDir), rebuilds its program from
// the cache: no fusion search, and on a GPU no kernel source generated
// and no NVRTC, and no autotune search (the winners are cached), with the
// same results. Each process is this test binary
// run again as a child (warmStartChild).
func TestWarmStartFromCacheDir(t *testing.T) {
	if os.Getenv("GOCOMPILE_WARM_CHILD") != "" {
		t.Skip("a child runs warmStartChild")
	}
	if testing.Short() {
		t.Skip("-short: spawns processes")
	}
	devices := []string{"cpu"}
	if ok, _ := cuda.Available(); ok {
		devices = append(devices, "cuda")
	}
	for _, dev := range devices {
		dir := t.TempDir()
		var first []string
		for run := range 3 {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestWarmStartChild$", "-test.v")
			cmd.Env = append(os.Environ(), "GOCOMPILE_WARM_CHILD="+dev, "GOCOMPILE_WARM_DIR="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s run %d: %v\n%s", dev, run, err, out)
			}
			var fields []string
			for _, l := range strings.Split(string(out), "\n") {
				if rest, ok := strings.CutPrefix(l, "WARM "); ok {
					fields = strings.Fields(rest)
				}
			}
			if len(fields) != 4 {
				t.Fatalf("%s run %d: no report in\n%s", dev, run, out)
			}
			t.Logf("%s run %d: %s graphs partitioned, %s kernel sources generated, %s autotune searches, checksum %s",
				dev, run, fields[0], fields[1], fields[3], fields[2])
			if run == 0 {
				first = fields
				if fields[0] == "0" || dev == "cuda" && (fields[1] == "0" || fields[3] == "0") {
					t.Fatalf("%s: the first process partitioned %s graphs, generated %s kernel sources and ran %s autotune searches; want some of each",
						dev, fields[0], fields[1], fields[3])
				}
				continue
			}
			if fields[0] != "0" || fields[1] != "0" || fields[3] != "0" {
				t.Errorf("%s run %d: partitioned %s graphs, generated %s kernel sources, ran %s autotune searches; want none (warm cache)",
					dev, run, fields[0], fields[1], fields[3])
			}
			if fields[2] != first[2] {
				t.Errorf("%s run %d: result checksum %s, first process %s", dev, run, fields[2], first[2])
			}
		}
	}
}

// TestWarmStartChild is one process of TestWarmStartFromCacheDir: it
// compiles (in MaxAutotune mode) and runs a two-layer MLP with a layer
// norm, then reports how many graphs it partitioned, how many kernel
// sources it generated, a checksum of the result, and how many autotune
// searches it ran.
func TestWarmStartChild(t *testing.T) {
	dev := os.Getenv("GOCOMPILE_WARM_CHILD")
	if dev == "" {
		t.Skip("run by TestWarmStartFromCacheDir")
	}
	buildid.Identity = func() string { return "warm start test" }
	d := CPU
	if dev == "cuda" {
		d = CUDA(0)
	}
	x := Randn(1, Float32, 8, 64).To(d)
	w1, b1 := Randn(2, Float32, 64, 64).MulScalar(0.1).To(d), Randn(3, Float32, 64).To(d)
	w2, b2 := Randn(4, Float32, 32, 64).MulScalar(0.1).To(d), Randn(5, Float32, 32).To(d)
	g := Randn(6, Float32, 32).To(d)
	f := Compile(func(x *Tensor) *Tensor {
		h := x.Linear(w1, b1).GELU()
		return h.Linear(w2, b2).SiLU().LayerNorm([]int{32}, g, nil, 1e-5).Softmax(-1)
	}, WithCacheDir(os.Getenv("GOCOMPILE_WARM_DIR")), WithMode(MaxAutotune))
	sum := 0.0
	for i, v := range f(x).Float64s() {
		sum += v * float64(i%7+1)
	}
	fmt.Printf("WARM %d %d %.6f %d\n", stats.Partitions.Load(), stats.KernelSources.Load(), sum, stats.AutotuneSearches.Load())
}
