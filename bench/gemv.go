package main

import (
	"fmt"
	"io"
	"time"

	"gocompile/tensor"
)

// The weight-streaming products of a decode step: x·wᵀ for 1 to 16 rows
// of x against a square weight, as a Linear layer without bias reads it.
// Each product reads its whole weight once, so its bandwidth is the
// weight's bytes (plus x's and the result's) over its time. A call runs
// the product against each of enough weight copies to exceed the GPU's L2
// cache, as a model's layers do, so every product streams its weight from
// memory and the time per product is the call's over the copies: a
// kernel's time, not a launch's, once ReduceOverhead replays the call as
// one CUDA graph.

// gemvRows and gemvWidths are the shapes timed.
var (
	gemvRows   = []int{1, 2, 4, 8, 16}
	gemvWidths = []int{2048, 4096}
)

// gemvStreamBytes is how many bytes of weight copies a call reads (well
// past an H100's or H200's 50–60 MB of L2).
const gemvStreamBytes = 256 << 20

// runGemv prints µs per product eagerly, compiled and compiled with
// ReduceOverhead, and the best compiled product's share of the copy
// bandwidth measured in the same run.
func runGemv(cfg *config, out io.Writer) error {
	cp := measureCopy(cfg)
	fmt.Fprintf(out, "products x·wᵀ on %s, weights streamed from memory (µs a product); copy bandwidth %.1f GB/s\n", cfg.device, cp.CopyGBs)
	fmt.Fprintf(out, "%-9s %5s %11s %7s %9s %9s %15s %9s %10s\n", "dtype", "rows", "weight", "copies", "eager", "compiled", "reduce-overhead", "GB/s", "% of copy")
	for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		if cfg.only != "" && dt.String() != cfg.only {
			continue
		}
		for _, width := range gemvWidths {
			wbytes := width * width * dt.Size()
			copies := max(1, gemvStreamBytes/wbytes)
			if cfg.quick {
				copies = 2
			}
			ws := make([]*tensor.Tensor, copies)
			for i := range ws {
				ws[i] = tensor.Randn(uint64(100+i), tensor.Float32, width, width).MulScalar(0.02).To(dt).ToDevice(cfg.device)
			}
			products := func(x *tensor.Tensor) []*tensor.Tensor {
				ys := make([]*tensor.Tensor, len(ws))
				for i, w := range ws {
					ys[i] = x.MatMul(w.T())
				}
				return ys
			}
			for _, rows := range gemvRows {
				x := tensor.Randn(1, tensor.Float32, rows, width).To(dt).ToDevice(cfg.device)
				last := func(f func(*tensor.Tensor) []*tensor.Tensor) func() *tensor.Tensor {
					return func() *tensor.Tensor { ys := f(x); return ys[len(ys)-1] }
				}
				e := last(products)
				c := last(tensor.Compile(products, compileOpts...))
				g := last(tensor.Compile(products, tensor.WithMode(tensor.ReduceOverhead)))
				for range 3 { // compile, capture, replay
					e()
					c()
					g()
				}
				n := cfg.iters
				if n == 0 {
					n = max(4, 2000/copies)
				}
				med, _ := measure(cfg, n, e, c, g)
				per := func(d time.Duration) float64 { return us(d) / float64(copies) }
				eu, cu, gu := per(med[0]), per(med[1]), per(med[2])
				bytes := float64(wbytes + 2*rows*width*dt.Size())
				gbs := bytes / (min(cu, gu) * 1e3)
				fmt.Fprintf(out, "%-9v %5d %6d×%-4d %7d %9.2f %9.2f %15.2f %9.1f %9.1f%%\n", dt, rows, width, width, copies, eu, cu, gu, gbs, 100*gbs/cp.CopyGBs)
			}
		}
	}
	return nil
}
