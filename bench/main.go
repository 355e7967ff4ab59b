// Command bench runs gocompile's benchmark suite: memory-bound workloads
// (pointwise chains, softmax, norms, reductions) eager and compiled with the
// inductor backend, on the CPU or a GPU, next to the device's copy
// bandwidth. It prints a table, and optionally writes JSON (field names as
// bench/pytorch/bench.py writes them, so the two line up) and a PNG bar
// chart of the speedups.
//
//	go run ./bench [-device cpu|cuda] [-json out.json] [-chart speedups.png] [-iters N] [-reps N] [-quick]
//	go run ./bench -sweep [-seed N] [-cases N] [-json out.json] [-cases-json cases.json] [-device cpu|cuda] [-quick]
//
// Method: each function is called twice first (the compiled one compiles
// on its first call; that call's time is reported as first_call_s), then N
// calls are queued and timed up to one Synchronize at the end (on a GPU,
// so the figure is device time when the GPU is the bottleneck); the median
// of -reps such repetitions is reported. GB/s counts the bytes of every
// input read once and every output written once, as
// ../shared/anchors/torch_anchor.py does.
//
// -sweep runs the seeded shape sweep instead (sweep.go, sweep_cases.go):
// random programs per category, each timed the same way, reported as % of
// the copy bandwidth and checked against eager and a float64 reference.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocompile/cuda"
	"gocompile/internal/cpuprofile"
	"gocompile/tensor"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is what the flags select.
type config struct {
	device    tensor.Device
	jsonPath  string
	chartPath string
	iters     int // 0: choose per workload
	reps      int
	quick     bool
	only      string
	warmstart bool
	mlp       bool
	llm       string // -llm: the decoder's configuration, dtype (tiny/float32 …)
	batches   []int  // -batches: the -llm batch sizes
	steady    bool   // -steady: -llm ends with 256 steady decode steps
	gemv      bool   // -gemv: the weight-streaming products
	gemvCases int    // -gemv-cases: seeded random products instead of the fixed table
	gemvTune  bool   // -gemv-tune: each product also with max-autotune's launch shape
	train     bool   // -train: the training step
	mode      string // -mode, for the header

	sweep     bool   // -sweep
	seed      uint64 // -seed
	cases     int    // -cases
	casesJSON string // -cases-json
	listOnly  bool   // -list: write -cases-json and stop
	reference bool   // -reference: check each case against a float64 run on the CPU

	cpuProfile string // -cpuprofile
}

// Row is one workload's result. The JSON names match bench/pytorch/bench.py
// and the anchor's rows (eager_ms, compiled_ms, eager_GBs, compiled_GBs,
// first_call_s), with the µs figures and derived columns added.
type Row struct {
	Name  string `json:"name"`
	Shape string `json:"shape"`
	Timing
	Speedup     float64   `json:"speedup"`
	FirstCallS  float64   `json:"first_call_s"`
	MaxAbsDiff  float64   `json:"max_abs_diff"`
	EagerRepsUs []float64 `json:"eager_reps_us"`
	CompRepsUs  []float64 `json:"compiled_reps_us"`
	WallPerCall bool      `json:"wall_per_call,omitempty"`
	// The compiled function's fusion regions (one kernel each) and its
	// buffer plan's peak bytes, next to eager's (tensor.Explain).
	Kernels        int      `json:"kernels"`
	Regions        []string `json:"regions"`
	PeakBytes      int64    `json:"peak_bytes"`
	EagerPeakBytes int64    `json:"eager_peak_bytes"`
}

// Timing is the timing fields a suite Row and a SweepRow share, in the
// order both write them.
type Timing struct {
	Bytes       int64   `json:"bytes"`
	Iters       int     `json:"iters"`
	EagerMs     float64 `json:"eager_ms"`
	CompiledMs  float64 `json:"compiled_ms"`
	EagerUs     float64 `json:"eager_us"`
	CompiledUs  float64 `json:"compiled_us"`
	EagerGBs    float64 `json:"eager_GBs"`
	CompiledGBs float64 `json:"compiled_GBs"`
	PctOfCopy   float64 `json:"compiled_pct_of_copy"`
	// Per repetition, eager's then compiled's: the device mallocs (new
	// allocator segments) and Go collections during it. A repetition that
	// grew the device cache or collected is slower for reasons outside
	// its kernels.
	EagerRepsMallocs []int64 `json:"eager_reps_mallocs,omitempty"`
	CompRepsMallocs  []int64 `json:"compiled_reps_mallocs,omitempty"`
	EagerRepsGCs     []int64 `json:"eager_reps_gcs,omitempty"`
	CompRepsGCs      []int64 `json:"compiled_reps_gcs,omitempty"`
}

