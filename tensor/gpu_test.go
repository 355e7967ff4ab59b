package tensor

import (
	"testing"

	"gocompile/cuda"
)

// requireGPU skips a test, saying why, when no usable CUDA GPU is present.
func requireGPU(t testing.TB) {
	t.Helper()
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
}
