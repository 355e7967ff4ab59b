package array

import (
	"errors"
	"fmt"
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

// Autotune returns the index of the fastest of the candidates names (the
// default at index def) for key: compile(i) builds candidate i's kernel,
// run(i) launches it. Candidates that fail to build or launch are skipped;
// with none left the default wins.
func Autotune(a *Artifacts, g *GPU, what, key string, names []string, def int, compile func(i int), run func(i int) error) int {
	full := fmt.Sprintf("%s %s on %s %s", what, key, g.dev.Name, g.dev.Arch())
	v, _ := tuned.LoadOrStore(full, &tuning{})
	t := v.(*tuning)
	t.once.Do(func() {
		ck := kcache.NewKey("gocompile/autotune", autotuneVersion, full)
		c := a.Cache()
		if e, ok := c.Get(ck); ok && e.Program != nil && slices.Contains(names, string(e.Program.Payload)) {
			t.best = string(e.Program.Payload)
			return
		}
		t.best = search(g, what, key, names, def, compile, run)
		c.Put(ck, a.Label(kcache.Entry{Program: &kcache.Program{Kind: "gocompile/autotune", Payload: []byte(t.best)}}, what+" "+key))
	})
	if i := slices.Index(names, t.best); i >= 0 {
		return i
	}
	return max(def, 0)
}

// search times every candidate and returns the fastest one's name.
func search(g *GPU, what, key string, names []string, def int, compile func(i int), run func(i int) error) string {
	stats.AutotuneSearches.Add(1)
	if logs.On("autotune") {
		logs.Info("gocompile: autotune: building candidates", "kernel", what, "key", key, "candidates", len(names))
	}
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
	return fastest(what, key, names, def, func(i int) (float64, error) {
		if !ok[i] {
			return 0, errNotBuilt
		}
		return timeLaunches(g, start, end, reps, func() error { return run(i) })
	})
}

var errNotBuilt = errors.New("did not build")

// fastest times each candidate with measure, in µs per launch, and
// returns the name of the fastest one that ran, or of the default (at
// index def) when none did. Under GOCOMPILE_LOGS=autotune it logs each
// candidate's time as it goes, and then the choice.
func fastest(what, key string, names []string, def int, measure func(i int) (float64, error)) string {
	progress := logs.On("autotune")
	times := make([]float64, len(names)) // -1: did not run
	best := -1
	for i, name := range names {
		us, err := measure(i)
		times[i] = -1
		if err == nil {
			times[i] = us
			if best < 0 || us < times[best] {
				best = i
			}
		}
		if progress {
			args := []any{"kernel", what, "key", key, "candidate", fmt.Sprintf("%d/%d", i+1, len(names)), "config", name}
			if err != nil {
				args = append(args, "err", err)
			} else {
				args = append(args, "us", fmt.Sprintf("%.2f", us))
			}
			logs.Info("gocompile: autotune candidate", args...)
		}
	}
	if best < 0 {
		best = max(def, 0)
	}
	if progress {
		defTime := -1.0
		if def >= 0 {
			defTime = times[def]
		}
		logs.Info("gocompile: autotune", "kernel", what, "key", key, "best", names[best],
			"best_us", fmt.Sprintf("%.2f", times[best]), "default", names[max(def, 0)], "default_us", fmt.Sprintf("%.2f", defTime))
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