// CopyBandwidth is the copy the rows' % of copy is over (measureCopy), in
// the suite's Result and the sweep's.
type CopyBandwidth struct {
	CopyGBs    float64 `json:"copy_GBs"`
	CopyUs     float64 `json:"copy_us"`
	CopyBytes  int64   `json:"copy_bytes"`
	CopyMethod string  `json:"copy_method"`
}

// RunInfo says what a run of the suite or the sweep ran on and how, as
// the head of its -json file.
type RunInfo struct {
	Suite      string `json:"suite"`
	Library    string `json:"library"`
	Version    string `json:"version"`
	Device     string `json:"device"`
	DeviceKind string `json:"device_kind"`
	Backend    string `json:"backend"`
	Quick      bool   `json:"quick"`
	Reps       int    `json:"reps"`
	Threads    int    `json:"threads"`
	Timestamp  string `json:"timestamp"`
}

// newRunInfo describes a run of suite with cfg, starting now.
func newRunInfo(cfg *config, suite string) RunInfo {
	return RunInfo{
		Suite: suite, Library: "gocompile", Version: runtime.Version(),
		Device: deviceName(cfg.device), DeviceKind: cfg.device.String(), Backend: "inductor",
		Quick: cfg.quick, Reps: cfg.reps, Threads: runtime.GOMAXPROCS(0),
		Timestamp: time.Now().UTC().Format(time.RFC3339),
	}
}

