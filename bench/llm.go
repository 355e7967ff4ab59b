package main

import (
	"fmt"
	"io"
	"strings"

	"gocompile/cuda"
	"gocompile/examples/llm/llama"
	"gocompile/tensor"
)

// runLLM times one decode step of examples/llm's decoder (a token a
// sequence against the whole static cache) eagerly, compiled and compiled
// with ReduceOverhead, at each of -batches (1, 4 and 16), and compares its memory
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
	for _, batch := range cfg.batches {
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
	prefill(cfg, out, m)
	if cfg.steady {
		steadyDecode(out, m, cfg.device)
	}
	return nil
}

// prefill times the prompt's pass through the decoder at batch 1 (a
// prompt of 512 tokens, or half the cache where that is shorter), eagerly
// as examples/llm runs it and compiled at that length, and prints prompt
// tokens a second.
func prefill(cfg *config, out io.Writer, m *llama.Model) {
	c := m.Cfg
	n := min(512, c.MaxSeq/2)
	dec := llama.NewDecoder(m, 1)
	tok := tensor.Arange(0, float64(n), 1, tensor.Int64).Reshape(1, n).ToDevice(cfg.device)
	pos := tensor.Arange(0, float64(n), 1, tensor.Int64).ToDevice(cfg.device)
	compiled := tensor.Compile(dec.Forward)
	e := func() *tensor.Tensor { return dec.Forward(tok, pos) }
	cf := func() *tensor.Tensor { return compiled(tok, pos) }
	for range 2 {
		e()
		cf()
	}
	iters := cfg.iters
	if iters == 0 {
		iters = 5
	}
	med, _ := measure(cfg, iters, e, cf)
	eu, cu := us(med[0]), us(med[1])
	fmt.Fprintf(out, "prefill of %d tokens (batch 1): eager %.1f µs (%.0f tokens/s), compiled %.1f µs (%.0f tokens/s)\n",
		n, eu, float64(n)/eu*1e6, cu, float64(n)/cu*1e6)
}

// steadyDecode runs 256 greedy decode steps of batch 1 through the
// ReduceOverhead step, as a generation loop does (the position a new
// device tensor each step, the next token the argmax of the logits), and
// reports what the device allocator did meanwhile (on a GPU): a steady
// loop takes no new device memory, its buffers all coming from the
// allocator's cache.
func steadyDecode(out io.Writer, m *llama.Model, dev tensor.Device) {
	const steps = 256
	c := m.Cfg
	dec := llama.NewDecoder(m, 1)
	step := tensor.Compile(dec.Forward, tensor.WithMode(tensor.ReduceOverhead))
	tok := tensor.Zeros(tensor.Int64, 1, 1).ToDevice(dev)
	at := func(p int) *tensor.Tensor { return tensor.FromSlice([]int64{int64(p % c.MaxSeq)}).ToDevice(dev) }
	for p := range 8 { // compile, capture, replay
		tok = step(tok, at(p)).ArgMax(-1, false).Reshape(1, 1)
	}
	stats := func() cuda.AllocatorStats {
		if dev == tensor.CPU {
			return cuda.AllocatorStats{}
		}
		tensor.Synchronize(dev)
		return tensor.MemoryStats(dev)
	}
	before := stats()
	for p := 8; p < 8+steps; p++ {
		tok = step(tok, at(p)).ArgMax(-1, false).Reshape(1, 1)
	}
	tok.Int64s()
	after := stats()
	if dev == tensor.CPU {
		fmt.Fprintf(out, "steady decode, %d tokens (batch 1, reduce-overhead): the allocator's statistics are a GPU's\n", steps)
		return
	}
	fmt.Fprintf(out, "steady decode, %d tokens (batch 1, reduce-overhead): %d new device allocations (cuMemAlloc), %d buffers from the cache, %+.1f MB held\n",
		steps, after.NumMallocs-before.NumMallocs, after.NumCacheHits-before.NumCacheHits, float64(after.Allocated-before.Allocated)/1e6)
}
