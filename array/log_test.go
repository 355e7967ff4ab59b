package array

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/internal/logs"
)

const loggedSource = `extern "C" __global__ void k_add1(float* x) {
    x[threadIdx.x] += 1;
}
`

// A generated kernel's source is one record under GOCOMPILE_LOGS=
// output_code, naming the function and the kernel, holding the source,
// and naming the file GOCOMPILE_DEBUG_DIR keeps it in.
func TestOutputCodeLogged(t *testing.T) {
	var buf bytes.Buffer
	logs.SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer logs.SetLogger(nil)
	dir := t.TempDir()
	t.Setenv("GOCOMPILE_DEBUG_DIR", dir)
	t.Setenv("GOCOMPILE_LOGS", "output_code")
	writeKernelSource(NewArtifacts(nil, "main.f"), "k_add1", loggedSource)
	var r map[string]any
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, &buf)
	}
	want := map[string]any{"msg": "gocompile: output code", "function": "main.f", "kernel": "k_add1",
		"source": strings.TrimSuffix(loggedSource, "\n"), "file": filepath.Join(dir, "k_add1.cu")}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %v, want %v", k, r[k], v)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "k_add1.cu")); err != nil || string(b) != loggedSource {
		t.Errorf("the kernel's file: %v\n%s", err, b)
	}
}

// Autotuning logs each candidate as it is timed, through the logger, then
// its choice; it writes nothing to stderr itself. (On a GPU, search times
// the candidates with fastest.)
func TestAutotuneLogsProgress(t *testing.T) {
	const (
		a = "gocompile: autotune candidate kernel=gemm key=m64 candidate=1/3 config=a us=3.00"
		b = "gocompile: autotune candidate kernel=gemm key=m64 candidate=2/3 config=b err=did not build"
		c = "gocompile: autotune candidate kernel=gemm key=m64 candidate=3/3 config=c us=1.50"
	)
	tests := []struct {
		logs  string
		times []float64 // < 0: fails
		best  string
		want  []string
	}{
		{"autotune", []float64{3, -1, 1.5}, "c", []string{a, b, c,
			"gocompile: autotune kernel=gemm key=m64 best=c best_us=1.50 default=a default_us=3.00"}},
		{"all", []float64{3, -1, 1.5}, "c", []string{a, b, c,
			"gocompile: autotune kernel=gemm key=m64 best=c best_us=1.50 default=a default_us=3.00"}},
		{"graph", []float64{3, -1, 1.5}, "c", nil},
		{"autotune", []float64{-1, -1, -1}, "a", []string{
			"gocompile: autotune candidate kernel=gemm key=m64 candidate=1/3 config=a err=did not build",
			"gocompile: autotune candidate kernel=gemm key=m64 candidate=2/3 config=b err=did not build",
			"gocompile: autotune candidate kernel=gemm key=m64 candidate=3/3 config=c err=did not build",
			"gocompile: autotune kernel=gemm key=m64 best=a best_us=-1.00 default=a default_us=-1.00"}},
	}
	for _, tt := range tests {
		t.Setenv("GOCOMPILE_LOGS", tt.logs)
		rec := new(logs.Recorder)
		logs.SetLogger(slog.New(rec))
		var best string
		stderr := captureStderr(t, func() {
			best = fastest("gemm", "m64", []string{"a", "b", "c"}, 0, func(i int) (float64, error) {
				if tt.times[i] < 0 {
					return 0, errNotBuilt
				}
				return tt.times[i], nil
			})
		})
		if best != tt.best {
			t.Errorf("GOCOMPILE_LOGS=%s, times %v: chose %s, want %s", tt.logs, tt.times, best, tt.best)
		}
		logs.SetLogger(nil)
		if got := strings.Join(rec.Lines(), "\n"); got != strings.Join(tt.want, "\n") {
			t.Errorf("GOCOMPILE_LOGS=%s, times %v: logged\n%s\nwant\n%s", tt.logs, tt.times, got, strings.Join(tt.want, "\n"))
		}
		if stderr != "" {
			t.Errorf("GOCOMPILE_LOGS=%s: wrote to stderr: %q", tt.logs, stderr)
		}
	}
}

// captureStderr returns what f writes to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	out := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); out <- b }()
	defer func() { os.Stderr = old }()
	f()
	w.Close()
	return string(<-out)
}
