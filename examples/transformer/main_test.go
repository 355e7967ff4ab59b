package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/internal/testcache"
)

// TestMain keeps compiled artifacts out of the user's cache directory.
func TestMain(m *testing.M) { testcache.Main(m) }

// The example writes its weights, loads them, and the compiled block
// matches the eager one in one graph; a second run reads the same file.
func TestTransformerRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpt.safetensors")
	var out bytes.Buffer
	if err := run([]string{"-weights", path, "-iters", "2"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	first := out.String()
	for _, want := range []string{
		"vocab 256, d 64, heads 4, seq 32, batch 4",
		"wrote " + path,
		"loaded " + path + ": 20 tensors",
		"logits [4 32 256]; max abs difference eager vs compiled: ",
		"compiled: first call (trace + compile) ",
		"stats: calls=4 compiles=1 recompiles=0 breaks=0",
		"explain: 1 graph, 0 breaks, ",
		"masked_fill×1",
		"embedding×1",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("output lacks %q:\n%s", want, first)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}

	// Run again: the file exists now, so it is read, not written.
	out.Reset()
	if err := run([]string{"-weights", path, "-iters", "1"}, &out); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "wrote ") || !strings.Contains(out.String(), "loaded "+path) {
		t.Errorf("second run did not just load the weights:\n%s", out.String())
	}
	if a, b := argmaxLine(first), argmaxLine(out.String()); a == "" || a != b {
		t.Errorf("the predictions changed between runs: %q vs %q", a, b)
	}

	// A file of another size is refused, naming the fix.
	if err := run([]string{"-weights", path, "-d", "32"}, &out); err == nil || !strings.Contains(err.Error(), "-write") {
		t.Errorf("loading with -d 32: err = %v, want one that suggests -write", err)
	}
}

func argmaxLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "next-token argmax") {
			return l
		}
	}
	return ""
}

// The difference between eager and compiled is within float32 rounding.
func TestTransformerMatchesEager(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "gpt.safetensors")
	if err := run([]string{"-weights", path, "-iters", "1", "-batch", "2", "-seq", "8"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if i := strings.Index(l, "max abs difference eager vs compiled: "); i >= 0 {
			var d float64
			if _, err := fmt.Sscan(l[i+len("max abs difference eager vs compiled: "):], &d); err != nil || d > 1e-5 {
				t.Errorf("difference %q (err %v), want <= 1e-5", l, err)
			}
			return
		}
	}
	t.Errorf("no difference printed:\n%s", out.String())
}
