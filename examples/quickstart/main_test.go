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
	if err := run(nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"device: cpu", "x + bias = tensor(", "first row sums to 1.0000", "first call (trace + compile)",
		"matches eager: true", "explain: 1 graph, 0 breaks", "bad input: Linear on [64, 100] and [512, 256]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// With compilation disabled it says so instead of claiming a compile.
func TestQuickstartDisabled(t *testing.T) {
	t.Setenv("GOCOMPILE_DISABLE", "1")
	var out bytes.Buffer
	if err := run(nil, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, "trace + compile") || !strings.Contains(s, "disabled by GOCOMPILE_DISABLE=1") {
		t.Errorf("output with GOCOMPILE_DISABLE=1:\n%s", s)
	}
}

// A device that cannot be used is an error naming it, not a panic.
func TestQuickstartBadDevice(t *testing.T) {
	for _, dev := range []string{"bogus", "cuda:99"} {
		err := run([]string{"-device", dev}, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), "UseDevice") && !strings.Contains(err.Error(), "not usable") {
			t.Errorf("-device %s: got %v, want an error naming the device", dev, err)
		}
	}
}
