package main

import (
	"fmt"
	"io"
	"strings"

	"gocompile/examples/llm/llama"
	"gocompile/tensor"
)

// runLLM times one decode step of examples/llm's decoder (a token a
// sequence against the whole static cache) eagerly, compiled and compiled
// with ReduceOverhead, at batch 1, 4 and 16, and compares its memory
// traffic with the copy bandwidth measured in the same run: each step
// reads every weight once and the whole KV cache (keys and values of every
// layer), so the roofline is that many bytes at the copy bandwidth.
func runLLM(cfg *config, out io.Writer) error {
	name, dtype, _ := strings.Cut(cfg.llm, "/")
	c, ok := llama.Configs[name]
	if !ok {
		return fmt.Errorf("-llm %q: the config is tiny or 1b", cfg.llm)
	}
	dt := tensor.Float32
	switch dtype {
	case "", "float32":
	case "bfloat16":
		dt = tensor.BFloat16
	default:
		return fmt.Errorf("-llm %q: the dtype is float32 or bfloat16", cfg.llm)
	}
	m := llama.NewModel(c, 1, dt)
	m.ToDevice(cfg.device)
	weights := int64(0)
	for _, t := range m.Params() {
		weights += int64((*t).Numel() * dt.Size())
	}
	cp := measureCopy(cfg)
	fmt.Fprintf(out, "decode step of the %s config (%s, cache of %d positions) on %s; copy bandwidth %.1f GB/s; weights %.1f MB\n",
		name, dt, c.MaxSeq, cfg.device, cp.CopyGBs, float64(weights)/1e6)
	fmt.Fprintf(out, "%-6s %11s %11s %16s %12s %12s %15s\n", "batch", "eager µs", "compiled µs", "reduce-ovh. µs", "tokens/s", "MB a step", "% of roofline")
	hd := c.Dim / c.Heads
	for _, batch := range []int{1, 4, 16} {
		dec := llama.NewDecoder(m, batch)
		tok := tensor.Zeros(tensor.Int64, batch, 1).ToDevice(cfg.device)
		pos := tensor.FromSlice([]int64{int64(c.MaxSeq / 2)}).ToDevice(cfg.device)
		compiled := tensor.Compile(dec.Forward)
		graphed := tensor.Compile(dec.Forward, tensor.WithMode(tensor.ReduceOverhead))
		e := func() *tensor.Tensor { return dec.Forward(tok, pos) }
		cf := func() *tensor.Tensor { return compiled(tok, pos) }
		g := func() *tensor.Tensor { return graphed(tok, pos) }
		for range 3 { // compile, capture, replay
			e()
			cf()
			g()
		}
		n := cfg.iters
		if n == 0 {
			n = 50
		}
		med, _ := measure(cfg, n, e, cf, g)
		eu, cu, gu := us(med[0]), us(med[1]), us(med[2])
		cache := int64(2*c.Layers*batch*c.KVHeads*c.MaxSeq*hd) * int64(dt.Size())
		bytes := weights + cache
		best := min(cu, gu)
		roof := float64(bytes) / (cp.CopyGBs * 1e3) // µs at the copy bandwidth
		fmt.Fprintf(out, "%-6d %11.1f %11.1f %16.1f %12.1f %12.1f %14.1f%%\n", batch, eu, cu, gu,
			float64(batch)/best*1e6, float64(bytes)/1e6, 100*roof/best)
	}
	return nil
}
