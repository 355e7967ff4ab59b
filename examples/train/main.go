// Command train trains a small GPT-style language model on a synthetic
// corpus with package tensor's gradients and package optim's AdamW, on the
// CPU or a GPU, and writes what a training run leaves behind:
//
//   - init.safetensors: the initial weights and the corpus (what
//     bench/pytorch/train.py trains from, for the same run in PyTorch);
//   - losses.csv and loss.png: the loss of every step, and its curve
//     (drawn with gonum.org/v1/plot);
//   - checkpoint.safetensors: the trained weights, which the run reloads
//     into a new model to check that it computes the same loss.
//
// Usage:
//
//	go run ./examples/train [-steps 200] [-compile] [-out DIR] [-device cuda]
//	go run ./examples/train -bench 50 [-device cuda]   # µs a step, eager vs compiled (split and whole)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gocompile/internal/cpuprofile"
	"gocompile/tensor"
	"gocompile/tensor/optim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "train:", err)
		os.Exit(1)
	}
}

// corpusTokens is the corpus's length.
const corpusTokens = 20000

// Train runs c.Steps steps of AdamW on m over the corpus and returns each
// step's loss (before its update), each step run as how says.
func Train(m *Model, corpus []int64, dev tensor.Device, how StepKind, progress func(step int, loss float64)) []float64 {
	c := m.Cfg
	step := NewStep(m, how)
	losses := make([]float64, c.Steps)
	for i := range c.Steps {
		in, tg := Batch(corpus, c, i)
		losses[i] = step(in.ToDevice(dev), tg.ToDevice(dev)).Item()
		if progress != nil {
			progress(i, losses[i])
		}
	}
	return losses
}

// StepKind says how a training step runs.
type StepKind int

const (
	// Eager runs every op as it is called.
	Eager StepKind = iota
	// SplitStep compiles the loss and its backward as one function (one
	// joint graph) and runs the update as AdamW's own compiled step.
	SplitStep
	// WholeStep compiles the whole step, as torch.compile users write it:
	// ZeroGrad, the loss, Backward and the optimizer's Step in one graph.
	WholeStep
)

func (k StepKind) String() string { return [...]string{"eager", "split", "whole"}[k] }

// NewStep returns one training step of m with a new AdamW: zero the
// gradients, the loss of a batch and its backward, the update. It returns
// the loss without waiting for it.
func NewStep(m *Model, how StepKind) func(in, tg *tensor.Tensor) *tensor.Tensor {
	c := m.Cfg
	opt := optim.NewAdamW(m.List(), c.LR)
	opt.WeightDecay = c.WeightDecay
	opt.Compiled = how == SplitStep
	lossAndGrads := func(in, tg *tensor.Tensor) *tensor.Tensor {
		loss := m.Loss(in, tg)
		loss.Backward()
		return loss
	}
	if how == SplitStep {
		lossAndGrads = tensor.Compile(lossAndGrads)
	}
	step := func(in, tg *tensor.Tensor) *tensor.Tensor {
		opt.ZeroGrad()
		loss := lossAndGrads(in, tg)
		opt.Step()
		return loss
	}
	if how == WholeStep {
		step = tensor.Compile(step)
	}
	return step
}

// benchSteps times n training steps of the c model eagerly and compiled,
// the two taking turns for reps repetitions, each queued with one
// synchronization at its end, and reports the median µs a step and the
// most device memory a step holds beyond its model, gradients and
// optimizer state (on a GPU).
func benchSteps(w io.Writer, c Config, corpus []int64, dev tensor.Device, n, reps int) {
	type variant struct {
		name  string
		step  func(in, tg *tensor.Tensor) *tensor.Tensor
		us    []float64
		extra int64
	}
	in, tg := Batch(corpus, c, 0)
	in, tg = in.ToDevice(dev), tg.ToDevice(dev)
	var vs []*variant
	for _, how := range []StepKind{Eager, SplitStep, WholeStep} {
		m := NewModel(c, 1)
		for k, p := range m.Params {
			m.Params[k] = p.ToDevice(dev).SetRequiresGrad(true)
		}
		v := &variant{name: how.String(), step: NewStep(m, how)}
		for range 3 { // compile, and the optimizer's state
			v.step(in, tg)
		}
		vs = append(vs, v)
	}
	for range reps {
		for _, v := range vs {
			tensor.Synchronize(dev)
			if dev != tensor.CPU {
				tensor.ResetPeakMemoryStats(dev)
			}
			base := memoryHeld(dev)
			start := time.Now()
			for range n {
				v.step(in, tg)
			}
			tensor.Synchronize(dev)
			v.us = append(v.us, float64(time.Since(start).Microseconds())/float64(n))
			if dev != tensor.CPU {
				v.extra = max(v.extra, tensor.MemoryStats(dev).PeakAllocated-base)
			}
		}
	}
	fmt.Fprintf(w, "training step: %d layers, dim %d, vocab %d, batch %d × %d tokens, float32, on %v\n", c.Layers, c.Dim, c.Vocab, c.Batch, c.Seq, dev)
	fmt.Fprintf(w, "%-9s %10s %16s\n", "", "µs a step", "peak extra MB")
	for _, v := range vs {
		slices.Sort(v.us)
		fmt.Fprintf(w, "%-9s %10.1f %16.2f\n", v.name, v.us[len(v.us)/2], float64(v.extra)/(1<<20))
	}
	for _, v := range vs[1:] {
		fmt.Fprintf(w, "eager/%s: %.2fx\n", v.name, vs[0].us[len(vs[0].us)/2]/v.us[len(v.us)/2])
	}
}

