package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocompile/kcache"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1234", 1234, true},
		{"4K", 4 << 10, true},
		{"512 MiB", 512 << 20, true},
		{"1g", 1 << 30, true},
		{"2GB", 2 << 30, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1X", 0, false},
		{"M", 0, false},
		{"99999999999T", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestCommands(t *testing.T) {
	dir := t.TempDir()
	c := kcache.Open(dir)
	for i := range 4 {
		e := kcache.Entry{Func: "main.forward", Program: &kcache.Program{Kind: "test/v1", Payload: bytes.Repeat([]byte{'x'}, 1000)}}
		if i%2 == 0 {
			e = kcache.Entry{Func: "main.forward", Name: fmt.Sprintf("fused_add_%d", i),
				Kernel: &kcache.Kernel{Arch: "sm_90", CUBIN: bytes.Repeat([]byte{'c'}, 1000)}}
		}
		if err := c.Put(kcache.NewKey(fmt.Sprint(i)), e); err != nil {
			t.Fatal(err)
		}
	}
	none := filepath.Join(dir, "none")
	tests := []struct {
		args        []string
		code        int
		stdout      []string // what stdout holds
		stderr      []string // what stderr holds; nothing when empty
		notInStdout string
	}{
		{[]string{"-dir", dir, "list"}, 0, []string{"FUNCTION", "KERNEL", kcache.NewKey("0").String(), "main.forward", "fused_add_0", "fused_add_2", "test/v1"}, nil, ""},
		{[]string{"list", "-dir", dir}, 0, []string{"main.forward  fused_add_2"}, nil, ""},
		{[]string{"-dir", none, "list", "-dir", dir}, 0, []string{"fused_add_2"}, nil, "no cache"},
		{[]string{"-dir", dir, "stats"}, 0, []string{"entries", "4", "kernel", "2 entries"}, nil, ""},
		{[]string{"-dir", dir, "prune", "-max-bytes", "2500"}, 0, []string{"removed 2 entries"}, nil, ""},
		{[]string{"stats", "-dir=" + dir}, 0, []string{"entries    2"}, nil, ""},
		{[]string{"prune", "-max-bytes", "1M", "-dir", dir}, 0, []string{"removed 0 entries"}, nil, ""},
		{[]string{"clear", "-dir", dir}, 0, []string{"cleared"}, nil, ""},
		{[]string{"-dir", dir, "stats"}, 0, []string{"entries    0"}, nil, ""},
		{[]string{"-dir", none, "list"}, 0, []string{"no cache in"}, nil, ""},

		// Usage on request goes to stdout.
		{[]string{"-h"}, 0, []string{"usage: kcache", "Commands:", "-dir"}, nil, ""},
		{[]string{"-help"}, 0, []string{"usage: kcache", "prune"}, nil, ""},
		{[]string{"help"}, 0, []string{"usage: kcache", "clear"}, nil, ""},
		{[]string{"list", "-h"}, 0, []string{"usage: kcache list", "-dir"}, nil, "Commands:"},
		{[]string{"-dir", dir, "prune", "-help"}, 0, []string{"usage: kcache prune", "-max-bytes"}, nil, ""},
		{[]string{"help", "stats"}, 0, []string{"usage: kcache stats"}, nil, ""},

		// A bad command line exits 2 with the usage on stderr.
		{nil, 2, nil, []string{"usage: kcache"}, ""},
		{[]string{"-dir", dir, "frob"}, 2, nil, []string{`unknown command "frob"`, "usage: kcache"}, ""},
		{[]string{"-frob", "list"}, 2, nil, []string{"flag provided but not defined: -frob", "usage: kcache"}, ""},
		{[]string{"list", "-frob"}, 2, nil, []string{"flag provided but not defined: -frob", "usage: kcache list"}, ""},
		{[]string{"list", "extra"}, 2, nil, []string{"list takes no arguments: extra", "usage: kcache list"}, ""},
		{[]string{"-dir", dir, "prune"}, 2, nil, []string{"prune needs -max-bytes", "usage: kcache prune"}, ""},
		{[]string{"prune", "-max-bytes", "lots"}, 2, nil, []string{`bad size "lots"`, "usage: kcache prune"}, ""},
		{[]string{"-dir"}, 2, nil, []string{"flag needs an argument: -dir"}, ""},
		{[]string{"help", "frob"}, 2, nil, []string{"help takes one command", "usage: kcache"}, ""},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		name := "kcache " + strings.Join(tt.args, " ")
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", name, code, tt.code, &stdout, &stderr)
		}
		for _, w := range tt.stdout {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout lacks %q:\n%s", name, w, &stdout)
			}
		}
		if tt.notInStdout != "" && strings.Contains(stdout.String(), tt.notInStdout) {
			t.Errorf("%s: stdout holds %q:\n%s", name, tt.notInStdout, &stdout)
		}
		if tt.stderr == nil && stderr.Len() > 0 {
			t.Errorf("%s: stderr:\n%s", name, &stderr)
		}
		for _, w := range tt.stderr {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, w, &stderr)
			}
		}
		if tt.code == 2 && stdout.Len() > 0 {
			t.Errorf("%s: a bad command line wrote to stdout:\n%s", name, &stdout)
		}
	}
	if _, err := os.Stat(none); err == nil {
		t.Error("list created the directory")
	}
}

// Entries that do not say what they are for list as unknown; a part that
// does not apply lists as "-".
func TestLabels(t *testing.T) {
	tests := []struct {
		fn, name         string
		wantFn, wantName string
	}{
		{"main.f", "fused_add", "main.f", "fused_add"},
		{"", "", "unknown", "unknown"},
		{"main.f", "", "main.f", "-"},
		{"", "add_f32", "-", "add_f32"},
		{"main.f\tx", "a\nb", "main.f x", "a b"},
	}
	for _, tt := range tests {
		fn, name := labels(kcache.EntryInfo{Func: tt.fn, Name: tt.name})
		if fn != tt.wantFn || name != tt.wantName {
			t.Errorf("labels(%q, %q) = %q, %q; want %q, %q", tt.fn, tt.name, fn, name, tt.wantFn, tt.wantName)
		}
	}
}
