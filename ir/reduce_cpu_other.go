//go:build !amd64 || purego

package ir

// sumLanes adds x[i+j] into s[j] for every whole group of sixteen values
// and returns how many values it added (see sumFloat).
func sumLanes[T floating](x []T, s *[16]float64) int { return sumLanesGo(x, s) }
