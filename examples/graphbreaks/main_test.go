package main

import (
	"bytes"
	"strings"
	"testing"

	"gocompile/internal/testcache"
)

// TestMain keeps compiled artifacts out of the user's cache directory.
func TestMain(m *testing.M) { testcache.Main(m) }

// The example runs to the end; Explain finds each break with its reason
// and file:line, and the fixed versions compile to one graph with the same
// results.
func TestGraphbreaksRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run(nil, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"Explain gate (Item): 2 graph(s), 1 break(s)",
		"break: Item at main.go:",
		"Explain gateCond (tensor.Cond): 1 graph(s), 0 break(s)",
		"where×1",
		"stats: gate compiles=1 breaks=1; gateCond compiles=1 breaks=0",
		"Explain forwardDebug (prints inside): 2 graph(s), 1 break(s)",
		"break: String at main.go:",
		"Explain forward (returns h; the caller prints): 1 graph(s), 0 break(s)",
		"forwardDebug vs forward, compiled: agree (max diff",
		"forward compiled vs eager: agree (max diff",
		"Compile(gate, FullGraph()): Compile: graph break at main.go:",
		"Item needs the values of a traced tensor",
		"Compile(gateCond, FullGraph()): err = <nil>",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "eager vs compiled gate: agree"); n != 2 || strings.Count(s, "eager vs compiled gateCond: agree") != 2 {
		t.Errorf("%d inputs gave agreeing results, want 2:\n%s", n, s)
	}
}
