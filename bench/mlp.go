package main

import (
	"fmt"
	"io"
	"time"

	"gocompile/tensor"
)

// The MLP workload of the compilation-modes comparison: 4 layers of
// Linear(1024, 1024) + GELU in float32, per call at batch 1 and 32, timed
// as the PyTorch script does: many calls queued, then one synchronize.

// mlpModel builds the MLP's weights on the default device.
func mlpModel() func(x *tensor.Tensor) *tensor.Tensor {
	const layers, width = 4, 1024
	ws := make([]*tensor.Tensor, layers)
	bs := make([]*tensor.Tensor, layers)
	for i := range ws {
		ws[i] = tensor.Randn(uint64(10+i), tensor.Float32, width, width).MulScalar(0.03)
		bs[i] = tensor.Randn(uint64(20+i), tensor.Float32, width).MulScalar(0.1)
	}
	return func(x *tensor.Tensor) *tensor.Tensor {
		for i := range ws {
			x = x.Linear(ws[i], bs[i]).GELU()
		}
		return x
	}
}

// runMLP prints eager and compiled time per call at batch 1 and 32, in
// the default mode, ReduceOverhead and MaxAutotune.
func runMLP(cfg *config, out io.Writer) {
	mlp := mlpModel()
	compiled := tensor.Compile(mlp)
	graphed := tensor.Compile(mlp, tensor.WithMode(tensor.ReduceOverhead))
	tunedFn := tensor.Compile(mlp, tensor.WithMode(tensor.MaxAutotune))
	fmt.Fprintf(out, "MLP 4x Linear(1024,1024)+GELU float32 on %s: µs per call (many calls, one sync; median of %d)\n", cfg.device, cfg.reps)
	fmt.Fprintf(out, "%-6s %10s %10s %16s %13s %15s %14s\n", "batch", "eager", "compiled", "reduce-overhead", "max-autotune", "eager/compiled", "eager/reduce")
	for _, batch := range []int{1, 32} {
		x := tensor.Randn(1, tensor.Float32, batch, 1024)
		e := func() *tensor.Tensor { return mlp(x) }
		c := func() *tensor.Tensor { return compiled(x) }
		r := func() *tensor.Tensor { return graphed(x) }
		a := func() *tensor.Tensor { return tunedFn(x) }
		for range 3 { // compile, capture, replay
			c()
			e()
			r()
			a()
		}
		n := cfg.iters
		if n == 0 {
			n = 500
		}
		med, _ := measure(cfg, n, e, c, r, a)
		eu, cu, ru, au := us(med[0]), us(med[1]), us(med[2]), us(med[3])
		fmt.Fprintf(out, "%-6d %10.1f %10.1f %16.1f %13.1f %14.2fx %13.2fx\n", batch, eu, cu, ru, au, eu/cu, eu/ru)
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
