//go:build !purego

package ir

//go:noescape
func sumF32AVX2(x *float32, n int, s *[16]float64)

//go:noescape
func addWidenedF32AVX2(l *float64, x *float32, n int)

// addWidenedLanes adds x[j] into l[j] for j < len(x)&^7 where there is a
// vector loop and returns how many it added.
func addWidenedLanes[T floating](l []float64, x []T) int {
	var zero T
	if _, is32 := any(zero).(float32); !hasAVX2 || !is32 || len(x) < 8 {
		return 0
	}
	x32 := asFloat[float32](x)
	addWidenedF32AVX2(&l[:len(x32)][0], &x32[0], len(x32))
	return len(x32) &^ 7
}

//go:noescape
func sumBlocksF32AVX2(x *float32, blocks, size int, acc float64) float64

//go:noescape
func sumBlocksF64AVX2(x *float64, blocks, size int, acc float64) float64

// sumBlocksVec adds to acc the sums of the whole blocks of size values in
// x, in order, where there is a vector loop, and returns the new acc and
// how many values it summed.
func sumBlocksVec[T floating](x []T, size int, acc float64) (float64, int) {
	blocks := len(x) / size
	if !hasAVX2 || blocks == 0 || size%16 != 0 {
		return acc, 0
	}
	var zero T
	switch any(zero).(type) {
	case float32:
		acc = sumBlocksF32AVX2(&asFloat[float32](x)[0], blocks, size, acc)
	case float64:
		acc = sumBlocksF64AVX2(&asFloat[float64](x)[0], blocks, size, acc)
	}
	return acc, blocks * size
}

//go:noescape
func sumF64AVX2(x *float64, n int, s *[16]float64)

//go:noescape
func bestF32AVX2(x *float32, n int, greater bool, m *[32]float32) (nan bool)

// bestValue is the greatest (greater) or least value of x for a value
// reduction, whose index does not matter; ok is false when x holds a NaN
// or the value is a zero (whose sign the first zero decides), which
// bestFloat handles.
func bestValue[T floating](x []T, greater bool) (best T, ok bool) {
	var zero T
	if _, is32 := any(zero).(float32); !hasAVX2 || !is32 || len(x) < 32 {
		b, _, ok := bestFloat(x, greater)
		return b, ok
	}
	x32 := asFloat[float32](x)
	var m [32]float32
	if bestF32AVX2(&x32[0], len(x32), greater, &m) {
		return 0, false
	}
	b := m[0]
	better := func(v float32) bool { return greater && v > b || !greater && v < b }
	for _, v := range m[1:] {
		if better(v) {
			b = v
		}
	}
	for _, v := range x32[len(x32)&^31:] {
		if v != v {
			return 0, false
		}
		if better(v) {
			b = v
		}
	}
	if b == 0 {
		return 0, false
	}
	return T(b), true
}

// sumLanes adds x[i+j] into s[j] for every whole group of sixteen values
// and returns how many values it added (see sumFloat).
func sumLanes[T floating](x []T, s *[16]float64) int {
	n := len(x) &^ 15
	if !hasAVX2 || n == 0 {
		return sumLanesGo(x, s)
	}
	switch x := any(x).(type) {
	case []float32:
		sumF32AVX2(&x[0], n, s)
	case []float64:
		sumF64AVX2(&x[0], n, s)
	}
	return n
}
