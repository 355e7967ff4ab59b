package tensor

import (
	"runtime"
	"testing"
)

// The benchmarks report GB/s through b.SetBytes: Add moves 3 × 4 bytes per
// float32 element (two reads, one write), Sum reads 4, GELU 2 × 4. Add and
// Sum are bound by memory bandwidth; GELU by arithmetic, so it shows how
// kernels scale with cores. Run them with
//
//	go test ./tensor -run '^$' -bench . -benchtime 20x

const benchN = 1 << 24 // 16M elements

func benchAdd(b *testing.B, procs int) {
	y := Randn(2, Float32, benchN)
	benchPointwise(b, procs, 3*4, func(x *Tensor) *Tensor { return x.Add(y) })
}

func benchPointwise(b *testing.B, procs int, bytesPerElem int64, op func(*Tensor) *Tensor) {
	if procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	}
	x := Randn(1, Float32, benchN)
	out := op(x) // warm up: compile the block, fault in the pages
	if out.Numel() != benchN {
		b.Fatal("bad result size")
	}
	b.SetBytes(bytesPerElem * benchN)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		out = op(x)
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

func BenchmarkGELUFloat32_16M(b *testing.B) {
	benchPointwise(b, 0, 2*4, (*Tensor).GELU)
}

func BenchmarkGELUFloat32_16M_1Core(b *testing.B) {
	benchPointwise(b, 1, 2*4, (*Tensor).GELU)
}
