package tensor

import (
	"testing"

	"gocompile/array"
	"gocompile/internal/testcache"
)

// TestMain keeps the tests' compiled artifacts out of the user's cache
// directory: unless GOCOMPILE_CACHE_DIR is set, they go to a temporary one.
func TestMain(m *testing.M) { testcache.Main(m) }

// newTensor is a contiguous CPU tensor of zeros, whose storage a test
// fills through t.v.HostData().
func newTensor(dt DType, shape []int) *Tensor { return wrap(array.New(CPU, dt, shape)) }
