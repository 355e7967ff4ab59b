package main

import (
	"bytes"
	"strings"
	"testing"

	"gocompile/internal/testcache"
)

// TestMain keeps compiled artifacts out of the user's cache directory.
func TestMain(m *testing.M) { testcache.Main(m) }

// The example runs to the end and every strategy compiles as promised.
func TestDynamicRuns(t *testing.T) {
	var out bytes.Buffer
	if err := run(nil, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"recompile limit reached; running eagerly from now on",
		"calls: 8:compile 16:recompile 3:recompile 32:recompile 64:eager 7:eager",
		"stats: calls=6 compiles=4 recompiles=3 eager=2",
		"calls: 8:compile 16:recompile 3:cached 32:cached 64:cached 7:cached",
		"stats: calls=6 compiles=2 recompiles=1 eager=0",
		"stats: calls=6 compiles=1 recompiles=0 eager=0",
		"[s0, 32]",
		"scale guarded by value: scales [0.5 0.25 1.5 3.5 0.75]: compiles=5 recompiles=4",
		"DynamicScalars(1):      scales [0.5 0.25 1.5 3.5 0.75]: compiles=1 recompiles=0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Dynamic(true) and MarkDynamic both compile once.
	if n := strings.Count(out.String(), "calls: 8:compile 16:cached 3:cached 32:cached 64:cached 7:cached"); n != 2 {
		t.Errorf("%d strategies compiled once, want 2:\n%s", n, out.String())
	}
}
