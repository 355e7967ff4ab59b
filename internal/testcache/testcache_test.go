package testcache

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The helper process reports the cache directory its tests saw.
const helperEnv = "TESTCACHE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		Main(m)
	}
	os.Exit(m.Run())
}

func TestHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestRemovesItsDirectory")
	}
	dir := os.Getenv("GOCOMPILE_CACHE_DIR")
	if err := os.WriteFile(dir+"/entry", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("CACHE %s", dir)
}

// Main gives the tests a new directory and removes it, files and all, even
// though the process ends in os.Exit; a directory the caller set is kept.
func TestRemovesItsDirectory(t *testing.T) {
	tmp := t.TempDir()
	run := func(env ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v")
		cmd.Env = append(os.Environ(), append([]string{helperEnv + "=1", "TMPDIR=" + tmp}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, dir, ok := strings.Cut(l, "CACHE "); ok {
				return strings.TrimSpace(dir)
			}
		}
		t.Fatalf("helper reported no directory:\n%s", out)
		return ""
	}

	dir := run("GOCOMPILE_CACHE_DIR=")
	if !strings.HasPrefix(dir, tmp) {
		t.Errorf("cache directory %s is not in TMPDIR %s", dir, tmp)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}

	own := t.TempDir()
	if dir := run("GOCOMPILE_CACHE_DIR=" + own); dir != own {
		t.Errorf("cache directory %s, want the one set, %s", dir, own)
	}
	if _, err := os.Stat(own + "/entry"); err != nil {
		t.Errorf("the directory the caller set lost its entry: %v", err)
	}
}
