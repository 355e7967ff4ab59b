package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nv holds NVRTC's function pointers, resolved once.
var nv struct {
	once    sync.Once
	err     error
	path    string
	include string // a folder holding the toolkit's headers (cuda_fp16.h), or ""
	archs   []int  // supported real architectures (75, 80, 90 …), ascending; nil if unknown

	version, getErrorString, create, compile, destroy uintptr
	logSize, log, ptxSize, ptx, cubinSize, cubin      uintptr
	numArchs, archsFn                                 uintptr
}

// nvrtcNames orders NVRTC's file names so that those not newer than the
// driver come first: code from a newer NVRTC may not load on an older driver.
func nvrtcNames(names []string, driverVersion int) []string {
	if driverVersion <= 0 {
		return names
	}
	dmajor := driverVersion / 1000
	major := func(n string) int {
		v := versionNums(strings.TrimPrefix(n, "libnvrtc.so"))
		if len(v) == 0 {
			return 1 << 30 // unversioned: last
		}
		return v[0]
	}
	out := append([]string(nil), names...)
	sort.SliceStable(out, func(i, j int) bool {
		mi, mj := major(out[i]), major(out[j])
		oki, okj := mi <= dmajor, mj <= dmajor
		return oki && !okj
	})
	return out
}

func initNVRTC() error {
	nv.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				nv.err = fmt.Errorf("cuda: loading NVRTC panicked: %v", r)
			}
		}()
		spec := nvrtcSpec
		if initDriver() == nil {
			spec.names = nvrtcNames(spec.names, drv.version)
		}
		h, path, err := loadLibrary(spec)
		if err != nil {
			nv.err = fmt.Errorf("cuda: NVRTC not found: %w", err)
			return
		}
		nv.path = path
		err = loadSymbols(h, path, []symbol{
			{"nvrtcVersion", &nv.version, false},
			{"nvrtcGetErrorString", &nv.getErrorString, false},
			{"nvrtcCreateProgram", &nv.create, false},
			{"nvrtcCompileProgram", &nv.compile, false},
			{"nvrtcDestroyProgram", &nv.destroy, false},
			{"nvrtcGetProgramLogSize", &nv.logSize, false},
			{"nvrtcGetProgramLog", &nv.log, false},
			{"nvrtcGetPTXSize", &nv.ptxSize, false},
			{"nvrtcGetPTX", &nv.ptx, false},
			{"nvrtcGetCUBINSize", &nv.cubinSize, true},
			{"nvrtcGetCUBIN", &nv.cubin, true},
			{"nvrtcGetNumSupportedArchs", &nv.numArchs, true},
			{"nvrtcGetSupportedArchs", &nv.archsFn, true},
		})
		if err != nil {
			nv.err = err
			return
		}
		if nv.numArchs != 0 && nv.archsFn != 0 {
			var n int32
			if r, _, _ := purego.SyscallN(nv.numArchs, uintptr(unsafe.Pointer(&n))); r == 0 && n > 0 {
				a := make([]int32, n)
				if r, _, _ := purego.SyscallN(nv.archsFn, uintptr(unsafe.Pointer(&a[0]))); r == 0 {
					for _, v := range a {
						nv.archs = append(nv.archs, int(v))
					}
					sort.Ints(nv.archs)
				}
			}
		}
		nv.include = findInclude(nv.path)
	})
	return nv.err
}

// loadedPath returns the file path of the first mapped library whose name
// contains name, read from /proc/self/maps ("" if unknown).
func loadedPath(name string) string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		p := line[i:]
		if strings.Contains(filepath.Base(p), name) {
			return p
		}
	}
	return ""
}

