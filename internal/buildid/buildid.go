// Package buildid names the exact gocompile code a binary holds, which
// keys compiled artifacts by name.
package buildid

import (
	"runtime/debug"
	"sync"
)

// Identity names the exact gocompile code in this binary, or is ""
// when nothing does: a released gocompile module version, or the revision
// of a clean checkout of gocompile itself. With it, a generated kernel's
// name and the identity determine its source, so cached kernels are found
// by name without generating their source (package array); without it
// (a modified checkout, a test binary) kernels are keyed by their source.
// Tests replace it.
var Identity = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == "gocompile" && d.Replace == nil && d.Version != "" && d.Version != "(devel)" {
			return d.Version
		}
	}
	if bi.Main.Path != "gocompile" {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "false" {
		return "rev " + rev
	}
	return ""
})
