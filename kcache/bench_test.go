package kcache

import (
	"testing"
)

// A memory hit is what a warm process pays per lookup: it must stay far
// below a microsecond.
func BenchmarkGetOrComputeMemoryHit(b *testing.B) {
	c := Open(b.TempDir())
	k := NewKey("bench")
	e := Entry{Kernel: &Kernel{Arch: "sm_90", CUBIN: make([]byte, 4096)}}
	if _, err := c.GetOrCompute(k, func() (Entry, error) { return e, nil }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.GetOrCompute(k, func() (Entry, error) { b.Fatal("recomputed"); return e, nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// The same from many goroutines at once.
func BenchmarkGetOrComputeMemoryHitParallel(b *testing.B) {
	c := Open(b.TempDir())
	k := NewKey("bench")
	e := Entry{Kernel: &Kernel{Arch: "sm_90", CUBIN: make([]byte, 4096)}}
	c.GetOrCompute(k, func() (Entry, error) { return e, nil })
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.GetOrCompute(k, func() (Entry, error) { return e, nil })
		}
	})
}
