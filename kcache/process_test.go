package kcache

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The multi-process test runs this test binary several times at once, in
// a helper mode the environment selects, all on one cache directory.
const (
	helperEnv    = "KCACHE_TEST_HELPER" // "share" or "evict"
	helperDirEnv = "KCACHE_TEST_DIR"
	helperIDEnv  = "KCACHE_TEST_ID"
	helpers      = 6
	sharedKeys   = 12
	evictLimit   = 64 << 10
)

// processEntry is the entry every process computes for key j: the same
// bytes in each, of sizes from 100 bytes to 40 KiB.
func processEntry(j int) Entry {
	if j%3 == 2 {
		return Entry{Program: &Program{Kind: "test.program/v1", Payload: bytes.Repeat([]byte{byte(j)}, 100+j*3001%40000)}, CompileSeconds: 1}
	}
	return kernelEntry(fmt.Sprintf("key%d-", j), 100+j*7919%40000)
}

func processKey(j int) Key { return NewKey("multi-process", strconv.Itoa(j)) }

func sameEntry(a, b Entry) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	if a.Kernel != nil {
		return bytes.Equal(a.Kernel.CUBIN, b.Kernel.CUBIN) && bytes.Equal(a.Kernel.PTX, b.Kernel.PTX) && a.Kernel.Functions[0] == b.Kernel.Functions[0]
	}
	return bytes.Equal(a.Program.Payload, b.Program.Payload)
}

func TestMultiProcess(t *testing.T) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelper(t, mode)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, mode := range []string{"share", "evict"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			var wg sync.WaitGroup
			outs := make([][]byte, helpers)
			errs := make([]error, helpers)
			for i := range helpers {
				cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcess$", "-test.v")
				cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir, helperIDEnv+"="+strconv.Itoa(i))
				wg.Add(1)
				go func() {
					defer wg.Done()
					outs[i], errs[i] = cmd.CombinedOutput()
				}()
			}
			// Start them all at once: each waits for this file.
			time.Sleep(50 * time.Millisecond)
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			for i := range helpers {
				if errs[i] != nil {
					t.Errorf("process %d: %v\n%s", i, errs[i], outs[i])
				}
			}
			checkDir(t, dir, mode)
		})
	}
}

// checkDir checks that every file the processes left is a valid entry for
// the key it is named by, and, when they shared keys, that all are there.
func checkDir(t *testing.T, dir, mode string) {
	var total int64
	var found int
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Dir(path) == dir {
			return err
		}
		if isTemp(d.Name()) {
			t.Errorf("temporary file %s was left behind", path)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return nil
		}
		total += int64(len(data))
		found++
		k, _, err := DecodeEntry(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		} else if k.String() != d.Name() {
			t.Errorf("%s holds the entry of key %s", path, k)
		}
		return nil
	})
	switch mode {
	case "share":
		c, rec := openTest(t, dir)
		for j := range sharedKeys {
			e, ok := c.Get(processKey(j))
			if !ok || !sameEntry(e, processEntry(j)) {
				t.Errorf("entry %d: found %v, or not the entry written", j, ok)
			}
		}
		if n := rec.count(slog.LevelWarn); n > 0 {
			t.Errorf("%d warnings:\n%s", n, rec)
		}
	case "evict":
		// Each process enforces the limit as it sees it; together they may
		// overshoot by what they wrote since their last count.
		if slack := int64(evictLimit + helpers*(evictLimit/8+45000)); total > slack {
			t.Errorf("%d entries of %d bytes in all; the limit is %d", found, total, evictLimit)
		}
		t.Logf("%d entries of %d bytes in all; the limit is %d", found, total, evictLimit)
	}
}

// runHelper is one process of TestMultiProcess. In mode "share" it reads
// and writes the same keys as the others, through fresh caches so that
// every read goes to disk; in mode "evict" it writes more than the disk
// limit while the others do the same and evict.
func runHelper(t *testing.T, mode string) {
	dir := os.Getenv(helperDirEnv)
	id, _ := strconv.Atoi(os.Getenv(helperIDEnv))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never told to start")
		}
		time.Sleep(time.Millisecond)
	}
	rec := new(recorder)
	opts := []Option{WithLogger(slog.New(rec))}
	switch mode {
	case "share":
		for round := range 8 {
			for n := range sharedKeys {
				j := (n + id + round) % sharedKeys // processes start on different keys
				want := processEntry(j)
				c := Open(dir, opts...)
				e, err := c.GetOrCompute(processKey(j), func() (Entry, error) { return want, nil })
				if err != nil || !sameEntry(e, want) {
					t.Fatalf("round %d, key %d: GetOrCompute = %v", round, j, err)
				}
				if err := c.Put(processKey(j), want); err != nil {
					t.Fatal(err)
				}
				if e, ok := Open(dir, opts...).Get(processKey(j)); !ok || !sameEntry(e, want) {
					t.Fatalf("round %d, key %d: Get from a fresh cache found %v, or another entry", round, j, ok)
				}
			}
		}
	case "evict":
		c := Open(dir, append(opts, WithDiskLimit(evictLimit))...)
		for n := range 30 {
			j := n + 10*id // neighbours share ten keys
			if _, err := c.GetOrCompute(processKey(j), func() (Entry, error) { return processEntry(j), nil }); err != nil {
				t.Fatal(err)
			}
			if e, ok := Open(dir, opts...).Get(processKey(j)); ok && !sameEntry(e, processEntry(j)) {
				t.Fatalf("key %d: Get found another entry", j)
			}
		}
	}
	if n := rec.count(slog.LevelWarn); n > 0 {
		t.Fatalf("%d warnings:\n%s", n, strings.TrimSpace(rec.String()))
	}
}
