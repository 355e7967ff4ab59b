package array_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/tensor"
)

// TestGPUTuneLaunch times the bench's pointwise and reduction workloads
// under each launch shape of a grid (GOCOMPILE_TUNE=1 runs it,
// GOCOMPILE_TUNE=reduce only the reductions): how pointwiseBlock,
// pointwiseUnroll, pointwiseBlocksPerSM and the reduce* settings were
// chosen.
func TestGPUTuneLaunch(t *testing.T) {
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
	if os.Getenv("GOCOMPILE_TUNE") == "" {
		t.Skip("set GOCOMPILE_TUNE=1 to run")
	}
	dev := tensor.CUDA(0)
	timeIt := func(f func() *tensor.Tensor) float64 {
		f()
		f()
		tensor.Synchronize(dev)
		var reps []float64
		for range 7 {
			const n = 100
			t0 := time.Now()
			for range n {
				f()
			}
			tensor.Synchronize(dev)
			reps = append(reps, float64(time.Since(t0).Nanoseconds())/1e3/n)
		}
		slices.Sort(reps)
		return reps[len(reps)/2]
	}
	inductorBackend := tensor.WithBackend("inductor")
	x16 := tensor.Randn(1, tensor.Float32, 1<<24).ToDevice(dev)
	chain := tensor.Compile(func(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(1.5).AddScalar(0.5).GELU().Mul(x.Sigmoid()) }, inductorBackend)
	a := tensor.Randn(2, tensor.Float32, 8192, 4096).ToDevice(dev)
	b := tensor.Randn(3, tensor.Float32, 4096).ToDevice(dev)
	bias := tensor.Compile(func(a, b *tensor.Tensor) *tensor.Tensor { return a.Add(b).GELU() }, inductorBackend)
	src := tensor.Randn(7, tensor.Float32, 1<<26).ToDevice(dev)
	dst := tensor.Zeros(tensor.Float32, 1<<26).ToDevice(dev)
	x64 := tensor.Randn(5, tensor.Float32, 1<<26).ToDevice(dev)

	defer array.SetPointwiseLaunch(array.PointwiseLaunch())
	blocks := []int{128, 256, 512}
	if os.Getenv("GOCOMPILE_TUNE") == "reduce" {
		blocks = nil
	}
	for _, blk := range blocks {
		for _, u := range []int{0, 1, 2, 4} { // 0: the kernel's own
			for _, s := range []int{0, 16} {
				array.SetPointwiseLaunch(blk, u, s)
				c := timeIt(func() *tensor.Tensor { return chain(x16) })
				bg := timeIt(func() *tensor.Tensor { return bias(a, b) })
				cp := timeIt(func() *tensor.Tensor { return dst.Copy(src) })
				t.Logf("pointwise block %3d unroll %d blocks/SM %2d: chain16M %6.1f µs  bias_gelu %6.1f µs  copy64M %6.1f µs",
					blk, u, s, c, bg, cp)
			}
		}
	}

	defer array.SetReduceLaunch(array.ReduceLaunch())
	for _, u := range []int{2, 4, 8} {
		array.SetReduceUnroll(u)
		for _, l := range []int{0, 4096} {
			array.SetReduceWarpRowsLong(l)
			rows := timeIt(func() *tensor.Tensor { return a.Sum(-1) })
			t.Logf("reduce unroll %d warpRowsLong %4d: sum_rows %6.1f µs", u, l, rows)
		}
		for _, w := range []int{1, 2} {
			array.SetReduceWaves(w)
			all := timeIt(func() *tensor.Tensor { return x64.Sum() })
			t.Logf("reduce unroll %d waves %d: sum_all %6.1f µs", u, w, all)
		}
	}
	array.Residency(func(fn, n any) bool {
		t.Logf("a reduction kernel runs %d blocks per SM", n)
		return true
	})
}
