//go:build !amd64 || purego

package ir

// sumLanes adds x[i+j] into s[j] for every whole group of sixteen values
// and returns how many values it added (see sumFloat).
func sumLanes[T floating](x []T, s *[16]float64) int { return sumLanesGo(x, s) }

// bestValue is the greatest (greater) or least value of x for a value
// reduction; ok is false when x holds a NaN.
func bestValue[T floating](x []T, greater bool) (best T, ok bool) {
	b, _, ok := bestFloat(x, greater)
	return b, ok
}

func addWidenedLanes[T floating](l []float64, x []T) int { return 0 }

func sumBlocksVec[T floating](x []T, size int, acc float64) (float64, int) { return acc, 0 }
