//go:build !amd64 || purego

package ir

// expF32 sets d[i] = e^a[i] for i < len(d), with ar around it.
func expF32(d, a []float32, ar around) { expF32Go(d, a, ar) }

// erfF32 sets d[i] = erf(a[i]) for i < len(d), with ar around it.
func erfF32(d, a []float32, ar around) { erfF32Go(d, a, ar) }

// tanhF32 sets d[i] = tanh(a[i]) for i < len(d), with ar around it.
func tanhF32(d, a []float32, ar around) { tanhF32Go(d, a, ar) }
