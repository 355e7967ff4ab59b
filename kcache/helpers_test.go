package kcache

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
)

// recorder is a slog.Handler that keeps the records it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records of level lvl were logged.
func (r *recorder) count(lvl slog.Level) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level == lvl {
			n++
		}
	}
	return n
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	for _, rec := range r.records {
		fmt.Fprintf(&b, "%v %s", rec.Level, rec.Message)
		rec.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Resolve()); return true })
		b.WriteByte('\n')
	}
	return b.String()
}

// openTest opens a cache in dir whose logs go to a new recorder.
func openTest(t testing.TB, dir string, opts ...Option) (*Cache, *recorder) {
	t.Helper()
	rec := new(recorder)
	return Open(dir, append([]Option{WithLogger(slog.New(rec))}, opts...)...), rec
}

// kernelEntry returns a kernel entry whose contents derive from seed and
// whose code is n bytes long.
func kernelEntry(seed string, n int) Entry {
	code := bytes.Repeat([]byte(seed), n/len(seed)+1)[:n]
	return Entry{
		Kernel: &Kernel{
			Arch:  "sm_90",
			CUBIN: code,
			PTX:   []byte(".version 8.0\n// " + seed),
			Functions: []Function{
				{Name: "k_" + seed, Registers: 32, SharedBytes: 1024, MaxThreads: 1024, Block: [3]int32{256, 1, 1}},
			},
		},
		CompileSeconds: 0.25,
	}
}

func programEntry(seed string) Entry {
	return Entry{Program: &Program{Kind: "test.program/v1", Payload: []byte("payload " + seed)}, CompileSeconds: 1.5}
}
