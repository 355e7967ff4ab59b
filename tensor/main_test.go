package tensor

import (
	"os"
	"testing"

	"gocompile/array"
)

// TestMain keeps the tests' compiled artifacts out of the user's cache
// directory: unless GOCOMPILE_CACHE_DIR is set, they go to a temporary one.
func TestMain(m *testing.M) {
	if os.Getenv("GOCOMPILE_CACHE_DIR") == "" {
		dir, err := os.MkdirTemp("", "gocompile-test-cache-")
		if err == nil {
			os.Setenv("GOCOMPILE_CACHE_DIR", dir)
			defer os.RemoveAll(dir)
		}
	}
	code := m.Run()
	os.Exit(code)
}

// newTensor is a contiguous CPU tensor of zeros, whose storage a test
// fills through t.v.HostData().
func newTensor(dt DType, shape []int) *Tensor { return wrap(array.New(CPU, dt, shape)) }
