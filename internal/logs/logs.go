// Package logs is where gocompile's packages decide whether to log a
// category (GOCOMPILE_LOGS) and where their records go.
package logs

import (
	"os"
	"strings"
)

// On reports whether GOCOMPILE_LOGS (a comma-separated list: graph,
// guards, recompiles, breaks, fusion, output_code, cache, cudagraphs,
// autotune, or all) names category. Only compile paths ask.
func On(category string) bool {
	for _, c := range strings.Split(os.Getenv("GOCOMPILE_LOGS"), ",") {
		if c = strings.TrimSpace(c); c == category || c == "all" {
			return true
		}
	}
	return false
}
