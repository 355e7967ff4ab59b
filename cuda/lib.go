package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libSpec describes how to find one shared library.
type libSpec struct {
	key   string   // "cuda", "nvrtc", "cublas"
	names []string // file names, preferred first
	// toolkit: whether to look under CUDA toolkit folders ($CUDA_HOME/lib64 …).
	toolkit bool
	// wheelDirs: folders under site-packages where Python wheels put the
	// library ("nvidia/cuda_nvrtc/lib").
	wheelDirs []string
	// sysDirs: fixed extra folders, searched last.
	sysDirs []string
	// companions: libraries (glob patterns relative to the folder the library
	// is found in) to load first from the same folder, so that the library's
	// own dependencies resolve even when that folder is not on the loader path.
	companions []string
}

var (
	driverSpec = libSpec{
		key:   "cuda",
		names: []string{"libcuda.so.1", "libcuda.so"},
		sysDirs: []string{
			"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
			"/usr/local/nvidia/lib64", "/usr/lib/wsl/lib",
		},
	}
	nvrtcSpec = libSpec{
		key:        "nvrtc",
		names:      []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"},
		toolkit:    true,
		wheelDirs:  []string{"nvidia/cuda_nvrtc/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"},
		companions: []string{"libnvrtc-builtins.so*"},
	}
	cublasSpec = libSpec{
		key:        "cublas",
		names:      []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"},
		toolkit:    true,
		wheelDirs:  []string{"nvidia/cublas/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"},
		companions: []string{"libcublasLt.so*"},
	}
)

// candidatePaths lists, in the order they are tried, the paths handed to
// dlopen for spec: first each plain file name (the dynamic loader searches
// LD_LIBRARY_PATH, the ld.so cache and the default folders), then each name
// under $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64,
// /usr/local/cuda-*/lib64 (newest version first), the nvidia/*/lib folders of
// Python wheels ($VIRTUAL_ENV, $CONDA_PREFIX, /usr/lib/python3*,
// /usr/local/lib/python3*, ~/.local/lib/python3*; site-packages and
// dist-packages) and $CONDA_PREFIX/lib, then spec's fixed system folders.
//
// It is pure: getenv and glob are passed in (os.Getenv and filepath.Glob in
// use), so the order can be tested.
func candidatePaths(spec libSpec, getenv func(string) string, glob func(string) []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, n := range spec.names {
		add(n)
	}
	var dirs []string
	if spec.toolkit {
		for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
			if root := getenv(v); root != "" {
				dirs = append(dirs, filepath.Join(root, "lib64"))
			}
		}
		dirs = append(dirs, "/usr/local/cuda/lib64")
		dirs = append(dirs, newestFirst(glob("/usr/local/cuda-*/lib64"))...)
	}
	if len(spec.wheelDirs) > 0 {
		var pyLibs []string // folders holding python3.X
		for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
			if root := getenv(v); root != "" {
				pyLibs = append(pyLibs, filepath.Join(root, "lib"))
			}
		}
		pyLibs = append(pyLibs, "/usr/lib", "/usr/local/lib")
		if home := getenv("HOME"); home != "" {
			pyLibs = append(pyLibs, filepath.Join(home, ".local", "lib"))
		}
		for _, pl := range pyLibs {
			for _, py := range newestFirst(glob(filepath.Join(pl, "python3*"))) {
				for _, pkgs := range []string{"site-packages", "dist-packages"} {
					for _, w := range spec.wheelDirs {
						dirs = append(dirs, filepath.Join(py, pkgs, w))
					}
				}
			}
		}
		if root := getenv("CONDA_PREFIX"); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib"))
		}
	}
	dirs = append(dirs, spec.sysDirs...)
	for _, d := range dirs {
		for _, n := range spec.names {
			add(filepath.Join(d, n))
		}
	}
	return out
}