// memoryHeld is the device memory tensors hold on dev (0 on the CPU).
func memoryHeld(dev tensor.Device) int64 {
	if dev == tensor.CPU {
		return 0
	}
	return tensor.MemoryStats(dev).Allocated
}

// save writes m's parameters (and extra tensors) as safetensors.
func save(path string, m *Model, extra map[string]*tensor.Tensor) error {
	ts := map[string]*tensor.Tensor{}
	for n, p := range m.Params {
		ts[n] = p.Detach().ToDevice(tensor.CPU)
	}
	for n, t := range extra {
		ts[n] = t
	}
	c := m.Cfg
	meta := map[string]string{"vocab": strconv.Itoa(c.Vocab), "dim": strconv.Itoa(c.Dim), "heads": strconv.Itoa(c.Heads),
		"layers": strconv.Itoa(c.Layers), "seq": strconv.Itoa(c.Seq), "batch": strconv.Itoa(c.Batch),
		"steps": strconv.Itoa(c.Steps), "lr": strconv.FormatFloat(c.LR, 'g', -1, 64),
		"weight_decay": strconv.FormatFloat(c.WeightDecay, 'g', -1, 64)}
	return tensor.SaveSafetensors(path, ts, meta)
}

// load reads a model of config c from a safetensors file.
func load(path string, c Config) (*Model, error) {
	ts, _, err := tensor.LoadSafetensors(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: c, Params: map[string]*tensor.Tensor{}}
	for n, s := range paramShapes(c) {
		t, ok := ts[n]
		if !ok {
			return nil, fmt.Errorf("%s: no tensor %q", path, n)
		}
		if fmt.Sprint(t.Shape()) != fmt.Sprint(s) {
			return nil, fmt.Errorf("%s: %q has shape %v, want %v", path, n, t.Shape(), s)
		}
		m.Params[n] = t.SetRequiresGrad(true)
	}
	return m, nil
}

// plotLosses draws the loss curve into a PNG file.
func plotLosses(path string, losses []float64) error {
	p := plot.New()
	p.Title.Text = "training loss"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "cross-entropy"
	xy := make(plotter.XYs, len(losses))
	for i, l := range losses {
		xy[i] = plotter.XY{X: float64(i), Y: l}
	}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	p.Add(line, plotter.NewGrid())
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("train", flag.ContinueOnError)
	steps := fl.Int("steps", Tiny.Steps, "training steps")
	out := fl.String("out", filepath.Join(os.TempDir(), "gocompile-train"), "folder for the weights, losses and plot")
	device := fl.String("device", "", "cpu or cuda (default: GOCOMPILE_DEVICE, else cpu)")
	compiled := fl.Bool("compile", false, "run each training step (zero the gradients, loss, backward, AdamW) as one compiled function")
	bench := fl.Int("bench", 0, "time this many steps eagerly, split and whole-step compiled (median of -reps) instead of training")
	reps := fl.Int("reps", 5, "repetitions of -bench")
	cpuProfile := fl.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *steps < 1 {
		return errors.New("-steps must be at least 1")
	}
	dev := tensor.DefaultDevice()
	if *device != "" {
		var err error
		if dev, err = tensor.ParseDevice(*device); err != nil {
			return err
		}
	}
	stop, err := cpuprofile.Start(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	c := Tiny
	c.Steps = *steps
	corpus := Corpus(corpusTokens)
	if *bench > 0 {
		benchSteps(stdout, c, corpus, dev, *bench, max(*reps, 1))
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	m := NewModel(c, 1)
	if err := save(filepath.Join(*out, "init.safetensors"), m, map[string]*tensor.Tensor{
		"corpus": tensor.FromSlice(corpus, len(corpus))}); err != nil {
		return err
	}
	for n, p := range m.Params {
		m.Params[n] = p.ToDevice(dev).SetRequiresGrad(true)
	}
	start := time.Now()
	how := Eager
	if *compiled {
		how = WholeStep
	}
	losses := Train(m, corpus, dev, how, func(step int, loss float64) {
		if step%20 == 0 || step == c.Steps-1 {
			fmt.Fprintf(stdout, "step %4d  loss %.4f\n", step, loss)
		}
	})
	secs := time.Since(start).Seconds()
	mode := "eagerly"
	if *compiled {
		mode = "compiled"
	}
	fmt.Fprintf(stdout, "%d steps on %v, %s, in %.1f s (%.1f ms a step); loss %.4f → %.4f\n",
		c.Steps, dev, mode, secs, 1e3*secs/float64(c.Steps), losses[0], losses[len(losses)-1])

	csv := "step,loss\n"
	for i, l := range losses {
		csv += fmt.Sprintf("%d,%.8g\n", i, l)
	}
	if err := os.WriteFile(filepath.Join(*out, "losses.csv"), []byte(csv), 0o644); err != nil {
		return err
	}
	if err := plotLosses(filepath.Join(*out, "loss.png"), losses); err != nil {
		return err
	}
	ckpt := filepath.Join(*out, "checkpoint.safetensors")
	if err := save(ckpt, m, nil); err != nil {
		return err
	}
	back, err := load(ckpt, c)
	if err != nil {
		return err
	}
	in, tg := Batch(corpus, c, c.Steps)
	var before, after float64
	tensor.NoGrad(func() {
		before = m.Loss(in.ToDevice(dev), tg.ToDevice(dev)).Item()
		after = back.Loss(in, tg).Item()
	})
	if math.Abs(before-after) > 1e-4*math.Abs(before) {
		return fmt.Errorf("the reloaded checkpoint gives loss %v, the trained model %v", after, before)
	}
	fmt.Fprintf(stdout, "wrote %s (init.safetensors, losses.csv, loss.png, checkpoint.safetensors); the reloaded checkpoint gives the same loss, %.4f\n",
		*out, after)
	return nil
}
