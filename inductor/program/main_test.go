package program

import (
	"testing"

	"gocompile/internal/testcache"
)

// TestMain keeps the tests' compiled artifacts out of the user's cache
// directory: unless GOCOMPILE_CACHE_DIR is set, they go to a temporary one.
func TestMain(m *testing.M) { testcache.Main(m) }
