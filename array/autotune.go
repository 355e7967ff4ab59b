package array

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"

	"gocompile/internal/logs"
	"gocompile/internal/stats"

	"golang.org/x/sync/errgroup"

	"gocompile/cuda"
	"gocompile/kcache"
)

// In MaxAutotune mode a generated kernel's launch shape is chosen by
// timing every candidate on the device, with CUDA events around repeated
// launches on the real arguments, and keeping the fastest. The winner is
// remembered in memory and in the artifact cache (kcache), so a device
// searches once per kernel and shape, across processes.

// autotuneVersion versions stored results: bump it when candidates or
// their meaning change.
const autotuneVersion = "1"

// tuned holds each key's search, run once per process.
var tuned sync.Map // key → *tuning

type tuning struct {
	once sync.Once
	best string
}

// autotune returns the index of the fastest of the candidates names (the
// default at index def) for key: compile(i) builds candidate i's kernel,
// run(i) launches it. Candidates that fail to build or launch are skipped;
// with none left the default wins.
func Autotune(c *kcache.Cache, g *GPU, what, key string, names []string, def int, compile func(i int), run func(i int) error) int {
	full := fmt.Sprintf("%s %s on %s %s", what, key, g.dev.Name, g.dev.Arch())
	v, _ := tuned.LoadOrStore(full, &tuning{})
	t := v.(*tuning)
	t.once.Do(func() {
		ck := kcache.NewKey("gocompile/autotune", autotuneVersion, full)
		if e, ok := c.Get(ck); ok && e.Program != nil && slices.Contains(names, string(e.Program.Payload)) {
			t.best = string(e.Program.Payload)
			return
		}
		t.best = search(g, what, key, names, def, compile, run)
		c.Put(ck, kcache.Entry{Program: &kcache.Program{Kind: "gocompile/autotune", Payload: []byte(t.best)}})
	})
	if i := slices.Index(names, t.best); i >= 0 {
		return i
	}
	return max(def, 0)
}

// search times every candidate and returns the fastest one's name.
func search(g *GPU, what, key string, names []string, def int, compile func(i int), run func(i int) error) string {
	stats.AutotuneSearches.Add(1)
	progress := logs.On("autotune")
	ok := make([]bool, len(names))
	// Build every candidate first, in parallel: NVRTC dominates.
	var eg errgroup.Group
	eg.SetLimit(runtime.NumCPU())
	for i := range names {
		eg.Go(func() error {
			defer func() { recover() }() // a candidate that does not build is skipped
			compile(i)
			ok[i] = true
			return nil
		})
	}
	eg.Wait()
	start, err1 := g.dev.NewEvent()
	end, err2 := g.dev.NewEvent()
	if err1 != nil || err2 != nil {
		return names[max(def, 0)]
	}
	defer start.Destroy()
	defer end.Destroy()
	const reps = 20
	times := make([]float64, len(names)) // µs per launch
	best := -1
	for i := range names {
		times[i] = -1
		if !ok[i] {
			continue
		}
		if progress {
			fmt.Fprintf(os.Stderr, "\rgocompile: autotune %s: candidate %d/%d", what, i+1, len(names))
		}
		us, err := timeLaunches(g, start, end, reps, func() error { return run(i) })
		if err != nil {
			continue
		}
		times[i] = us
		if best < 0 || us < times[best] {
			best = i
		}
	}
	if progress {
		fmt.Fprintln(os.Stderr)
	}
	if best < 0 {
		best = max(def, 0)
	}
	if progress {
		var all []any
		for i, n := range names {
			if times[i] >= 0 {
				all = append(all, n, fmt.Sprintf("%.2fµs", times[i]))
			}
		}
		defTime := -1.0
		if def >= 0 {
			defTime = times[def]
		}
		slog.Info("gocompile: autotune", "kernel", what, "key", key, "best", names[best],
			"best_us", fmt.Sprintf("%.2f", times[best]), "default", names[max(def, 0)], "default_us", fmt.Sprintf("%.2f", defTime))
		slog.Info("gocompile: autotune candidates", append([]any{"key", key}, all...)...)
	}
	return names[best]
}

// timeLaunches is the fastest of three rounds of reps launches by launch,
// in µs per launch, measured with CUDA events.
func timeLaunches(g *GPU, start, end *cuda.Event, reps int, launch func() error) (float64, error) {
	for range 3 { // warm up
		if err := launch(); err != nil {
			return 0, err
		}
	}
	best := -1.0
	for range 3 {
		if err := start.Record(g.stream); err != nil {
			return 0, err
		}
		for range reps {
			if err := launch(); err != nil {
				return 0, err
			}
		}
		if err := end.Record(g.stream); err != nil {
			return 0, err
		}
		if err := end.Synchronize(); err != nil {
			return 0, err
		}
		ms, err := cuda.ElapsedMs(start, end)
		if err != nil {
			return 0, err
		}
		if us := float64(ms) * 1e3 / float64(reps); best < 0 || us < best {
			best = us
		}
	}
	return best, nil
}
