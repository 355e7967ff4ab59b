package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/examples/llm/llama"
	"gocompile/internal/testcache"
	"gocompile/tensor"
)

func TestMain(m *testing.M) { testcache.Main(m) }

func tinyModel(t *testing.T) *llama.Model {
	t.Helper()
	m, err := llama.LoadModel(llama.Configs["tiny"], filepath.Join(t.TempDir(), "tiny.safetensors"), 1, tensor.Float32)
	if err != nil {
		t.Fatal(err)
	}
	m.ToDevice(tensor.DefaultDevice())
	return m
}

// The compiled decode step gives the eager step's logits (within float32
// rounding) and greedy tokens for 32 steps after a prompt, and leaves the
// same KV cache.
func TestCompiledDecodeMatchesEager(t *testing.T) {
	m := tinyModel(t)
	eager, compiled := newGenerator(m, false, 1, 1), newGenerator(m, true, 1, 1)
	prompt, _ := encode("The quick brown fox", m.Cfg.Vocab)
	var te, tc []int64
	if err := eager.Generate(prompt, 32, Sampling{}, func(tok int64) bool { te = append(te, tok); return true }); err != nil {
		t.Fatal(err)
	}
	if err := compiled.Generate(prompt, 32, Sampling{}, func(tok int64) bool { tc = append(tc, tok); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(te) != fmt.Sprint(tc) {
		t.Errorf("greedy tokens differ:\neager    %v\ncompiled %v", te, tc)
	}
	for i := range m.Cfg.Layers {
		for _, pair := range [][2]*tensor.Tensor{{eager.dec.K[i], compiled.dec.K[i]}, {eager.dec.V[i], compiled.dec.V[i]}} {
			a, b := pair[0].Float64s(), pair[1].Float64s()
			for j := range a {
				if math.Abs(a[j]-b[j]) > 1e-4*(1+math.Abs(a[j])) {
					t.Fatalf("layer %d: cache element %d is %v compiled, %v eager", i, j, b[j], a[j])
				}
			}
		}
	}
	// One decode step's logits, from the same cache.
	pos := tensor.FromSlice([]int64{int64(len(prompt) + 32 - 1)})
	tok := tensor.FromSlice([]int64{tc[len(tc)-1]}, 1, 1)
	le, lc := eager.dec.Forward(tok, pos).Float64s(), compiled.step(tok, pos).Float64s()
	for j := range le {
		if math.Abs(le[j]-lc[j]) > 1e-4*(1+math.Abs(le[j])) {
			t.Fatalf("logit %d: %v compiled, %v eager", j, lc[j], le[j])
		}
	}
}

// A batch of sequences decodes as each sequence alone: three prompts of
// one length through the compiled step of a batch-3 generator give each
// prompt's greedy tokens from a batch-1 generator (eager), step by step;
// prompts of other lengths or counts are refused.
func TestBatchMatchesSingleSequences(t *testing.T) {
	m := tinyModel(t)
	var prompts [][]int64
	for _, text := range []string{"The quick brown fox", "Lorem ipsum dolor s", "0123456789abcdefghi"} {
		p, _ := encode(text, m.Cfg.Vocab)
		prompts = append(prompts, p)
	}
	const n = 24
	batch := newGenerator(m, true, 1, len(prompts))
	got := make([][]int64, len(prompts))
	if err := batch.GenerateBatch(prompts, n, Sampling{}, func(toks []int64) bool {
		for i, tok := range toks {
			got[i] = append(got[i], tok)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for i, p := range prompts {
		var want []int64
		if err := newGenerator(m, false, 1, 1).Generate(p, n, Sampling{}, func(tok int64) bool { want = append(want, tok); return true }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got[i]) != fmt.Sprint(want) {
			t.Errorf("sequence %d: batched %v, alone %v", i, got[i], want)
		}
	}
	if n := batch.tokens.Load(); n != int64(len(prompts)*24) {
		t.Errorf("%d tokens counted, want %d", n, len(prompts)*24)
	}
	emit := func([]int64) bool { return true }
	if err := batch.GenerateBatch(prompts[:2], 4, Sampling{}, emit); err == nil || !strings.Contains(err.Error(), "one per sequence") {
		t.Errorf("two prompts for a batch of 3: %v", err)
	}
	short := [][]int64{prompts[0], prompts[1], prompts[2][:5]}
	if err := batch.GenerateBatch(short, 4, Sampling{}, emit); err == nil || !strings.Contains(err.Error(), "one length") {
		t.Errorf("prompts of other lengths: %v", err)
	}
}

// Top-k of 1 and a tiny top-p are greedy; seeded sampling repeats.
func TestSampling(t *testing.T) {
	logits := tensor.Randn(3, tensor.Float32, 2, 50)
	g := tensor.NewGenerator(1)
	greedy := fmt.Sprint(sample(logits, Sampling{}, g))
	if got := fmt.Sprint(sample(logits, Sampling{Temperature: 1, TopK: 1}, g)); got != greedy {
		t.Errorf("top-k 1: %s, greedy %s", got, greedy)
	}
	if got := fmt.Sprint(sample(logits, Sampling{Temperature: 1, TopP: 1e-6}, g)); got != greedy {
		t.Errorf("top-p 1e-6: %s, greedy %s", got, greedy)
	}
	s := Sampling{Temperature: 0.8, TopK: 20, TopP: 0.9}
	a := fmt.Sprint(sample(logits, s, tensor.NewGenerator(5)), sample(logits, s, tensor.NewGenerator(5)))
	b := fmt.Sprint(sample(logits, s, tensor.NewGenerator(5)), sample(logits, s, tensor.NewGenerator(5)))
	if a != b {
		t.Errorf("the same seed sampled %s and %s", a, b)
	}
}

// The server streams one event per token, then done, and counts them in
// /metrics; a request without a prompt is refused.
func TestServer(t *testing.T) {
	g := newGenerator(tinyModel(t), true, 1, 1)
	srv := httptest.NewServer(handler(g))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/generate?prompt=hi&tokens=5&temperature=0.7&top_k=10&top_p=0.9")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	data, done := 0, false
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "event: done":
			done = true
		case strings.HasPrefix(line, "data: \""):
			data++
		}
	}
	if data != 5 || !done {
		t.Errorf("%d token events (want 5), done %v", data, done)
	}
	m, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	if !strings.Contains(string(body), "llm_tokens_generated_total 5") || !strings.Contains(string(body), "llm_tokens_per_second") {
		t.Errorf("metrics:\n%s", body)
	}
	bad, err := http.Get(srv.URL + "/generate")
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Errorf("no prompt: status %d", bad.StatusCode)
	}
}

// The tiny model's logits match PyTorch's on the same weights (made by
// bench/pytorch/llm.py, see testdata/tiny-parity/README): the prefill's
// last position and 32 greedy decode steps, eager and compiled, within
// 1e-4 relative (of the largest logit), and the same greedy token at every
// step whose top-two gap is above that.
func TestParityWithPyTorch(t *testing.T) {
	m := tinyModel(t)
	prompt, _ := encode("The quick brown fox", m.Cfg.Vocab)
	want, err := tensor.LoadNPY("testdata/tiny-parity/logits.npy")
	if err != nil {
		t.Fatal(err)
	}
	checkParity(t, m, prompt, want, "testdata/tiny-parity", 1e-4)
}

// With GOCOMPILE_LLM_PARITY naming a folder that holds config.txt ("1b
// bfloat16"), prompt.txt (token numbers), model.safetensors, and the
// logits.npy and tokens.npy bench/pytorch/llm.py wrote for them
// (scripts/llm-parity makes one on a GPU machine), that model matches
// PyTorch as the tiny one does: within 1e-4 for float32; for bfloat16,
// within PyTorch's bfloat16 tolerance (rtol 1.6e-2), or, where the folder
// holds logits-float32.npy (PyTorch's float32 run on the same weights and
// tokens), within twice PyTorch's own bfloat16 error of that reference.
func TestParityWithPyTorchFromDir(t *testing.T) {
	dir := os.Getenv("GOCOMPILE_LLM_PARITY")
	if dir == "" {
		t.Skip("set GOCOMPILE_LLM_PARITY to a folder made by scripts/llm-parity")
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	var name, dtype string
	if _, err := fmt.Sscan(read("config.txt"), &name, &dtype); err != nil {
		t.Fatalf("config.txt: %v", err)
	}
	c, ok := llama.Configs[name]
	if !ok {
		t.Fatalf("config.txt: no config %q", name)
	}
	dt, tol := tensor.Float32, 1e-4
	if dtype == "bfloat16" {
		dt, tol = tensor.BFloat16, 1.6e-2
	}
	m, err := llama.LoadModel(c, filepath.Join(dir, "model.safetensors"), 1, dt)
	if err != nil {
		t.Fatal(err)
	}
	m.ToDevice(tensor.DefaultDevice())
	prompt, err := encode(read("prompt.txt"), c.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tensor.LoadNPY(filepath.Join(dir, "logits.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if ref, err := tensor.LoadNPY(filepath.Join(dir, "logits-float32.npy")); err == nil && dt != tensor.Float32 {
		// PyTorch's own error at this dtype, against its float32 run on
		// the same weights and tokens, sets the tolerance: ours may be
		// at most twice it.
		torchErr := 0.0
		rl, wl := ref.Float64s(), want.Float64s()
		for s := range len(rl) / c.Vocab {
			r, w := rl[s*c.Vocab:(s+1)*c.Vocab], wl[s*c.Vocab:(s+1)*c.Vocab]
			scale := 0.0
			for _, v := range r {
				scale = math.Max(scale, math.Abs(v))
			}
			for j := range r {
				torchErr = math.Max(torchErr, math.Abs(w[j]-r[j])/scale)
			}
		}
		t.Logf("PyTorch %v against its float32: largest logit difference %.3g of the step's largest logit", dt, torchErr)
		want, tol = ref, 2*torchErr
	}
	checkParity(t, m, prompt, want, dir, tol)
}

// checkParity runs m over prompt and then PyTorch's greedy tokens from
// dir (tokens.npy), eagerly and compiled, and checks every step's logits
// against want within tol relative to the step's largest logit, and each
// greedy token where want's top-two gap exceeds that.
func checkParity(t *testing.T, m *llama.Model, prompt []int64, want *tensor.Tensor, dir string, tol float64) {
	t.Helper()
	wantTok, err := tensor.LoadNPY(filepath.Join(dir, "tokens.npy"))
	if err != nil {
		t.Fatal(err)
	}
	steps := wantTok.Size(0)
	wl, wt := want.Float64s(), wantTok.Int64s()
	vocab := m.Cfg.Vocab
	for _, compiled := range []bool{false, true} {
		g := newGenerator(m, compiled, 1, 1)
		dev := m.TokEmb.Device()
		var logits []*tensor.Tensor
		logits = append(logits, g.dec.Forward(tensor.FromSlice(prompt, 1, len(prompt)).ToDevice(dev),
			tensor.Arange(0, float64(len(prompt)), 1, tensor.Int64).ToDevice(dev)))
		for i := range steps {
			tok := wt[i] // follow PyTorch's tokens, so each step compares like with like
			p := float64(len(prompt) + i)
			logits = append(logits, g.step(tensor.FromSlice([]int64{tok}, 1, 1).ToDevice(dev), tensor.Arange(p, p+1, 1, tensor.Int64).ToDevice(dev)))
		}
		worst := 0.0
		for s, l := range logits {
			got := l.Float64s()
			ref := wl[s*vocab : (s+1)*vocab]
			scale, best, second := 0.0, 0, -1
			for j, v := range ref {
				scale = math.Max(scale, math.Abs(v))
				if v > ref[best] {
					best = j
				}
			}
			for j := range ref {
				if j != best && (second < 0 || ref[j] > ref[second]) {
					second = j
				}
			}
			for j := range ref {
				d := math.Abs(got[j] - ref[j])
				worst = max(worst, d/scale)
				if d > tol*scale {
					t.Fatalf("compiled %v, step %d: logit %d is %v, PyTorch %v", compiled, s, j, got[j], ref[j])
				}
			}
			if s < steps && ref[best]-ref[second] > tol*scale {
				if g := argmax(got); g != best {
					t.Errorf("compiled %v, step %d: greedy token %d, PyTorch %d", compiled, s, g, best)
				}
			}
		}
		t.Logf("compiled %v: %d steps, largest logit difference %.3g of the step's largest logit", compiled, len(logits), worst)
	}
}

func argmax(v []float64) int {
	best := 0
	for j := range v {
		if v[j] > v[best] {
			best = j
		}
	}
	return best
}
