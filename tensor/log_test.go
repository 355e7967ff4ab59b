package tensor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"

	"gocompile/internal/logs"
	"gocompile/kcache"
)

// logged is a function whose compile the logging tests watch.
func logged(x *Tensor) *Tensor { return x.Exp().Add(x) }

// logArtifacts compiles logged with the artifacts' categories on. (On the
// CPU no kernel source is generated: package array's tests log one.)
func logArtifacts(t *testing.T) {
	t.Helper()
	t.Setenv("GOCOMPILE_LOGS", "graph,guards,fusion,output_code")
	Compile(logged)(Zeros(Float32, 2).To(CPU)) // whatever GOCOMPILE_DEVICE says: the expected text names no device
}

// useBuiltinLog sends log/slog's built-in handler, through package log, to
// w for the test, and returns that handler.
func useBuiltinLog(t *testing.T, w io.Writer) slog.Handler {
	t.Helper()
	h := slog.Default().Handler()
	if fmt.Sprintf("%T", h) != "*slog.defaultHandler" {
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
	logs.Warn("gocompile: a warning")
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

// record sends gocompile's logs to a new recorder for the test.
func record(t *testing.T) *logs.Recorder {
	r := new(logs.Recorder)
	SetLogger(slog.New(r))
	t.Cleanup(func() { SetLogger(nil) })
	return r
}

// The caches' logger keeps the attributes and groups it is given, and
// applies them to whichever logger is current.
func TestCacheLoggerWith(t *testing.T) {
	defer SetLogger(nil)
	l := logs.CacheLogger.With("a", 1).WithGroup("g")
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