// findInclude returns the header folder of the toolkit NVRTC came from, if it
// holds cuda_fp16.h, so that kernels can include the toolkit's headers.
func findInclude(libPath string) string {
	if !strings.Contains(libPath, "/") {
		return ""
	}
	dir := filepath.Dir(libPath)
	for _, c := range []string{
		filepath.Join(dir, "..", "include"),
		filepath.Join(dir, "..", "..", "cuda_runtime", "include"),
	} {
		if _, err := os.Stat(filepath.Join(c, "cuda_fp16.h")); err == nil {
			return filepath.Clean(c)
		}
	}
	return ""
}

func nvrtcError(op string, r uintptr, log string) error {
	code := int(int32(uint32(r)))
	if code == 0 {
		return nil
	}
	e := &Error{Op: op, Code: code, Msg: log}
	if nv.getErrorString != 0 {
		rr, _, _ := purego.SyscallN(nv.getErrorString, uintptr(code))
		e.Name = goString(ptrFromUintptr(rr))
	}
	if e.Name == "" {
		e.Name = nvrtcErrorNames[code]
	}
	return e
}

// NVRTCVersion returns the version of the loaded NVRTC library.
func NVRTCVersion() (major, minor int, err error) {
	if err := initNVRTC(); err != nil {
		return 0, 0, err
	}
	var ma, mi int32
	r, _, _ := purego.SyscallN(nv.version, uintptr(unsafe.Pointer(&ma)), uintptr(unsafe.Pointer(&mi)))
	if err := nvrtcError("nvrtcVersion", r, ""); err != nil {
		return 0, 0, err
	}
	return int(ma), int(mi), nil
}

// CompileResult is the output of Compile.
type CompileResult struct {
	CUBIN []byte // machine code for Arch "sm_XY"; nil when compiled to PTX
	PTX   []byte // PTX (NUL-terminated) when available
	Log   string // the compiler's log (warnings)
	Arch  string // "sm_90" (CUBIN) or "compute_90" (PTX, JIT-compiled by the driver)
}

// chooseArch picks the --gpu-architecture for a device of compute capability
// cc (major·10+minor) given NVRTC's supported real architectures (ascending;
// nil when unknown): sm_cc when NVRTC supports it (CUBIN), otherwise
// compute_XY for the newest supported XY ≤ cc (PTX). Unknown lists, or a
// device older than all of them, get sm_cc and let NVRTC decide.
func chooseArch(cc int, supported []int) (arch string, cubin bool) {
	best := -1
	for _, a := range supported {
		if a == cc {
			return "sm_" + strconv.Itoa(cc), true
		}
		if a < cc && a > best {
			best = a
		}
	}
	if best < 0 {
		return "sm_" + strconv.Itoa(cc), true
	}
	return "compute_" + strconv.Itoa(best), false
}

// compileArch is the --gpu-architecture Compile gives NVRTC for d, and
// whether it makes CUBIN (else PTX); NVRTC is loaded.
func compileArch(d *Device) (arch string, cubin bool) {
	arch, cubin = chooseArch(d.Major*10+d.Minor, nv.archs)
	if nv.cubin == 0 && cubin {
		// NVRTC older than 11.1 makes only PTX.
		arch, cubin = "compute_"+strconv.Itoa(d.Major*10+d.Minor), false
	}
	return arch, cubin
}

// CompileArch is the architecture Compile compiles d's kernels for, as a
// number (90 for sm_90 or compute_90), which is what their __CUDA_ARCH__
// says (times ten), or an error where NVRTC cannot be loaded.
func (d *Device) CompileArch() (int, error) {
	if err := initNVRTC(); err != nil {
		return 0, err
	}
	arch, _ := compileArch(d)
	return strconv.Atoi(arch[strings.IndexByte(arch, '_')+1:])
}

