package tensor

import (
	"runtime"
	"testing"
)

// The benchmarks report GB/s through b.SetBytes: Add moves 3 × 4 bytes per
// float32 element (two reads, one write), Sum reads 4. Run them with
//
//	go test ./tensor -run XXX -bench . -benchtime 3x

const benchN = 1 << 24 // 16M elements

func benchAdd(b *testing.B, procs int) {
	if procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	}
	x := Randn(1, Float32, benchN)
	y := Randn(2, Float32, benchN)
	out := x.Add(y) // warm up: compile the block, fault in the pages
	if out.Numel() != benchN {
		b.Fatal("bad result size")
	}
	b.SetBytes(3 * 4 * benchN)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		out = x.Add(y)
	}
	b.StopTimer()
	runtime.KeepAlive(out)
}

func benchSum(b *testing.B, procs int) {
	if procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	}
	x := Randn(3, Float32, benchN)
	s := x.Sum()
	b.SetBytes(4 * benchN)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s = x.Sum()
	}
	b.StopTimer()
	runtime.KeepAlive(s)
}

func BenchmarkAddFloat32_16M(b *testing.B)       { benchAdd(b, 0) }
func BenchmarkAddFloat32_16M_1Core(b *testing.B) { benchAdd(b, 1) }
func BenchmarkSumFloat32_16M(b *testing.B)       { benchSum(b, 0) }
func BenchmarkSumFloat32_16M_1Core(b *testing.B) { benchSum(b, 1) }
