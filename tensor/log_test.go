package tensor

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gocompile/kcache"
)

// logged is a function whose compile the logging tests watch.
func logged(x *Tensor) *Tensor { return x.Exp().Add(x) }

const loggedSource = `extern "C" __global__ void k_add1(float* x) {
    x[threadIdx.x] += 1;
}
`

// logArtifacts compiles logged and writes a kernel's source, as a GPU
// compile does, with the artifacts' categories on.
func logArtifacts(t *testing.T) {
	t.Helper()
	t.Setenv("GOCOMPILE_LOGS", "graph,guards,fusion,output_code")
	Compile(logged)(Zeros(Float32, 2))
	writeKernelSource(&artifacts{function: "main.f"}, "k_add1", loggedSource)
}

// useBuiltinLog sends log/slog's built-in handler, through package log, to
// w for the test, and returns that handler.
func useBuiltinLog(t *testing.T, w io.Writer) slog.Handler {
	t.Helper()
	h := slog.Default().Handler()
	if !builtinHandler(h) {
		t.Fatalf("slog.Default() has a %T, not log/slog's built-in handler: a test did not restore it", h)
	}
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(w)
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(out); log.SetFlags(flags) })
	return h
}

// Through slog's built-in handler, the default, multi-line artifacts are
// printed as they are, after a header line.
func TestLogArtifactsReadable(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		var buf bytes.Buffer
		h := useBuiltinLog(t, &buf)
		if explicit {
			SetLogger(slog.New(h))
		}
		logArtifacts(t)
		SetLogger(nil)
		out := buf.String()
		for _, want := range []string{
			"INFO gocompile: graph function=gocompile/tensor.logged\nfunc graph(x0 float32[2]) (float32[2]) {\n    v1 := x0.Exp()",
			"INFO gocompile: guards function=gocompile/tensor.logged\ntensor 0: float32 cpu contiguous [2]\n",
			"INFO gocompile: fusion function=gocompile/tensor.logged regions=1 fused=1\nfused exp+add -> v2  v1=exp, v2=add\nbuffer plan: ",
			"INFO gocompile: output code function=main.f kernel=k_add1\n" + loggedSource,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("SetLogger called: %v: the log lacks\n%s\nin\n%s", explicit, want, out)
			}
		}
		if strings.Contains(out, `\n`) {
			t.Errorf("SetLogger called: %v: the log holds escaped newlines:\n%s", explicit, out)
		}
	}
}

// Through another handler, each artifact is one record holding the text
// in an attribute.
func TestLogArtifactsStructured(t *testing.T) {
	var buf bytes.Buffer
	SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer SetLogger(nil)
	dir := t.TempDir()
	t.Setenv("GOCOMPILE_DEBUG_DIR", dir)
	logArtifacts(t)

	records := map[string]map[string]any{}
	for line := range strings.Lines(buf.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		records[r["msg"].(string)] = r
	}
	tests := []struct {
		msg, key, text string
		attrs          map[string]any
	}{
		{"gocompile: graph", "graph", "func graph(x0 float32[2]) (float32[2]) {\n    v1 := x0.Exp()",
			map[string]any{"function": "gocompile/tensor.logged"}},
		{"gocompile: guards", "guards", "tensor 0: float32 cpu contiguous [2]",
			map[string]any{"function": "gocompile/tensor.logged"}},
		{"gocompile: fusion", "plan", "fused exp+add -> v2  v1=exp, v2=add\nbuffer plan: ",
			map[string]any{"function": "gocompile/tensor.logged", "regions": 1.0, "fused": 1.0}},
		{"gocompile: output code", "source", strings.TrimSuffix(loggedSource, "\n"),
			map[string]any{"function": "main.f", "kernel": "k_add1", "file": filepath.Join(dir, "k_add1.cu")}},
	}
	for _, tt := range tests {
		r, ok := records[tt.msg]
		if !ok {
			t.Errorf("no %q record in\n%s", tt.msg, &buf)
			continue
		}
		if text, _ := r[tt.key].(string); !strings.HasPrefix(text, tt.text) {
			t.Errorf("%s: %s = %q, want it to begin %q", tt.msg, tt.key, text, tt.text)
		}
		for k, v := range tt.attrs {
			if r[k] != v {
				t.Errorf("%s: %s = %v, want %v", tt.msg, k, r[k], v)
			}
		}
	}
	// The header names the file GOCOMPILE_DEBUG_DIR keeps the graph in.
	file, _ := records["gocompile: graph"]["file"].(string)
	if b, err := os.ReadFile(file); err != nil || strings.TrimSuffix(string(b), "\n") != records["gocompile: graph"]["graph"] {
		t.Errorf("the graph's file %q: %v\n%s", file, err, b)
	}
}

// SetLogger directs warnings as well as GOCOMPILE_LOGS categories, and
// the artifact caches' logs, even for a cache opened before it was called.
func TestSetLoggerCoversCaches(t *testing.T) {
	t.Setenv("GOCOMPILE_LOGS", "cache")
	var before, after bytes.Buffer
	SetLogger(slog.New(slog.NewTextHandler(&before, nil)))
	defer SetLogger(nil)
	c := cacheFor(t.TempDir())
	k := kcache.NewKey("log test")
	c.Put(k, kcache.Entry{Program: &kcache.Program{Kind: "test"}})
	SetLogger(slog.New(slog.NewTextHandler(&after, nil)))
	c.Get(k)
	t.Setenv("GOCOMPILE_LOGS", "")
	logWarn("gocompile: a warning")
	for _, tt := range []struct {
		buf  *bytes.Buffer
		want string
	}{
		{&before, "kcache: open"},
		{&before, "kcache: write"},
		{&after, "kcache: hit"},
		{&after, "gocompile: a warning"},
	} {
		if !strings.Contains(tt.buf.String(), tt.want) {
			t.Errorf("the log lacks %q:\n%s", tt.want, tt.buf)
		}
	}
}

// recorder is a slog.Handler that keeps what it is given, a line each:
// the message and the attributes.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, b.String())
	return nil
}

// record sends gocompile's logs to a new recorder for the test.
func record(t *testing.T) *recorder {
	r := new(recorder)
	SetLogger(slog.New(r))
	t.Cleanup(func() { SetLogger(nil) })
	return r
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
		rec := record(t)
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
		if got := strings.Join(rec.lines, "\n"); got != strings.Join(tt.want, "\n") {
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

// The caches' logger keeps the attributes and groups it is given, and
// applies them to whichever logger is current.
func TestCacheLoggerWith(t *testing.T) {
	defer SetLogger(nil)
	l := cacheLogger.With("a", 1).WithGroup("g")
	for _, tt := range []struct {
		msg  string
		b    int
		want string
	}{
		{"first", 2, `"msg":"first","a":1,"g":{"b":2}`},
		{"second", 3, `"msg":"second","a":1,"g":{"b":3}`},
	} {
		var buf bytes.Buffer
		SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
		l.Info(tt.msg, "b", tt.b)
		if !strings.Contains(buf.String(), tt.want) {
			t.Errorf("logged %s, want %s", &buf, tt.want)
		}
	}
}
