package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"gocompile/tensor"
)

// The shape sweep (-sweep): seeded random cases per category (see
// sweep_cases.go), each timed eagerly and compiled like the suite's
// workloads, reported as % of the copy bandwidth of the same run, and
// checked against eager and a float64 reference on the CPU.

// SweepRow is one case's result. The timing fields have the names of the
// suite's Row (and of bench/pytorch/sweep.py's rows).
type SweepRow struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	DType    string `json:"dtype"`
	Latency  bool   `json:"latency"`
	Shape    string `json:"shape"`
	Desc     string `json:"desc"`
	Timing
	EagerPct    float64   `json:"eager_pct_of_copy"`
	Speedup     float64   `json:"speedup"` // eager time over compiled time
	FirstCallS  float64   `json:"first_call_s"`
	MaxAbsDiff  float64   `json:"max_abs_diff"` // compiled against eager
	EagerRepsUs []float64 `json:"eager_reps_us"`
	CompRepsUs  []float64 `json:"compiled_reps_us"`
	Kernels     int       `json:"kernels"`
	Regions     []string  `json:"regions"`
	// Parity: normwise errors max|got-want| / max|want| (for ArgMax the
	// fraction of indices that differ), the tolerance, and what failed.
	ErrEager    float64  `json:"err_compiled_vs_eager"`
	ErrRef      float64  `json:"err_compiled_vs_f64"`
	ErrEagerRef float64  `json:"err_eager_vs_f64"`
	Tol         float64  `json:"tol"`
	Mismatch    []string `json:"mismatch,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
}

// CategoryStat summarises a category: % of copy over its non-latency
// cases, the geometric mean speedup over all.
type CategoryStat struct {
	Category      string  `json:"category"`
	Cases         int     `json:"cases"`
	LatencyCases  int     `json:"latency_cases"`
	MedianPct     float64 `json:"median_pct_of_copy"`
	MinPct        float64 `json:"min_pct_of_copy"`
	GeomeanSpeed  float64 `json:"geomean_speedup"`
	Mismatches    int     `json:"mismatches"`
	MedianEagerPc float64 `json:"median_eager_pct_of_copy"`
}

// SweepResult is the sweep run as -json writes it: the cases, so that the
// file alone reproduces them, and the results.
type SweepResult struct {
	RunInfo
	Seed uint64 `json:"seed"`
	// Reference says whether cases were checked against the float64
	// run (err_compiled_vs_f64, err_eager_vs_f64), or against eager alone.
	Reference bool `json:"reference"`
	CopyBandwidth
	Cases      []SweepCase    `json:"cases"`
	Rows       []SweepRow     `json:"rows"`
	Categories []CategoryStat `json:"categories"`
}

// SweepCaseList is what -cases-json writes: the cases only.
type SweepCaseList struct {
	Suite string      `json:"suite"`
	Seed  uint64      `json:"seed"`
	Quick bool        `json:"quick"`
	Cases []SweepCase `json:"cases"`
}

// sweepCases is the case list the flags select.
func sweepCases(cfg *config) []SweepCase {
	cs := GenerateSweep(cfg.seed, cfg.cases, cfg.quick)
	if cfg.only == "" {
		return cs
	}
	var out []SweepCase
	for _, c := range cs {
		if strings.Contains(c.ID, cfg.only) || strings.Contains(c.Category, cfg.only) {
			out = append(out, c)
		}
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// runSweep runs the sweep; it returns an error after printing everything
// when a case's results do not match.
func runSweep(cfg *config, out io.Writer) error {
	cases := sweepCases(cfg)
	if cfg.casesJSON != "" {
		if err := writeJSON(cfg.casesJSON, &SweepCaseList{Suite: "gocompile-sweep", Seed: cfg.seed, Quick: cfg.quick, Cases: cases}); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %d cases to %s\n", len(cases), cfg.casesJSON)
		if cfg.listOnly {
			return nil
		}
	}
	res := &SweepResult{RunInfo: newRunInfo(cfg, "gocompile-sweep"), Seed: cfg.seed, Reference: cfg.reference, Cases: cases}
	fmt.Fprintf(out, "sweep: seed %d, %d cases; device: %s (%s), GOMAXPROCS %d, %s, mode %s%s\n",
		cfg.seed, len(cases), res.Device, res.DeviceKind, res.Threads, res.Version, cfg.mode,
		map[bool]string{true: ", -quick (sizes /16)"}[cfg.quick])
	res.CopyBandwidth = measureCopy(cfg)
	fmt.Fprintf(out, "copy bandwidth: %.1f GB/s (%s)\n", res.CopyGBs, res.CopyMethod)

	// Warnings (a kernel that failed to build, the backend falling back to
	// eager code) are recorded against the case that logged them.
	warns := &sweepWarnings{next: slog.Default().Handler()}
	old := slog.Default()
	slog.SetDefault(slog.New(warns))
	defer slog.SetDefault(old)

	for i, c := range cases {
		r := runSweepCase(cfg, c, warns)
		if res.CopyGBs > 0 {
			r.PctOfCopy = 100 * r.CompiledGBs / res.CopyGBs
			r.EagerPct = 100 * r.EagerGBs / res.CopyGBs
		}
		res.Rows = append(res.Rows, r)
		flag := ""
		if len(r.Mismatch) > 0 {
			flag = "  MISMATCH: " + strings.Join(r.Mismatch, "; ")
		}
		fmt.Fprintf(out, "  [%d/%d] %s %s: eager %.1f µs, compiled %.1f µs (%.0f%% of copy)%s\n",
			i+1, len(cases), r.ID, r.DType, r.EagerUs, r.CompiledUs, r.PctOfCopy, flag)
		if cfg.jsonPath != "" { // the rows so far, in case the run is cut short
			res.Categories = sweepCategoryStats(res.Rows)
			if err := writeJSON(cfg.jsonPath, res); err != nil {
				return err
			}
		}
	}
	res.Categories = sweepCategoryStats(res.Rows)
	printSweep(out, res)

	if cfg.jsonPath != "" {
		if err := writeJSON(cfg.jsonPath, res); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", cfg.jsonPath)
	}
	var bad []string
	for _, r := range res.Rows {
		if len(r.Mismatch) > 0 {
			bad = append(bad, r.ID)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("sweep: %d of %d cases failed their parity checks: %s", len(bad), len(res.Rows), strings.Join(bad, ", "))
	}
	return nil
}

// sweepWarnings passes records on and keeps the warnings' messages.
type sweepWarnings struct {
	next slog.Handler
	mu   sync.Mutex
	msgs []string
}

func (w *sweepWarnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || w.next.Enabled(ctx, l)
}
func (w *sweepWarnings) WithAttrs(a []slog.Attr) slog.Handler {
	return &sweepWarnings{next: w.next.WithAttrs(a)}
}
func (w *sweepWarnings) WithGroup(g string) slog.Handler {
	return &sweepWarnings{next: w.next.WithGroup(g)}
}
func (w *sweepWarnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		w.msgs = append(w.msgs, r.Message)
		w.mu.Unlock()
	}
	if w.next.Enabled(ctx, r.Level) {
		return w.next.Handle(ctx, r)
	}
	return nil
}

func (w *sweepWarnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// sweepInputs builds a case's arguments on the device and, where
// reference is set, as float64 on the CPU, from the same values: normal,
// drawn from the seed and the case id, rounded to the case's dtype.
func sweepInputs(c SweepCase, seed uint64, dev tensor.Device, reference bool) (xs, ref []*tensor.Tensor, err error) {
	for k, in := range c.Inputs {
		dt, err := parseDType(in.DType)
		if err != nil {
			return nil, nil, err
		}
		v := normals(seed, c.ID+"/"+in.Name, numel(in.Storage))
		host := tensor.FromSlice(v, in.Storage...).To(dt)
		x := host.ToDevice(dev)
		if in.Perm != nil {
			x = x.Permute(in.Perm...)
		}
		if !slices.Equal(x.Shape(), in.Shape) {
			return nil, nil, fmt.Errorf("input %d: shape %v, the case says %v", k, x.Shape(), in.Shape)
		}
		xs = append(xs, x)
		if reference {
			r := host.To(tensor.Float64)
			if in.Perm != nil {
				r = r.Permute(in.Perm...)
			}
			ref = append(ref, r)
		}
	}
	return xs, ref, nil
}

// normals is n standard normal float32 values from (seed, key), drawn in
// parallel blocks that each have their own stream.
func normals(seed uint64, key string, n int) []float32 {
	h := uint64(14695981039346656037)
	for i := range len(key) {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	v := make([]float32, n)
	const block = 1 << 18
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += block {
		wg.Add(1)
		sem <- struct{}{}
		go func(lo int) {
			defer func() { <-sem; wg.Done() }()
			r := rand.New(rand.NewPCG(seed^h, uint64(lo)))
			for i := lo; i < min(lo+block, n); i++ {
				v[i] = float32(r.NormFloat64())
			}
		}(lo)
	}
	wg.Wait()
	return v
}

// sweepTol is the normwise tolerance for a case of dtype dt: eager code
// rounds every intermediate to dt, compiled code and the reference do not.
func sweepTol(dt string) float64 {
	switch dt {
	case "float16":
		return 1e-2
	case "bfloat16":
		return 6e-2
	}
	return 1e-3
}

// sweepErr compares got with want on the host: max|got-want| / max|want|
// for floating results (Inf where NaNs or shapes differ), the fraction of
// differing elements for integer ones (ArgMax).
func sweepErr(got, want *tensor.Tensor) float64 {
	if !slices.Equal(got.Shape(), want.Shape()) || got.DType().IsFloat() != want.DType().IsFloat() {
		return math.Inf(1)
	}
	got, want = got.ToDevice(tensor.CPU), want.ToDevice(tensor.CPU)
	if !got.DType().IsFloat() {
		g, w := got.Int64s(), want.Int64s()
		diff := 0
		for i := range g {
			if g[i] != w[i] {
				diff++
			}
		}
		return float64(diff) / float64(max(len(g), 1))
	}
	g, w := got.To(tensor.Float64).Float64s(), want.To(tensor.Float64).Float64s()
	scale, d := 0.0, 0.0
	for i := range w {
		if gn, wn := math.IsNaN(g[i]), math.IsNaN(w[i]); gn || wn {
			if gn != wn {
				return math.Inf(1)
			}
			continue
		}
		scale = max(scale, math.Abs(w[i]))
		d = max(d, math.Abs(g[i]-w[i]))
	}
	if d == 0 {
		return 0
	}
	return d / max(scale, 1e-30)
}

// runSweepCase times one case and checks its parity; a panic (a misuse
// the generator made, or a library failure) is reported as a mismatch.
func runSweepCase(cfg *config, c SweepCase, warns *sweepWarnings) (r SweepRow) {
	r = SweepRow{ID: c.ID, Category: c.Category, DType: c.DType, Latency: c.Latency, Desc: c.Desc, Tol: sweepTol(c.DType)}
	var shapes []string
	for _, in := range c.Inputs {
		s := dimsString(in.Shape)
		if in.Perm != nil {
			s += fmt.Sprintf("(perm%v)", in.Perm)
		}
		shapes = append(shapes, s)
	}
	r.Shape = strings.Join(shapes, ",")
	warns.take()
	defer func() { r.Warnings = append(r.Warnings, warns.take()...) }()
	runtime.GC()
	tensor.Synchronize(cfg.device)
	tensor.EmptyCache(cfg.device)
	if err := tensor.Try(func() { sweepCaseBody(cfg, c, &r) }); err != nil {
		r.Mismatch = append(r.Mismatch, "panic: "+firstLine(err.Error()))
	}
	if len(r.Warnings) > 0 {
		r.Mismatch = append(r.Mismatch, "warning: "+firstLine(r.Warnings[0]))
	}
	return r
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func dimsString(s []int) string {
	p := make([]string, len(s))
	for i, v := range s {
		p[i] = fmt.Sprint(v)
	}
	if len(p) == 0 {
		return "scalar"
	}
	return strings.Join(p, "x")
}

func sweepCaseBody(cfg *config, c SweepCase, r *SweepRow) {
	xs, xs64, err := sweepInputs(c, cfg.seed, cfg.device, cfg.reference)
	if err != nil {
		panic(err)
	}
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return c.eval(xs) }
	cf := tensor.Compile(f, compileOpts...)
	eager := func() *tensor.Tensor { return f(xs) }
	compiled := func() *tensor.Tensor { return cf(xs) }
	tensor.Synchronize(cfg.device)

	var cOut *tensor.Tensor
	cOut, r.FirstCallS = firstCall(cfg.device, compiled)
	eOut := eager()
	for _, in := range xs {
		r.Bytes += int64(in.Numel() * in.DType().Size())
	}
	r.Bytes += int64(cOut.Numel() * cOut.DType().Size())

	// Parity, before timing: compiled against eager, both against the
	// program run in float64 on the CPU (unless -reference=false).
	r.ErrEager = sweepErr(cOut, eOut)
	if cOut.DType().IsFloat() {
		r.MaxAbsDiff = maxAbsDiff(eOut, cOut)
	}
	type check struct {
		what string
		v    float64
	}
	checks := []check{{"compiled vs eager", r.ErrEager}}
	if cfg.reference {
		want := c.eval(xs64)
		r.ErrRef = sweepErr(cOut, want)
		r.ErrEagerRef = sweepErr(eOut, want)
		checks = append(checks, check{"compiled vs float64", r.ErrRef}, check{"eager vs float64", r.ErrEagerRef})
	}
	for _, e := range checks {
		tol := r.Tol
		if !cOut.DType().IsFloat() {
			tol = 0 // indices must agree
		}
		if !(e.v <= tol) {
			r.Mismatch = append(r.Mismatch, fmt.Sprintf("%s: error %.3g > %.3g", e.what, e.v, tol))
		}
	}
	cOut, eOut, xs64 = nil, nil, nil
	r.EagerRepsUs, r.CompRepsUs = r.measurePair(cfg, eager, compiled)
	r.Speedup = r.EagerUs / r.CompiledUs
	if ex, err := tensor.Explain(f, xs); err == nil {
		r.Kernels, r.Regions = len(ex.Regions), ex.Regions
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func geomean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += math.Log(x)
	}
	return math.Exp(s / float64(len(v)))
}

// sweepCategoryStats summarises the rows per category, in the categories'
// order, then over all cases.
func sweepCategoryStats(rows []SweepRow) []CategoryStat {
	stat := func(name string, keep func(SweepRow) bool) CategoryStat {
		st := CategoryStat{Category: name}
		var pct, epct, speed []float64
		for _, r := range rows {
			if !keep(r) {
				continue
			}
			st.Cases++
			if len(r.Mismatch) > 0 {
				st.Mismatches++
			}
			if r.Speedup > 0 {
				speed = append(speed, r.Speedup)
			}
			if r.Latency {
				st.LatencyCases++
				continue
			}
			if r.PctOfCopy > 0 {
				pct = append(pct, r.PctOfCopy)
				epct = append(epct, r.EagerPct)
			}
		}
		// Zero where a category has no such cases (JSON has no NaN).
		if len(pct) > 0 {
			st.MedianPct, st.MedianEagerPc, st.MinPct = median(pct), median(epct), slices.Min(pct)
		}
		if len(speed) > 0 {
			st.GeomeanSpeed = geomean(speed)
		}
		return st
	}
	var out []CategoryStat
	for _, c := range sweepCategories {
		if st := stat(c.name, func(r SweepRow) bool { return r.Category == c.name }); st.Cases > 0 {
			out = append(out, st)
		}
	}
	return append(out, stat("all", func(SweepRow) bool { return true }))
}

func printSweep(out io.Writer, res *SweepResult) {
	const head = "%-11s %-8s %-44s %10s %10s %9s %7s %7s %4s %9s %s\n"
	fmt.Fprintf(out, "\n"+head, "case", "dtype", "shapes", "eager µs", "comp µs", "comp GB/s", "% copy", "speedup", "kern", "err f64", "")
	fmt.Fprintln(out, strings.Repeat("-", 130))
	for _, r := range res.Rows {
		flag := ""
		if r.Latency {
			flag = "latency"
		}
		if len(r.Mismatch) > 0 {
			flag += " MISMATCH"
		}
		shape := r.Shape
		if len(shape) > 44 {
			shape = shape[:41] + "..."
		}
		errRef := "-"
		if res.Reference {
			errRef = fmt.Sprintf("%.2g", r.ErrRef)
		}
		fmt.Fprintf(out, "%-11s %-8s %-44s %10.1f %10.1f %9.1f %6.1f%% %6.2fx %4d %9s %s\n",
			r.ID, r.DType, shape, r.EagerUs, r.CompiledUs, r.CompiledGBs, r.PctOfCopy, r.Speedup, r.Kernels, errRef, flag)
	}
	fmt.Fprintf(out, "copy: %.1f GB/s (%s); GB/s counts inputs read once + outputs written once; err f64 is max|compiled-float64| / max|float64| (- : not checked, -reference=false)\n",
		res.CopyGBs, res.CopyMethod)

	fmt.Fprintf(out, "\nprograms:\n")
	for _, r := range res.Rows {
		fmt.Fprintf(out, "  %-11s %s\n", r.ID, r.Desc)
	}

	fmt.Fprintf(out, "\n%-20s %6s %8s %14s %12s %14s %16s %10s\n", "category", "cases", "latency", "median % copy", "min % copy", "eager median %", "geomean speedup", "mismatch")
	pct := func(v float64, n int) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", v)
	}
	for _, s := range res.Categories {
		n := s.Cases - s.LatencyCases
		fmt.Fprintf(out, "%-20s %6d %8d %14s %12s %14s %15.2fx %10d\n",
			s.Category, s.Cases, s.LatencyCases, pct(s.MedianPct, n), pct(s.MinPct, n), pct(s.MedianEagerPc, n), s.GeomeanSpeed, s.Mismatches)
	}
	fmt.Fprintf(out, "(%% of copy over the non-latency cases; speedup is eager time over compiled time, over all cases)\n")

	var worst []SweepRow
	for _, r := range res.Rows {
		if !r.Latency {
			worst = append(worst, r)
		}
	}
	sort.SliceStable(worst, func(i, j int) bool { return worst[i].PctOfCopy < worst[j].PctOfCopy })
	fmt.Fprintf(out, "\nworst ten by %% of copy:\n")
	for i, r := range worst {
		if i == 10 {
			break
		}
		fmt.Fprintf(out, "  %-11s %-8s %6.1f%% %6.2fx  %s  %s\n", r.ID, r.DType, r.PctOfCopy, r.Speedup, r.Shape, r.Desc)
	}
	var bad []SweepRow
	for _, r := range res.Rows {
		if len(r.Mismatch) > 0 {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(out, "\nparity failures:\n")
		for _, r := range bad {
			fmt.Fprintf(out, "  %-11s %s %s: %s\n    %s\n", r.ID, r.DType, r.Shape, strings.Join(r.Mismatch, "; "), r.Desc)
		}
	}
}