// newestFirst sorts paths by the version numbers in them, highest first
// ("/usr/local/cuda-12.10" before "/usr/local/cuda-12.9"), ties by name.
func newestFirst(paths []string) []string {
	ps := append([]string(nil), paths...)
	sort.SliceStable(ps, func(i, j int) bool {
		vi, vj := versionNums(ps[i]), versionNums(ps[j])
		for k := 0; k < len(vi) && k < len(vj); k++ {
			if vi[k] != vj[k] {
				return vi[k] > vj[k]
			}
		}
		if len(vi) != len(vj) {
			return len(vi) > len(vj)
		}
		return ps[i] > ps[j]
	})
	return ps
}

// versionNums extracts the runs of decimal digits of s as numbers.
func versionNums(s string) []int {
	var out []int
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		n, _ := strconv.Atoi(s[i:j])
		out = append(out, n)
		i = j
	}
	return out
}

func osGlob(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

var (
	libMu    sync.Mutex
	libPaths = map[string]string{}
)

// LibraryPaths returns, for each library loaded so far, the path it was
// loaded from: keys "cuda" (the driver), "nvrtc" and "cublas". A path without
// a folder was found by the dynamic loader's own search.
func LibraryPaths() map[string]string {
	libMu.Lock()
	defer libMu.Unlock()
	m := make(map[string]string, len(libPaths))
	for k, v := range libPaths {
		m[k] = v
	}
	return m
}

// loadLibrary dlopens the first candidate of spec that loads. The error lists
// what was tried.
func loadLibrary(spec libSpec) (handle uintptr, path string, err error) {
	defer func() {
		if r := recover(); r != nil {
			handle, path, err = 0, "", fmt.Errorf("cuda: loading %s panicked: %v", spec.names[0], r)
		}
	}()
	cands := candidatePaths(spec, os.Getenv, osGlob)
	var firstErr error
	for _, p := range cands {
		if strings.Contains(p, "/") {
			if _, err := os.Stat(p); err != nil {
				continue
			}
			for _, c := range spec.companions {
				for _, cp := range newestFirst(osGlob(filepath.Join(filepath.Dir(p), c))) {
					if _, err := purego.Dlopen(cp, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
						break
					}
				}
			}
		}
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !strings.Contains(p, "/") {
			stem := p
			if i := strings.Index(stem, ".so"); i >= 0 {
				stem = stem[:i+3]
			}
			if real := loadedPath(stem); real != "" {
				p = real
			}
		}
		libMu.Lock()
		libPaths[spec.key] = p
		libMu.Unlock()
		return h, p, nil
	}
	msg := fmt.Sprintf("library %s not found (tried %s)", spec.names[0], strings.Join(cands, ", "))
	if len(cands) > 8 {
		msg = fmt.Sprintf("library %s not found (tried %s and %d more paths)",
			spec.names[0], strings.Join(cands[:len(spec.names)], ", "), len(cands)-len(spec.names))
	}
	if firstErr != nil {
		msg += ": " + firstErr.Error()
	}
	return 0, "", fmt.Errorf("%s", msg)
}

// symbol names a function pointer to resolve.
type symbol struct {
	name     string
	ptr      *uintptr
	optional bool
}

// loadSymbols resolves syms in the library handle h. A missing required
// symbol is an error; a missing optional one leaves its pointer 0.
func loadSymbols(h uintptr, lib string, syms []symbol) error {
	var missing []string
	for _, s := range syms {
		p, err := purego.Dlsym(h, s.name)
		if err != nil || p == 0 {
			if !s.optional {
				missing = append(missing, s.name)
			}
			continue
		}
		*s.ptr = p
	}
	if len(missing) > 0 {
		return fmt.Errorf("cuda: %s lacks %s (library too old?)", lib, strings.Join(missing, ", "))
	}
	return nil
}

// goString copies the NUL-terminated C string at p.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns s as a NUL-terminated byte slice.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// ptrFromUintptr reinterprets a C pointer returned in a register as *byte
// without tripping vet's unsafeptr check (the memory is not Go's).
func ptrFromUintptr(u uintptr) *byte {
	return *(**byte)(unsafe.Pointer(&u))
}
