package trace

import (
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
)

// libraryDirs are the directories of the packages whose frames Loc skips:
// the location of a node is the user code that called into the library.
var libraryDirs = func() []string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil
	}
	root := filepath.Dir(filepath.Dir(file))
	var dirs []string
	for _, p := range []string{"tensor", "ir", "trace", "guard", "inductor", "cuda", "kcache", "fuse"} {
		dirs = append(dirs, filepath.Join(root, p)+string(filepath.Separator))
	}
	return dirs
}()

// goroot is where the standard library's sources were when this binary
// was built, read from the position recorded for one of its functions (so
// it matches the paths frames report, wherever the binary runs).
var goroot = func() string {
	f := runtime.FuncForPC(reflect.ValueOf(strings.Contains).Pointer())
	if f == nil {
		return ""
	}
	file, _ := f.FileLine(f.Entry())
	if i := strings.LastIndex(file, "/src/strings/"); i >= 0 {
		return file[:i+len("/src/")]
	}
	return ""
}()

func inLibrary(file string) bool {
	if strings.HasSuffix(file, "_test.go") {
		return false // tests are user code
	}
	if goroot != "" && strings.HasPrefix(file, goroot) {
		return true // reflect, runtime
	}
	for _, d := range libraryDirs {
		if strings.HasPrefix(file, d) {
			return true
		}
	}
	return false
}

// Loc returns "file:line" of the innermost caller outside gocompile's
// library packages and the standard library, with the file's base name.
func Loc() string {
	var pcs [32]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.File != "" && !inLibrary(f.File) {
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}

// Break records a graph break: why tracing had to materialise values, and
// where.
type Break struct {
	Reason string
	Loc    string
}

func (b Break) String() string { return b.Reason + " at " + b.Loc }