// Result is the whole run, as written to -json.
type Result struct {
	RunInfo
	CopyBandwidth
	Rows []Row `json:"rows"`
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	dev := fs.String("device", "", "cpu, cuda or cuda:N (default: GOCOMPILE_DEVICE, else cpu)")
	jsonPath := fs.String("json", "", "write the results as JSON to this file")
	chart := fs.String("chart", "", "write a PNG bar chart of the speedups to this file")
	iters := fs.Int("iters", 0, "calls per timed repetition (0: enough for ~50 ms on a GPU, ~0.2 s on the CPU)")
	reps := fs.Int("reps", 0, "timed repetitions, the median is reported (default 5 on a GPU, 3 on the CPU)")
	quick := fs.Bool("quick", false, "sizes 16x smaller, for smoke runs")
	only := fs.String("only", "", "run only workloads whose name contains this (-gemv: only this dtype)")
	mlp := fs.Bool("mlp", false, "time the 4-layer MLP eager and compiled at batch 1 and 32")
	llmCfg := fs.String("llm", "", "time examples/llm's decode step (config/dtype: tiny/float32, 1b/bfloat16 …) at batch 1, 4 and 16 against the bandwidth roofline")
	batches := fs.String("batches", "1,4,16", "-llm: the batch sizes timed, comma-separated")
	steady := fs.Bool("steady", true, "-llm: end with 256 steady decode steps and the allocator's statistics over them")
	train := fs.Bool("train", false, "time a training step (4-layer 1024-wide MLP, batch 64: loss, backward, AdamW) eagerly and compiled")
	gemv := fs.Bool("gemv", false, "time the weight-streaming products x·wᵀ (1–16 rows, 2048² and 4096² weights, float32 and bfloat16) against the copy bandwidth")
	gemvCases := fs.Int("gemv-cases", 0, "-gemv: time this many seeded random products (-seed; 1-16 rows, weights of 256-16384 × 256-8192, odd sizes, float32, bfloat16, float16) instead of the fixed table")
	gemvTune := fs.Bool("gemv-tune", false, "-gemv: also compile each product with max-autotune and report the default launch shape's time over the tuned one's")
	warm := fs.Bool("warmstart", false, "measure the first call of a compiled MLP in new processes, with a cold and a warm kernel cache")
	sweep := fs.Bool("sweep", false, "run the seeded shape sweep (see bench/README.md) instead of the suite")
	seed := fs.Uint64("seed", 1, "-sweep: the seed of the cases")
	cases := fs.Int("cases", defaultSweepCases, "-sweep: how many cases, spread over the categories")
	casesJSON := fs.String("cases-json", "", "-sweep: write the case list (for bench/pytorch/sweep.py) to this file")
	listOnly := fs.Bool("list", false, "-sweep: write -cases-json and stop, timing nothing")
	reference := fs.Bool("reference", true, "-sweep: check each case against the program run in float64 on the CPU (false: against eager only, for timing runs)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (the host side: tracing, planning, launches) to this file")
	mode := fs.String("mode", "default", "compilation mode of the suite's compiled functions: default, reduce-overhead or max-autotune")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c := &config{jsonPath: *jsonPath, chartPath: *chart, iters: *iters, reps: *reps, quick: *quick, only: *only, warmstart: *warm, mlp: *mlp,
		sweep: *sweep, seed: *seed, cases: *cases, casesJSON: *casesJSON, listOnly: *listOnly, reference: *reference, cpuProfile: *cpuProfile, llm: *llmCfg, steady: *steady, gemv: *gemv, gemvCases: *gemvCases, gemvTune: *gemvTune, train: *train}
	for _, f := range strings.Split(*batches, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || b < 1 {
			return nil, fmt.Errorf("-batches %q: want positive batch sizes separated by commas", *batches)
		}
		c.batches = append(c.batches, b)
	}
	if c.sweep && c.cases < 1 {
		return nil, errors.New("-cases must be >= 1")
	}
	if c.listOnly && c.casesJSON == "" {
		return nil, errors.New("-list needs -cases-json")
	}
	switch *mode {
	case "default":
	case "reduce-overhead":
		compileOpts = append(compileOpts, tensor.WithMode(tensor.ReduceOverhead))
	case "max-autotune":
		compileOpts = append(compileOpts, tensor.WithMode(tensor.MaxAutotune))
	default:
		return nil, fmt.Errorf("-mode %q: want default, reduce-overhead or max-autotune", *mode)
	}
	c.mode = *mode
	if err := tensor.UseDevice(*dev); err != nil {
		return nil, err
	}
	c.device = tensor.DefaultDevice()
	if c.iters < 0 {
		return nil, errors.New("-iters must be >= 0")
	}
	if c.reps <= 0 {
		c.reps = 3
		if c.device != tensor.CPU {
			c.reps = 5
		}
	}
	return c, nil
}

func run(args []string, out io.Writer) (err error) {
	phase, args, child := isWarmStartChild(args)
	cfg, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	if child {
		return warmStartChild(cfg, phase, out)
	}
	if cfg.warmstart {
		return warmStartParent(cfg, out)
	}
	stop, err := cpuprofile.Start(cfg.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	defer func() { // the library reports misuse and device failures by panicking with *tensor.Error
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
				return
			}
			panic(r)
		}
	}()
	if cfg.sweep {
		return runSweep(cfg, out)
	}
	res := &Result{RunInfo: newRunInfo(cfg, "gocompile-bench")}
	fmt.Fprintf(out, "device: %s (%s), GOMAXPROCS %d, %s, eager vs Compile(WithBackend(\"inductor\")), mode %s%s\n",
		res.Device, res.DeviceKind, res.Threads, res.Version, cfg.mode, map[bool]string{true: ", -quick (sizes /16)"}[cfg.quick])

	if cfg.mlp {
		runMLP(cfg, out)
		return nil
	}
	if cfg.gemv {
		return runGemv(cfg, out)
	}
	if cfg.train {
		return runTrain(cfg, out)
	}
	if cfg.llm != "" {
		return runLLM(cfg, out)
	}
	res.CopyBandwidth = measureCopy(cfg)
	fmt.Fprintf(out, "copy bandwidth: %.1f GB/s (%s, %d MB read + written, %.1f µs)\n",
		res.CopyGBs, res.CopyMethod, res.CopyBytes>>20, res.CopyUs)

	for _, w := range suite(cfg.quick) {
		if cfg.only != "" && !strings.Contains(w.name, cfg.only) {
			continue
		}
		r := runWorkload(cfg, w)
		if res.CopyGBs > 0 {
			r.PctOfCopy = 100 * r.CompiledGBs / res.CopyGBs
		}
		res.Rows = append(res.Rows, r)
	}
	printTable(out, res)

	if cfg.jsonPath != "" {
		b, err := json.MarshalIndent(res, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", cfg.jsonPath)
	}
	if cfg.chartPath != "" {
		if err := writeChart(cfg.chartPath, res); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Fprintf(out, "wrote %s\n", cfg.chartPath)
	}
	return nil
}

