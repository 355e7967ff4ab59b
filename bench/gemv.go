package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gocompile/tensor"
)

// The weight-streaming products of a decode step: x·wᵀ for 1 to 16 rows
// of x against a weight w [n, k], as a Linear layer without bias reads it.
// Each product reads its whole weight once, so its bandwidth is the
// weight's bytes (plus x's and the result's) over its time. A call runs
// the product against each of enough weight copies to exceed the GPU's L2
// cache, as a model's layers do, so every product streams its weight from
// memory and the time per product is the call's over the copies: a
// kernel's time, not a launch's, once ReduceOverhead replays the call as
// one CUDA graph.
//
// By default the table is 1, 2, 4, 8 and 16 rows against 2048² and 4096²
// float32 and bfloat16 weights; -gemv-cases N draws N products at random
// from -seed instead (any row count up to 16, weights from 256 to 16384
// by 256 to 8192, a quarter of the sizes odd, float32, bfloat16 and
// float16), so launch-shape rules are checked on shapes they were not
// chosen from. -gemv-tune adds each product compiled with max-autotune:
// the default launch shape's time over the best candidate's.

// gemvCase is one product: rows of x against an n×k weight of type dt.
type gemvCase struct {
	dt         tensor.DType
	rows, n, k int
}

// gemvStreamBytes is how many bytes of weight copies a call reads (well
// past an H100's or H200's 50–60 MB of L2).
const gemvStreamBytes = 256 << 20

// gemvTable is the default table's products.
func gemvTable() []gemvCase {
	var cs []gemvCase
	for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		for _, width := range []int{2048, 4096} {
			for _, rows := range []int{1, 2, 4, 8, 16} {
				cs = append(cs, gemvCase{dt, rows, width, width})
			}
		}
	}
	return cs
}

// gemvRandom draws n products from seed: dtypes in turn, rows uniform in
// 1..16, sizes log-uniform, rounded to multiples of 8, a quarter of them
// odd.
func gemvRandom(n int, seed uint64) []gemvCase {
	rng := rand.New(rand.NewPCG(seed, 0x67656d76))
	size := func(lo, hi float64) int {
		s := int(math.Exp(math.Log(lo)+rng.Float64()*(math.Log(hi)-math.Log(lo)))) / 8 * 8
		if rng.IntN(4) == 0 {
			s += 1 + rng.IntN(7)
		}
		return s
	}
	dts := []tensor.DType{tensor.Float32, tensor.BFloat16, tensor.Float16}
	cs := make([]gemvCase, n)
	for i := range cs {
		cs[i] = gemvCase{dts[i%len(dts)], 1 + rng.IntN(16), size(256, 16384), size(256, 8192)}
	}
	return cs
}

// runGemv prints µs per product eagerly, compiled and compiled with
// ReduceOverhead (and with max-autotune under -gemv-tune), and the best
// compiled product's share of the copy bandwidth measured in the same run.
func runGemv(cfg *config, out io.Writer) error {
	cases := gemvTable()
	if cfg.gemvCases > 0 {
		cases = gemvRandom(cfg.gemvCases, cfg.seed)
	}
	cp := measureCopy(cfg)
	fmt.Fprintf(out, "products x·wᵀ on %s, weights streamed from memory (µs a product); copy bandwidth %.1f GB/s\n", cfg.device, cp.CopyGBs)
	if cfg.gemvCases > 0 {
		fmt.Fprintf(out, "%d random products, seed %d\n", len(cases), cfg.seed)
	}
	tuned := ""
	if cfg.gemvTune {
		tuned = fmt.Sprintf(" %9s %13s", "tuned", "default/tuned")
	}
	fmt.Fprintf(out, "%-9s %5s %11s %7s %9s %9s %15s %9s%s %9s %10s\n", "dtype", "rows", "weight", "copies", "eager", "compiled", "reduce-overhead", "host", tuned, "GB/s", "% of copy")
	var shares []float64
	for _, c := range cases {
		if cfg.only != "" && c.dt.String() != cfg.only {
			continue
		}
		wbytes := c.n * c.k * c.dt.Size()
		copies := max(1, gemvStreamBytes/wbytes)
		if cfg.quick {
			copies = 2
		}
		ws := make([]*tensor.Tensor, copies)
		for i := range ws {
			ws[i] = tensor.Randn(uint64(100+i), tensor.Float32, c.n, c.k).MulScalar(0.02).To(c.dt).ToDevice(cfg.device)
		}
		products := func(x *tensor.Tensor) []*tensor.Tensor {
			ys := make([]*tensor.Tensor, len(ws))
			for i, w := range ws {
				ys[i] = x.MatMul(w.T())
			}
			return ys
		}
		x := tensor.Randn(1, tensor.Float32, c.rows, c.k).To(c.dt).ToDevice(cfg.device)
		last := func(f func(*tensor.Tensor) []*tensor.Tensor) func() *tensor.Tensor {
			return func() *tensor.Tensor { ys := f(x); return ys[len(ys)-1] }
		}
		fs := []func() *tensor.Tensor{
			last(products),
			last(tensor.Compile(products, compileOpts...)),
			last(tensor.Compile(products, tensor.WithMode(tensor.ReduceOverhead))),
		}
		if cfg.gemvTune {
			fs = append(fs, last(tensor.Compile(products, tensor.WithMode(tensor.MaxAutotune))))
		}
		for range 3 { // compile (and tune), capture, replay
			for _, f := range fs {
				f()
			}
		}
		n := cfg.iters
		if n == 0 {
			n = max(4, 2000/copies)
		}
		med, _ := measure(cfg, n, fs...)
		per := func(d time.Duration) float64 { return us(d) / float64(copies) }
		eu, cu, gu := per(med[0]), per(med[1]), per(med[2])
		// The host's share of a replayed call: the calls queued without
		// waiting for the device (a call's time is the device's unless
		// this is as long).
		tensor.Synchronize(cfg.device)
		t0 := time.Now()
		for range n {
			fs[2]()
		}
		hu := per(time.Since(t0) / time.Duration(n))
		tensor.Synchronize(cfg.device)
		bytes := float64(wbytes + (c.rows*c.k+c.rows*c.n)*c.dt.Size())
		gbs := bytes / (min(cu, gu) * 1e3)
		tunedCols := ""
		if cfg.gemvTune {
			tu := per(med[3])
			tunedCols = fmt.Sprintf(" %9.2f %12.2fx", tu, cu/tu)
		}
		share := 100 * gbs / cp.CopyGBs
		shares = append(shares, share)
		fmt.Fprintf(out, "%-9v %5d %11s %7d %9.2f %9.2f %15.2f %9.2f%s %9.1f %9.1f%%\n", c.dt, c.rows, fmt.Sprintf("%d×%d", c.n, c.k), copies, eu, cu, gu, hu, tunedCols, gbs, share)
	}
	if len(shares) > 1 {
		fmt.Fprintf(out, "%% of copy: median %.1f%%, lowest %.1f%%, %s\n", median(shares), slices.Min(shares), countAtLeast(shares, 80))
	}
	return nil
}

// countAtLeast says how many of xs are at least limit.
func countAtLeast(xs []float64, limit float64) string {
	n := 0
	for _, x := range xs {
		if x >= limit {
			n++
		}
	}
	return fmt.Sprintf("%d of %d at %.0f%% or more", n, len(xs), limit)
}
