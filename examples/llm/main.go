// Command llm serves a LLaMA-style decoder-only language model from Go:
// RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, weights in
// safetensors (written with seeded random values on first run when the
// file does not exist), a static KV cache written in place, a prefill and
// a decode loop with greedy, top-k and top-p sampling, and one
// tensor.Compile around the decode step. With -serve it answers
// GET /generate?prompt=…&tokens=N as server-sent events, a token each,
// and GET /metrics with the tokens generated and tokens/s.
//
//	go run ./examples/llm -prompt "hello"
//	go run ./examples/llm -serve :8080
//	go run ./examples/llm -config 1b -dtype bfloat16 -device cuda
//
// The tiny configuration's vocabulary is the 256 byte values, so prompts
// and replies are text; the 1B configuration's tokens print as numbers.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gocompile/examples/llm/llama"
	"gocompile/tensor"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llm:", err)
		os.Exit(1)
	}
}

// Sampling says how a token is drawn from the logits.
type Sampling struct {
	Temperature float64 // 0: greedy
	TopK        int     // 0: every token
	TopP        float64 // 0 or 1: no nucleus cut
}

// sample draws one token per row of logits [b, vocab].
func sample(logits *tensor.Tensor, s Sampling, g *tensor.Generator) []int64 {
	if s.Temperature <= 0 {
		return logits.ArgMax(-1, false).ToDevice(tensor.CPU).Int64s()
	}
	logits = logits.DivScalar(s.Temperature)
	vals, idx := logits.Sort(-1, true) // descending
	if s.TopK > 0 && s.TopK < vals.Size(1) {
		vals, idx = vals.Narrow(1, 0, s.TopK), idx.Narrow(1, 0, s.TopK)
	}
	probs := vals.Softmax(-1)
	if s.TopP > 0 && s.TopP < 1 {
		// Keep the smallest prefix whose mass reaches TopP: a token stays
		// when the mass before it is below TopP.
		before := probs.CumSum(-1).Sub(probs)
		probs = probs.Mul(before.LtScalar(s.TopP))
	}
	pick := probs.Multinomial(1, true, g) // [b, 1]: a rank among the kept
	return idx.Gather(1, pick).Squeeze(1).ToDevice(tensor.CPU).Int64s()
}

// Generator generates tokens with a decoder, its decode step compiled.
type Generator struct {
	dec    *llama.Decoder
	step   func(tokens, pos *tensor.Tensor) *tensor.Tensor
	rng    *tensor.Generator
	mu     sync.Mutex // one generation at a time: they share the cache
	tokens atomic.Int64
	busy   atomic.Int64 // nanoseconds spent generating
}

// newGenerator makes a generator of batch sequences at a time.
func newGenerator(m *llama.Model, compiled bool, seed uint64, batch int) *Generator {
	dec := llama.NewDecoder(m, batch)
	g := &Generator{dec: dec, step: dec.Forward, rng: tensor.NewGenerator(seed)}
	if compiled {
		g.step = tensor.Compile(dec.Forward, tensor.WithMode(tensor.ReduceOverhead))
	}
	return g
}

// Generate feeds prompt (one sequence; the generator's batch must be 1),
// then draws n tokens, calling emit with each; it stops early when the
// cache is full or emit returns false.
func (g *Generator) Generate(prompt []int64, n int, s Sampling, emit func(tok int64) bool) error {
	return g.GenerateBatch([][]int64{prompt}, n, s, func(toks []int64) bool { return emit(toks[0]) })
}

// GenerateBatch feeds prompts, one per sequence of the generator's batch,
// all of one length, then draws n tokens for each, calling emit with each
// step's tokens (one per sequence); it stops early when the cache is full
// or emit returns false. Every step is one call of the decode step for
// the whole batch.
func (g *Generator) GenerateBatch(prompts [][]int64, n int, s Sampling, emit func(toks []int64) bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.dec.M.Cfg
	b := g.dec.K[0].Size(0)
	if len(prompts) != b {
		return fmt.Errorf("%d prompts for a generator of batch %d; give one per sequence", len(prompts), b)
	}
	t := len(prompts[0])
	if t == 0 || t >= c.MaxSeq {
		return fmt.Errorf("a prompt of %d tokens; give 1 to %d", t, c.MaxSeq-1)
	}
	flat := make([]int64, 0, b*t)
	for i, p := range prompts {
		if len(p) != t {
			return fmt.Errorf("prompt %d has %d tokens, prompt 0 has %d; give prompts of one length", i, len(p), t)
		}
		flat = append(flat, p...)
	}
	start := time.Now()
	defer func() { g.busy.Add(int64(time.Since(start))) }()
	dev := g.dec.M.TokEmb.Device()
	positions := func(from, to int) *tensor.Tensor {
		return tensor.Arange(float64(from), float64(to), 1, tensor.Int64).ToDevice(dev)
	}
	// Prefill runs eagerly: its length differs from call to call.
	logits := g.dec.Forward(tensor.FromSlice(flat, b, t).ToDevice(dev), positions(0, t))
	for i := 0; i < n && t+i < c.MaxSeq; i++ {
		toks := sample(logits, s, g.rng)
		g.tokens.Add(int64(b))
		if !emit(toks) {
			return nil
		}
		p := t + i
		if p+1 >= c.MaxSeq {
			break
		}
		logits = g.step(tensor.FromSlice(toks, b, 1).ToDevice(dev), positions(p, p+1))
	}
	return nil
}

// TokensPerSecond is the generation rate so far.
func (g *Generator) TokensPerSecond() float64 {
	busy := time.Duration(g.busy.Load()).Seconds()
	if busy == 0 {
		return 0
	}
	return float64(g.tokens.Load()) / busy
}