// deviceName is the GPU's name from the driver, or the CPU's model.
func deviceName(d tensor.Device) string {
	if d != tensor.CPU {
		if g, err := cuda.GetDevice(d.Index); err == nil {
			return g.Name
		}
		return d.String()
	}
	name := runtime.GOARCH + " CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				name = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s (%d threads)", name, runtime.NumCPU())
}

// workload is one benchmark: its inputs, the function (the same Go code
// runs eagerly and, wrapped by tensor.Compile, compiled) and the bytes it
// must move at least.
type workload struct {
	name  string
	shape string
	bytes int64
	small bool // latency-bound: µs per call is the figure, not GB/s
	// make builds the inputs and returns the eager and compiled callables.
	make func() calls
}

// calls are a workload's eager and compiled callables, and Explain of the
// compiled one (for its fusion regions and memory plan).
type calls struct {
	eager, compiled func() *tensor.Tensor
	explain         func() (*tensor.Explanation, error)
}

// compileOpts are the suite's Compile options (-mode adds to them).
var compileOpts = []tensor.Option{tensor.WithBackend("inductor")}

func fn1(f func(a *tensor.Tensor) *tensor.Tensor, a *tensor.Tensor) calls {
	c := tensor.Compile(f, compileOpts...)
	return calls{func() *tensor.Tensor { return f(a) }, func() *tensor.Tensor { return c(a) },
		func() (*tensor.Explanation, error) { return tensor.Explain(f, a) }}
}

func fn2(f func(a, b *tensor.Tensor) *tensor.Tensor, a, b *tensor.Tensor) calls {
	c := tensor.Compile(f, compileOpts...)
	return calls{func() *tensor.Tensor { return f(a, b) }, func() *tensor.Tensor { return c(a, b) },
		func() (*tensor.Explanation, error) { return tensor.Explain(f, a, b) }}
}

func fn3(f func(a, b, c *tensor.Tensor) *tensor.Tensor, a, b, w *tensor.Tensor) calls {
	c := tensor.Compile(f, compileOpts...)
	return calls{func() *tensor.Tensor { return f(a, b, w) }, func() *tensor.Tensor { return c(a, b, w) },
		func() (*tensor.Explanation, error) { return tensor.Explain(f, a, b, w) }}
}

