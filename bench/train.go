package main

import (
	"fmt"
	"io"

	"gocompile/tensor"
	"gocompile/tensor/optim"
)

// The training-step workload: the MLP of runMLP (4 × Linear(1024, 1024)
// + GELU, float32) at batch 64, a mean squared error loss, its backward
// and an AdamW update, eagerly and compiled (the loss and backward as one
// graph, the update as another). bench/pytorch/train_bench.py is
// the PyTorch side (torch.compile of the model, AOTAutograd's backward).

// runTrain prints µs per training step eagerly and compiled.
func runTrain(cfg *config, out io.Writer) error {
	const layers, width, batch = 4, 1024, 64
	params := func() []*tensor.Tensor {
		var ps []*tensor.Tensor
		for i := range layers {
			ps = append(ps,
				tensor.Randn(uint64(10+i), tensor.Float32, width, width).MulScalar(0.03).ToDevice(cfg.device).SetRequiresGrad(true),
				tensor.Randn(uint64(20+i), tensor.Float32, width).MulScalar(0.1).ToDevice(cfg.device).SetRequiresGrad(true))
		}
		return ps
	}
	lossAndGrads := func(ps []*tensor.Tensor) func(x, y *tensor.Tensor) *tensor.Tensor {
		return func(x, y *tensor.Tensor) *tensor.Tensor {
			h := x
			for i := 0; i < len(ps); i += 2 {
				h = h.Linear(ps[i], ps[i+1]).GELU()
			}
			d := h.Sub(y)
			loss := d.Mul(d).Mean()
			loss.Backward()
			return loss
		}
	}
	x := tensor.Randn(1, tensor.Float32, batch, width).ToDevice(cfg.device)
	y := tensor.Randn(2, tensor.Float32, batch, width).ToDevice(cfg.device)
	step := func(ps []*tensor.Tensor, f func(x, y *tensor.Tensor) *tensor.Tensor, compiled bool) func() *tensor.Tensor {
		opt := optim.NewAdamW(ps, 1e-4)
		opt.Compiled = compiled
		return func() *tensor.Tensor {
			opt.ZeroGrad()
			loss := f(x, y)
			opt.Step()
			return loss
		}
	}
	pe, pc, pw := params(), params(), params()
	names := []string{"eager", "split", "whole"}
	steps := []func() *tensor.Tensor{
		step(pe, lossAndGrads(pe), false),
		step(pc, tensor.Compile(lossAndGrads(pc), compileOpts...), true),
		tensor.Compile(step(pw, lossAndGrads(pw), false), compileOpts...),
	}
	for range 3 {
		for _, s := range steps {
			s()
		}
	}
	n := cfg.iters
	if n == 0 {
		n = 50
	}
	med, _ := measure(cfg, n, steps...)
	fmt.Fprintf(out, "training step: MLP %d × Linear(%d, %d) + GELU, batch %d, float32, MSE loss + backward + AdamW on %s (µs a step)\n",
		layers, width, width, batch, cfg.device)
	fmt.Fprintf(out, "%-8s %10s %10s %18s\n", "", "µs a step", "eager/this", "peak extra MB")
	for i, name := range names {
		peak := "-" // no device memory to count on the CPU
		if cfg.device != tensor.CPU {
			peak = fmt.Sprintf("%.2f", stepPeakMB(cfg.device, steps[i]))
		}
		fmt.Fprintf(out, "%-8s %10.1f %9.2fx %18s\n", name, us(med[i]), us(med[0])/us(med[i]), peak)
	}
	if cfg.device != tensor.CPU {
		fmt.Fprintln(out, "peak extra MB: the most device memory a step holds beyond its model, gradients and optimizer state")
	}
	return nil
}

// stepPeakMB is the most device memory five calls of step hold at once
// beyond what was held before them, in MiB.
func stepPeakMB(dev tensor.Device, step func() *tensor.Tensor) float64 {
	tensor.Synchronize(dev)
	tensor.ResetPeakMemoryStats(dev)
	base := tensor.MemoryStats(dev).Allocated
	for range 5 {
		step()
	}
	tensor.Synchronize(dev)
	return float64(tensor.MemoryStats(dev).PeakAllocated-base) / (1 << 20)
}
