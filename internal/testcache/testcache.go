// Package testcache gives a package's tests an artifact cache of their own,
// so that running them leaves nothing in the user's cache directory.
package testcache

import (
	"fmt"
	"os"
	"testing"
)

// Main runs m's tests and exits with their status. Unless
// GOCOMPILE_CACHE_DIR is set, the tests compile into a new temporary
// directory, which Main removes before it exits: a TestMain cannot defer
// the removal itself, since os.Exit skips deferred calls.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("GOCOMPILE_CACHE_DIR") != "" {
		return m.Run() // the caller's choice, or a test's child process
	}
	dir, err := os.MkdirTemp("", "gocompile-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcache:", err)
		return 1
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "testcache:", err)
		}
	}()
	os.Setenv("GOCOMPILE_CACHE_DIR", dir)
	return m.Run()
}