// suite lists the workloads; quick divides every size by 16 (rows for the
// 2-D ones; the 32×1024 softmax, already latency-bound, keeps its size).
func suite(quick bool) []workload {
	div := 1
	if quick {
		div = 16
	}
	N := (1 << 24) / div   // pointwise chain
	NS := (1 << 26) / div  // sum of all
	M, D := 8192/div, 4096 // the 2-D workloads
	md := int64(M) * int64(D)
	f32 := tensor.Float32
	dims := func(s ...int) string {
		p := make([]string, len(s))
		for i, v := range s {
			p[i] = fmt.Sprint(v)
		}
		return strings.Join(p, "x")
	}
	return []workload{
		{name: "pointwise_gelu_chain_16M", shape: dims(N), bytes: 8 * int64(N), make: func() calls {
			return fn1(func(x *tensor.Tensor) *tensor.Tensor {
				return x.MulScalar(1.5).AddScalar(0.5).GELU().Mul(x.Sigmoid())
			}, tensor.Randn(1, f32, N))
		}},
		{name: "bias_gelu_8192x4096", shape: dims(M, D) + "+" + dims(D), bytes: 8 * md, make: func() calls {
			return fn2(func(a, b *tensor.Tensor) *tensor.Tensor { return a.Add(b).GELU() },
				tensor.Randn(2, f32, M, D), tensor.Randn(3, f32, D))
		}},
		{name: "softmax_8192x4096", shape: dims(M, D), bytes: 8 * md, make: func() calls {
			return fn1(func(a *tensor.Tensor) *tensor.Tensor { return a.Softmax(-1) }, tensor.Randn(2, f32, M, D))
		}},
		{name: "layernorm_8192x4096", shape: dims(M, D), bytes: 8 * md, make: func() calls {
			return fn3(func(a, w, b *tensor.Tensor) *tensor.Tensor { return a.LayerNorm([]int{D}, w, b, 1e-5) },
				tensor.Randn(2, f32, M, D), tensor.Randn(4, f32, D), tensor.Randn(3, f32, D))
		}},
		{name: "rmsnorm_8192x4096", shape: dims(M, D), bytes: 8 * md, make: func() calls {
			return fn2(func(a, w *tensor.Tensor) *tensor.Tensor { return a.RMSNorm([]int{D}, w, 1e-6) },
				tensor.Randn(2, f32, M, D), tensor.Randn(4, f32, D))
		}},
		{name: "sum_rows_8192x4096", shape: dims(M, D), bytes: 4 * md, make: func() calls {
			return fn1(func(a *tensor.Tensor) *tensor.Tensor { return a.Sum(-1) }, tensor.Randn(2, f32, M, D))
		}},
		{name: "sum_all_64M", shape: dims(NS), bytes: 4 * int64(NS), make: func() calls {
			return fn1(func(x *tensor.Tensor) *tensor.Tensor { return x.Sum() }, tensor.Randn(5, f32, NS))
		}},
		{name: "softmax_bf16_8192x4096", shape: dims(M, D) + " bf16", bytes: 4 * md, make: func() calls {
			// bf16 in and out, float32 math: as the anchor's softmax(a.float()).bfloat16().
			return fn1(func(a *tensor.Tensor) *tensor.Tensor {
				return a.To(tensor.Float32).Softmax(-1).To(tensor.BFloat16)
			}, tensor.Randn(2, f32, M, D).To(tensor.BFloat16))
		}},
		{name: "softmax_small_32x1024", shape: dims(32, 1024), bytes: 8 * 32 * 1024, small: true, make: func() calls {
			return fn1(func(a *tensor.Tensor) *tensor.Tensor { return a.Softmax(-1) }, tensor.Randn(6, f32, 32, 1024))
		}},
	}
}

// timeCalls runs f n times and returns the wall time per call, waiting
// for the device once at the end.
func timeCalls(dev tensor.Device, n int, f func() *tensor.Tensor) time.Duration {
	tensor.Synchronize(dev)
	t0 := time.Now()
	for range n {
		f()
	}
	tensor.Synchronize(dev)
	return time.Since(t0) / time.Duration(n)
}

// chooseIters picks how many calls one repetition queues: the -iters
// flag, or enough calls for about 50 ms (GPU) or 0.2 s (CPU), from a probe.
func chooseIters(cfg *config, f func() *tensor.Tensor) int {
	if cfg.iters > 0 {
		return cfg.iters
	}
	target, maxN := 50*time.Millisecond, 20000
	if cfg.device == tensor.CPU {
		target, maxN = 200*time.Millisecond, 2000
	}
	per := timeCalls(cfg.device, 1, f)
	if per < target/100 { // a better estimate for fast calls
		per = timeCalls(cfg.device, 20, f)
	}
	n := int(target / max(per, time.Nanosecond))
	return min(max(n, 1), maxN)
}

// measure times reps repetitions of n calls of each function, the
// functions taking turns so drift (clocks, other load) hits them alike, and
// returns each one's median per-call time and every repetition in µs.
func measure(cfg *config, n int, fs ...func() *tensor.Tensor) ([]time.Duration, [][]float64) {
	med, us, _ := measureCounted(cfg, n, fs...)
	return med, us
}

