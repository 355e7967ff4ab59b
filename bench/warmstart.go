package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"gocompile/tensor"
)

// Warm start: how long the first call of a compiled function takes in a
// new process, with an empty kernel cache (cold) and with the cache a
// previous process left (warm). The workload is the PyTorch script's
// 4-layer, 1024-wide GELU MLP at batch 32. -warmstart runs this command
// itself as child processes sharing one fresh cache directory
// (GOCOMPILE_CACHE_DIR): one cold, then two warm.

// warmResult is what a child reports.
type warmResult struct {
	Phase       string  `json:"phase"`
	SetupS      float64 `json:"setup_s"`      // device, weights and input, before the call
	FirstCallS  float64 `json:"first_call_s"` // the first call, to the result on the host
	SecondCallS float64 `json:"second_call_s"`
	SteadyUs    float64 `json:"steady_us"` // per call, many calls then one sync
}

// warmStartParent runs the children and prints their results.
func warmStartParent(cfg *config, out io.Writer) error {
	dir, err := os.MkdirTemp("", "gocompile-warmstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "warm start: 4x Linear(1024,1024)+GELU, batch 32, float32, on %s; cache %s\n", cfg.device, dir)
	fmt.Fprintf(out, "%-6s %10s %14s %14s %12s\n", "phase", "setup s", "first call ms", "second call ms", "steady µs")
	var results []warmResult
	for _, phase := range []string{"cold", "warm", "warm"} {
		cmd := exec.Command(exe, "-warmstart-child", phase, "-device", cfg.device.String())
		cmd.Env = append(os.Environ(), "GOCOMPILE_CACHE_DIR="+dir)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("warm start %s: %w", phase, err)
		}
		var r warmResult
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("warm start %s: %w (%q)", phase, err, b)
		}
		results = append(results, r)
		fmt.Fprintf(out, "%-6s %10.3f %14.2f %14.3f %12.1f\n", r.Phase, r.SetupS, r.FirstCallS*1e3, r.SecondCallS*1e3, r.SteadyUs)
	}
	if cfg.jsonPath != "" {
		b, _ := json.MarshalIndent(results, "", " ")
		return os.WriteFile(cfg.jsonPath, append(b, '\n'), 0o644)
	}
	return nil
}

// warmStartChild is one process of the warm start measurement.
func warmStartChild(cfg *config, phase string, out io.Writer) error {
	t0 := time.Now()
	if cfg.device != tensor.CPU {
		tensor.SetDefaultDevice(cfg.device)
	}
	x := tensor.Randn(1, tensor.Float32, 32, 1024)
	f := tensor.Compile(mlpModel())
	tensor.Synchronize(cfg.device)
	r := warmResult{Phase: phase, SetupS: time.Since(t0).Seconds()}

	t1 := time.Now()
	f(x).Float32s()
	r.FirstCallS = time.Since(t1).Seconds()
	t2 := time.Now()
	f(x).Float32s()
	r.SecondCallS = time.Since(t2).Seconds()
	const n = 200
	tensor.Synchronize(cfg.device)
	t3 := time.Now()
	for range n {
		f(x)
	}
	tensor.Synchronize(cfg.device)
	r.SteadyUs = float64(time.Since(t3).Microseconds()) / n
	return json.NewEncoder(out).Encode(r)
}

// isWarmStartChild reports the child phase in args, if any.
func isWarmStartChild(args []string) (string, []string, bool) {
	for i, a := range args {
		if strings.TrimLeft(a, "-") == "warmstart-child" && i+1 < len(args) {
			return args[i+1], append(append([]string(nil), args[:i]...), args[i+2:]...), true
		}
	}
	return "", args, false
}
