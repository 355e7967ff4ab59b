package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/internal/testcache"
	"gocompile/tensor"
)

func TestMain(m *testing.M) { testcache.Main(m) }

// The same model, initial weights and batches trained in PyTorch
// (testdata/parity) give the same losses, eagerly, with the loss and its
// backward compiled apart from the update, and with the whole step one
// compiled function: within 1e-4 relative at each of the first 20 steps,
// and within 1% at the last of 200.
func TestTrainingParity(t *testing.T) {
	want, err := tensor.LoadNPY("testdata/parity/losses.npy")
	if err != nil {
		t.Fatal(err)
	}
	w := want.Float64s()
	c := Tiny
	if len(w) != c.Steps {
		t.Fatalf("%d PyTorch losses, want %d", len(w), c.Steps)
	}
	for _, how := range []StepKind{Eager, SplitStep, WholeStep} {
		got := Train(NewModel(c, 1), Corpus(corpusTokens), tensor.CPU, how, nil)
		worst := 0.0
		for i := range 20 {
			d := math.Abs(got[i]-w[i]) / math.Abs(w[i])
			worst = max(worst, d)
			if d > 1e-4 {
				t.Errorf("%v, step %d: loss %v, PyTorch %v (relative difference %.2g)", how, i, got[i], w[i], d)
			}
		}
		last := c.Steps - 1
		if d := math.Abs(got[last]-w[last]) / math.Abs(w[last]); d > 0.01 {
			t.Errorf("%v, last step: loss %v, PyTorch %v", how, got[last], w[last])
		}
		if got[last] > 0.5*got[0] {
			t.Errorf("%v: the loss fell from %v to only %v", how, got[0], got[last])
		}
		t.Logf("%v: first 20 steps within %.2g of PyTorch; last loss %v, PyTorch %v", how, worst, got[last], w[last])
	}
}

// The command writes its files and checks its own checkpoint.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"-steps", "3", "-out", dir}, &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"init.safetensors", "losses.csv", "loss.png", "checkpoint.safetensors"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "same loss") {
		t.Errorf("output:\n%s", out.String())
	}
	if err := run([]string{"-steps", "0"}, &out); err == nil {
		t.Error("-steps 0 accepted")
	}
}

// On a GPU the first steps' losses equal the CPU's, for each way a step
// runs.
func TestGPUTraining(t *testing.T) {
	dev := tensor.CUDA(0)
	if err := tensor.Try(func() { tensor.Zeros(tensor.Float32, 1).ToDevice(dev) }); err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	c := Tiny
	c.Steps = 10
	corpus := Corpus(corpusTokens)
	want := Train(NewModel(c, 1), corpus, tensor.CPU, Eager, nil)
	for _, how := range []StepKind{Eager, SplitStep, WholeStep} {
		m := NewModel(c, 1)
		for n, p := range m.Params {
			m.Params[n] = p.Detach().ToDevice(dev).SetRequiresGrad(true)
		}
		got := Train(m, corpus, dev, how, nil)
		for i := range got {
			if d := math.Abs(got[i]-want[i]) / want[i]; d > 1e-3 {
				t.Errorf("%v, step %d: loss %v on the GPU, %v on the CPU", how, i, got[i], want[i])
			}
		}
	}
}