// repCounts are what happened during each repetition of a function besides
// its calls: device mallocs and Go collections.
type repCounts struct{ mallocs, gcs []int64 }

// measureCounted is measure, with each repetition's repCounts.
func measureCounted(cfg *config, n int, fs ...func() *tensor.Tensor) ([]time.Duration, [][]float64, []repCounts) {
	ds := make([][]time.Duration, len(fs))
	us := make([][]float64, len(fs))
	counts := make([]repCounts, len(fs))
	for range cfg.reps {
		for j, f := range fs {
			m0, g0 := deviceMallocs(cfg.device), gcCycles()
			d := timeCalls(cfg.device, n, f)
			counts[j].mallocs = append(counts[j].mallocs, deviceMallocs(cfg.device)-m0)
			counts[j].gcs = append(counts[j].gcs, gcCycles()-g0)
			ds[j] = append(ds[j], d)
			us[j] = append(us[j], float64(d.Nanoseconds())/1e3)
		}
	}
	med := make([]time.Duration, len(fs))
	for j := range ds {
		slices.Sort(ds[j])
		med[j] = ds[j][len(ds[j])/2]
	}
	return med, us, counts
}

// deviceMallocs counts the segments dev's allocator has taken from the
// device (0 on the CPU).
func deviceMallocs(dev tensor.Device) int64 {
	if dev == tensor.CPU {
		return 0
	}
	return tensor.MemoryStats(dev).NumMallocs
}

// gcCycles counts the Go collections completed so far.
func gcCycles() int64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func runWorkload(cfg *config, w workload) Row {
	// Each workload starts from an empty device cache, so that where the
	// allocator places its buffers does not depend on the workloads before.
	runtime.GC()
	tensor.Synchronize(cfg.device)
	tensor.EmptyCache(cfg.device)
	cs := w.make()
	eager, compiled := cs.eager, cs.compiled
	tensor.Synchronize(cfg.device)

	// Compile (timed, as first_call_s) and check the two agree.
	cOut, first := firstCall(cfg.device, compiled)
	r := Row{Name: w.name, Shape: w.shape, FirstCallS: first, MaxAbsDiff: maxAbsDiff(eager(), cOut), WallPerCall: w.small}
	r.Bytes = w.bytes
	r.EagerRepsUs, r.CompRepsUs = r.measurePair(cfg, eager, compiled)
	r.Speedup = r.EagerUs / r.CompiledUs
	if ex, err := cs.explain(); err == nil {
		r.Kernels, r.Regions = len(ex.Regions), ex.Regions
		r.PeakBytes, r.EagerPeakBytes = ex.PeakBytes, ex.EagerPeakBytes
	}
	return r
}

// maxAbsDiff compares two results on the host (NaN if shapes differ).
func maxAbsDiff(a, b *tensor.Tensor) float64 {
	av, bv := a.To(tensor.Float32).Float32s(), b.To(tensor.Float32).Float32s()
	if len(av) != len(bv) {
		return math.NaN()
	}
	m := 0.0
	for i := range av {
		d := math.Abs(float64(av[i]) - float64(bv[i]))
		if d > m || d != d {
			m = d
		}
	}
	return m
}

// firstCall is f's result and the seconds its first call took (Compile
// traces and builds there).
func firstCall(dev tensor.Device, f func() *tensor.Tensor) (*tensor.Tensor, float64) {
	t0 := time.Now()
	out := f()
	tensor.Synchronize(dev)
	return out, time.Since(t0).Seconds()
}

