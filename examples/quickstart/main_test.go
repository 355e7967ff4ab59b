package main

import (
	"bytes"
	"strings"
	"testing"

	"gocompile/internal/testcache"
)

// TestMain keeps compiled artifacts out of the user's cache directory.
func TestMain(m *testing.M) { testcache.Main(m) }

// The quickstart runs to the end and shows what it promises.
func TestQuickstartRuns(t *testing.T) {
	var out bytes.Buffer
	run(&out)
	for _, want := range []string{"x + bias = tensor(", "first row sums to 1.0000", "matches eager: true", "explain: 1 graph, 0 breaks",
		"bad input: Linear on [64, 100] and [512, 256]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
