//go:build !purego

package ir

//go:noescape
func sumF32AVX2(x *float32, n int, s *[16]float64)

//go:noescape
func sumF64AVX2(x *float64, n int, s *[16]float64)

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