// measurePair warms eager and compiled, then times both with the same call
// count (enough for the faster one) and fills t's fields from t.Bytes on,
// but PctOfCopy; it returns each one's repetitions in µs.
func (t *Timing) measurePair(cfg *config, eager, compiled func() *tensor.Tensor) (eagerRepsUs, compRepsUs []float64) {
	eager()
	compiled()
	tensor.Synchronize(cfg.device)

	// Settle the heap first: the garbage of earlier workloads would
	// otherwise be collected (and its device memory returned) while this
	// one is timed.
	runtime.GC()
	tensor.Synchronize(cfg.device)
	n := chooseIters(cfg, eager)
	if nc := chooseIters(cfg, compiled); cfg.iters == 0 && nc > n {
		n = nc // the same count for both, enough for the faster one
	}
	med, reps, counts := measureCounted(cfg, n, eager, compiled)
	t.EagerRepsMallocs, t.CompRepsMallocs = counts[0].mallocs, counts[1].mallocs
	t.EagerRepsGCs, t.CompRepsGCs = counts[0].gcs, counts[1].gcs
	t.Iters = n
	t.EagerUs = float64(med[0].Nanoseconds()) / 1e3
	t.CompiledUs = float64(med[1].Nanoseconds()) / 1e3
	t.EagerMs, t.CompiledMs = t.EagerUs/1e3, t.CompiledUs/1e3
	t.EagerGBs = float64(t.Bytes) / t.EagerUs / 1e3
	t.CompiledGBs = float64(t.Bytes) / t.CompiledUs / 1e3
	return reps[0], reps[1]
}

// measureCopy times dst.Copy(src) between two tensors of 64M float32
// (4M with -quick) on the device: on a GPU that is the library's generated
// copy kernel (cuMemcpyDtoD is not reachable from outside package tensor),
// on the CPU its parallel block copy. Bytes: one read and one write.
func measureCopy(cfg *config) CopyBandwidth {
	n := 1 << 26
	if cfg.quick {
		n /= 16
	}
	src := tensor.Randn(7, tensor.Float32, n)
	dst := tensor.Zeros(tensor.Float32, n)
	f := func() *tensor.Tensor { return dst.Copy(src) }
	f()
	f()
	iters := chooseIters(cfg, f)
	med, _ := measure(cfg, iters, f)
	var c CopyBandwidth
	c.CopyBytes = 2 * 4 * int64(n)
	c.CopyUs = float64(med[0].Nanoseconds()) / 1e3
	c.CopyGBs = float64(c.CopyBytes) / c.CopyUs / 1e3
	c.CopyMethod = "dst.Copy(src) float32 " + fmt.Sprint(n>>20) + "M"
	if cfg.device != tensor.CPU {
		c.CopyMethod += ", generated copy kernel"
	} else {
		c.CopyMethod += ", parallel Go copy"
	}
	return c
}

func printTable(out io.Writer, res *Result) {
	const head = "%-34s %-15s %11s %10s %11s %10s %8s %8s %9s %9s\n"
	fmt.Fprintf(out, head, "workload", "shape", "eager µs", "eager GB/s", "compiled µs", "comp GB/s", "% copy", "speedup", "1st call", "max|diff|")
	fmt.Fprintln(out, strings.Repeat("-", 34+15+11+10+11+10+8+8+9+9+9))
	for _, r := range res.Rows {
		name := r.Name
		if r.WallPerCall {
			name += " (µs/call)"
		}
		fmt.Fprintf(out, "%-34s %-15s %11.1f %10.1f %11.1f %10.1f %7.1f%% %7.2fx %8.3fs %9.2g\n",
			name, r.Shape, r.EagerUs, r.EagerGBs, r.CompiledUs, r.CompiledGBs, r.PctOfCopy, r.Speedup, r.FirstCallS, r.MaxAbsDiff)
	}
	fmt.Fprintf(out, "%-34s %-15s %11s %10s %11.1f %10.1f %7.1f%%\n", "copy_bandwidth", fmt.Sprintf("%dM f32", res.CopyBytes/8>>20), "", "", res.CopyUs, res.CopyGBs, 100.0)
	fmt.Fprintf(out, "copy: %s; GB/s counts inputs read once + outputs written once; %% copy is compiled GB/s over the copy's\n", res.CopyMethod)
	fmt.Fprintf(out, "\n%-34s %7s %12s %12s  %s\n", "workload", "kernels", "peak MiB", "eager MiB", "fusion regions")
	for _, r := range res.Rows {
		fmt.Fprintf(out, "%-34s %7d %12.1f %12.1f  %s\n", r.Name, r.Kernels, float64(r.PeakBytes)/(1<<20), float64(r.EagerPeakBytes)/(1<<20), strings.Join(r.Regions, "; "))
	}
}