// Compile compiles the CUDA C++ source src (program name name, which appears
// in the log's messages) for d's architecture with NVRTC: to CUBIN for
// sm_XY when NVRTC supports the device, else to PTX for the newest
// compute_XY it supports, which the driver JIT-compiles on load. The options
// are --gpu-architecture, -default-device and --std=c++17 (plus -I for the
// toolkit's headers when found), then extraOpts. Kernels should be declared
// extern "C" __global__ so that Module.Function finds them by name.
//
// A compile error is returned as an *Error (Op "nvrtcCompileProgram",
// Name "NVRTC_ERROR_COMPILATION") whose Msg is the compiler's log.
func Compile(src, name string, d *Device, extraOpts ...string) (*CompileResult, error) {
	if err := initNVRTC(); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("cuda: Compile: nil device")
	}
	if name == "" {
		name = "kernel.cu"
	}
	arch, wantCubin := compileArch(d)
	opts := []string{"--gpu-architecture=" + arch, "-default-device", "--std=c++17"}
	if nv.include != "" {
		opts = append(opts, "-I"+nv.include)
	}
	opts = append(opts, extraOpts...)

	csrc, cname := cString(src), cString(name)
	var prog uintptr
	r, _, _ := purego.SyscallN(nv.create, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&csrc[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0)
	if err := nvrtcError("nvrtcCreateProgram", r, ""); err != nil {
		return nil, err
	}
	defer purego.SyscallN(nv.destroy, uintptr(unsafe.Pointer(&prog)))

	copts := make([][]byte, len(opts))
	optPtrs := make([]*byte, len(opts))
	for i, o := range opts {
		copts[i] = cString(o)
		optPtrs[i] = &copts[i][0]
	}
	r, _, _ = purego.SyscallN(nv.compile, prog, uintptr(len(optPtrs)), uintptr(unsafe.Pointer(&optPtrs[0])))
	runtime.KeepAlive(copts)
	log := programLog(prog)
	if err := nvrtcError("nvrtcCompileProgram", r, log); err != nil {
		return nil, err
	}
	res := &CompileResult{Log: log, Arch: arch}
	if wantCubin {
		b, err := programOutput(prog, nv.cubinSize, nv.cubin, "nvrtcGetCUBIN")
		if err != nil {
			return nil, err
		}
		res.CUBIN = b
	}
	if b, err := programOutput(prog, nv.ptxSize, nv.ptx, "nvrtcGetPTX"); err == nil {
		res.PTX = b
	} else if !wantCubin {
		return nil, err
	}
	return res, nil
}

func programLog(prog uintptr) string {
	var n uintptr
	if r, _, _ := purego.SyscallN(nv.logSize, prog, uintptr(unsafe.Pointer(&n))); r != 0 || n <= 1 {
		return ""
	}
	b := make([]byte, n)
	if r, _, _ := purego.SyscallN(nv.log, prog, uintptr(unsafe.Pointer(&b[0]))); r != 0 {
		return ""
	}
	return strings.TrimRight(string(b), "\x00\n")
}

func programOutput(prog, sizeFn, getFn uintptr, op string) ([]byte, error) {
	var n uintptr
	r, _, _ := purego.SyscallN(sizeFn, prog, uintptr(unsafe.Pointer(&n)))
	if err := nvrtcError(op+"Size", r, ""); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &Error{Op: op, Code: 3, Name: "NVRTC_ERROR_INVALID_INPUT", Msg: "empty output"}
	}
	b := make([]byte, n)
	r, _, _ = purego.SyscallN(getFn, prog, uintptr(unsafe.Pointer(&b[0])))
	if err := nvrtcError(op, r, ""); err != nil {
		return nil, err
	}
	return b, nil
}

// LoadCompiled loads the output of Compile: its CUBIN when there is one, else
// its PTX.
func (d *Device) LoadCompiled(r *CompileResult) (*Module, error) {
	if r == nil {
		return nil, errors.New("cuda: LoadCompiled: nil result")
	}
	if len(r.CUBIN) > 0 {
		return d.LoadModule(r.CUBIN)
	}
	if len(r.PTX) > 0 {
		return d.LoadModule(r.PTX)
	}
	return nil, errors.New("cuda: LoadCompiled: result holds neither CUBIN nor PTX")
}
