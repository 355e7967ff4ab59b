package array

import (
	"os"

	"gocompile/internal/logs"
)

// kernelSourcesWanted reports whether generated sources are logged or
// written out (GOCOMPILE_LOGS=output_code, GOCOMPILE_DEBUG_DIR): then
// every kernel's source is generated, cached or not.
func kernelSourcesWanted() bool {
	return logs.On("output_code") || os.Getenv("GOCOMPILE_DEBUG_DIR") != ""
}
