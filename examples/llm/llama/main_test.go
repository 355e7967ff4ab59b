package llama_test

import (
	"testing"

	"gocompile/internal/testcache"
)

func TestMain(m *testing.M) { testcache.Main(m) }
