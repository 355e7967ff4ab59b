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
		e := kcache.Entry{Program: &kcache.Program{Kind: "test/v1", Payload: bytes.Repeat([]byte{'x'}, 1000)}}
		if i%2 == 0 {
			e = kcache.Entry{Kernel: &kcache.Kernel{Arch: "sm_90", CUBIN: bytes.Repeat([]byte{'c'}, 1000)}}
		}
		if err := c.Put(kcache.NewKey(fmt.Sprint(i)), e); err != nil {
			t.Fatal(err)
		}
	}
	run1 := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return out.String() + errOut.String(), code
	}
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-dir", dir, "list"}, 0, []string{"KEY", kcache.NewKey("0").String(), "kernel", "test/v1"}},
		{[]string{"-dir", dir, "stats"}, 0, []string{"entries", "4", "kernel", "2 entries"}},
		{[]string{"-dir", dir, "prune", "-max-bytes", "2500"}, 0, []string{"removed 2 entries"}},
		{[]string{"-dir", dir, "stats"}, 0, []string{"entries    2"}},
		{[]string{"-dir", dir, "clear"}, 0, []string{"cleared"}},
		{[]string{"-dir", dir, "stats"}, 0, []string{"entries    0"}},
		{[]string{"-dir", filepath.Join(dir, "none"), "list"}, 0, []string{"no cache in"}},
		{[]string{"-dir", dir, "prune"}, 2, []string{"usage"}},
		{[]string{"-dir", dir, "frob"}, 2, []string{"unknown command"}},
		{nil, 2, []string{"usage"}},
	}
	for _, tt := range tests {
		out, code := run1(tt.args...)
		if code != tt.code {
			t.Errorf("kcache %s: exit %d, want %d\n%s", strings.Join(tt.args, " "), code, tt.code, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("kcache %s: output lacks %q:\n%s", strings.Join(tt.args, " "), w, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); err == nil {
		t.Error("list created the directory")
	}
}