// encode and decode map text to tokens for a byte-level vocabulary; a
// larger vocabulary takes and prints numbers.
func encode(text string, vocab int) ([]int64, error) {
	if vocab == 256 {
		var out []int64
		for _, b := range []byte(text) {
			out = append(out, int64(b))
		}
		return out, nil
	}
	var out []int64
	for _, f := range strings.Fields(text) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 || v >= int64(vocab) {
			return nil, fmt.Errorf("token %q: give numbers below %d", f, vocab)
		}
		out = append(out, v)
	}
	return out, nil
}

func decode(tok int64, vocab int) string {
	if vocab == 256 {
		return string([]byte{byte(tok)})
	}
	return strconv.FormatInt(tok, 10) + " "
}

// handler serves /generate (server-sent events) and /metrics.
func handler(g *Generator) http.Handler {
	mux := http.NewServeMux()
	vocab := g.dec.M.Cfg.Vocab
	mux.HandleFunc("GET /generate", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		prompt, err := encode(q.Get("prompt"), vocab)
		if err != nil || len(prompt) == 0 {
			http.Error(w, "give a prompt: ?prompt=…", http.StatusBadRequest)
			return
		}
		n, _ := strconv.Atoi(q.Get("tokens"))
		if n <= 0 {
			n = 32
		}
		s := Sampling{}
		s.Temperature, _ = strconv.ParseFloat(q.Get("temperature"), 64)
		s.TopK, _ = strconv.Atoi(q.Get("top_k"))
		s.TopP, _ = strconv.ParseFloat(q.Get("top_p"), 64)
		w.Header().Set("Content-Type", "text/event-stream")
		flusher, _ := w.(http.Flusher)
		err = g.Generate(prompt, n, s, func(tok int64) bool {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", strconv.Quote(decode(tok, vocab))); err != nil {
				return false
			}
			if flusher != nil {
				flusher.Flush()
			}
			return r.Context().Err() == nil
		})
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", strconv.Quote(err.Error()))
			return
		}
		fmt.Fprint(w, "event: done\ndata: \n\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "llm_tokens_generated_total %d\nllm_tokens_per_second %.2f\n", g.tokens.Load(), g.TokensPerSecond())
	})
	return mux
}

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("llm", flag.ContinueOnError)
	config := fl.String("config", "tiny", "model size: tiny or 1b")
	weights := fl.String("weights", "", "safetensors file (default: a file per config in the temp folder, written when missing)")
	dtype := fl.String("dtype", "float32", "weight type: float32 or bfloat16")
	device := fl.String("device", "", "cpu or cuda (default: GOCOMPILE_DEVICE, else cpu)")
	prompt := fl.String("prompt", "The ", "prompt: text for the tiny config, token numbers for 1b")
	n := fl.Int("tokens", 32, "tokens to generate")
	eager := fl.Bool("eager", false, "run the decode step eagerly, not compiled")
	temp := fl.Float64("temperature", 0, "sampling temperature (0: greedy)")
	topK := fl.Int("top-k", 0, "sample among the k most likely tokens (0: all)")
	topP := fl.Float64("top-p", 0, "sample among the most likely tokens holding this mass (0: all)")
	serve := fl.String("serve", "", "serve HTTP on this address instead of generating once")
	batch := fl.Int("batch", 1, "sequences generated at once from the prompt (each sampled on its own)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *batch < 1 || *serve != "" && *batch != 1 {
		return errors.New("-batch must be at least 1, and 1 with -serve")
	}
	c, ok := llama.Configs[*config]
	if !ok {
		return fmt.Errorf("unknown config %q: tiny or 1b", *config)
	}
	dt := tensor.Float32
	if *dtype == "bfloat16" {
		dt = tensor.BFloat16
	}
	if *weights == "" {
		*weights = filepath.Join(os.TempDir(), fmt.Sprintf("gocompile-llm-%s-%s.safetensors", *config, *dtype))
	}
	m, err := llama.LoadModel(c, *weights, 1, dt)
	if err != nil {
		return err
	}
	dev := tensor.DefaultDevice()
	if *device != "" {
		if dev, err = tensor.ParseDevice(*device); err != nil {
			return err
		}
	}
	m.ToDevice(dev)
	g := newGenerator(m, !*eager, 7, *batch)
	if *serve != "" {
		fmt.Fprintf(stdout, "serving %s config on %v at http://%s/generate?prompt=…\n", *config, dev, *serve)
		return http.ListenAndServe(*serve, handler(g))
	}
	toks, err := encode(*prompt, c.Vocab)
	if err != nil {
		return err
	}
	prompts := make([][]int64, *batch)
	texts := make([]string, *batch)
	for i := range prompts {
		prompts[i], texts[i] = toks, *prompt
	}
	sampling := Sampling{Temperature: *temp, TopK: *topK, TopP: *topP}
	if *batch == 1 {
		fmt.Fprint(stdout, *prompt) // streamed as generated
	}
	err = g.GenerateBatch(prompts, *n, sampling, func(toks []int64) bool {
		for i, tok := range toks {
			texts[i] += decode(tok, c.Vocab)
		}
		if *batch == 1 {
			fmt.Fprint(stdout, decode(toks[0], c.Vocab))
		}
		return true
	})
	if *batch > 1 {
		for i, text := range texts {
			fmt.Fprintf(stdout, "[%d] %s\n", i, text)
		}
	} else {
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "%d tokens, %.1f tokens/s (%s config, batch %d, %v, %s, compiled %v)\n",
		g.tokens.Load(), g.TokensPerSecond(), *config, *batch, dev, *dtype, !*eager)
	return err
}
