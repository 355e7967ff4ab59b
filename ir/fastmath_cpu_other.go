//go:build !amd64 || purego

package ir

// expF32 sets d[i] = e^a[i] for i < len(d), with ar around it.
func expF32(d, a []float32, ar around) { expF32Go(d, a, ar) }
