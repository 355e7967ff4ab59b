package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/x448/float16"
)

// ---- Tests that need no GPU ----

func TestAvailableNoPanic(t *testing.T) {
	ok, err := Available()
	ok2, err2 := Available()
	if ok != ok2 || err != err2 {
		t.Fatalf("Available not cached: (%v, %v) then (%v, %v)", ok, err, ok2, err2)
	}
	if ok {
		if err != nil {
			t.Fatalf("Available() = true, %v", err)
		}
		t.Logf("CUDA available: %d device(s), libraries %v", DeviceCount(), LibraryPaths())
		return
	}
	if err == nil || err.Error() == "" {
		t.Fatalf("Available() = false without a reason")
	}
	t.Logf("CUDA not available: %v", err)
	if DeviceCount() == 0 {
		if _, err := GetDevice(0); err == nil {
			t.Fatalf("GetDevice(0) succeeded with no device")
		}
	}
}

func TestLoadLibraryMissing(t *testing.T) {
	spec := libSpec{key: "nothing", names: []string{"libgocompile-does-not-exist.so.7"}, toolkit: true}
	h, p, err := loadLibrary(spec)
	if err == nil || h != 0 || p != "" {
		t.Fatalf("loadLibrary of a missing library = %v, %q, %v", h, p, err)
	}
	if !strings.Contains(err.Error(), "libgocompile-does-not-exist.so.7") {
		t.Fatalf("error does not name the library: %v", err)
	}
}

func TestCandidatePaths(t *testing.T) {
	env := map[string]string{"CUDA_HOME": "/opt/cuda", "HOME": "/home/u"}
	globs := map[string][]string{
		"/usr/local/cuda-*/lib64":     {"/usr/local/cuda-11.8/lib64", "/usr/local/cuda-12.10/lib64", "/usr/local/cuda-12.4/lib64"},
		"/usr/local/lib/python3*":     {"/usr/local/lib/python3.10", "/usr/local/lib/python3.12"},
		"/home/u/.local/lib/python3*": {"/home/u/.local/lib/python3.11"},
	}
	getenv := func(k string) string { return env[k] }
	glob := func(p string) []string { return globs[p] }

	spec := libSpec{names: []string{"libx.so.2", "libx.so"}, toolkit: true, wheelDirs: []string{"nvidia/x/lib"}, sysDirs: []string{"/sys/lib"}}
	got := candidatePaths(spec, getenv, glob)
	want := []string{
		"libx.so.2", "libx.so",
		"/opt/cuda/lib64/libx.so.2", "/opt/cuda/lib64/libx.so",
		"/usr/local/cuda/lib64/libx.so.2", "/usr/local/cuda/lib64/libx.so",
		"/usr/local/cuda-12.10/lib64/libx.so.2", "/usr/local/cuda-12.10/lib64/libx.so",
		"/usr/local/cuda-12.4/lib64/libx.so.2", "/usr/local/cuda-12.4/lib64/libx.so",
		"/usr/local/cuda-11.8/lib64/libx.so.2", "/usr/local/cuda-11.8/lib64/libx.so",
		"/usr/local/lib/python3.12/site-packages/nvidia/x/lib/libx.so.2", "/usr/local/lib/python3.12/site-packages/nvidia/x/lib/libx.so",
		"/usr/local/lib/python3.12/dist-packages/nvidia/x/lib/libx.so.2", "/usr/local/lib/python3.12/dist-packages/nvidia/x/lib/libx.so",
		"/usr/local/lib/python3.10/site-packages/nvidia/x/lib/libx.so.2", "/usr/local/lib/python3.10/site-packages/nvidia/x/lib/libx.so",
		"/usr/local/lib/python3.10/dist-packages/nvidia/x/lib/libx.so.2", "/usr/local/lib/python3.10/dist-packages/nvidia/x/lib/libx.so",
		"/home/u/.local/lib/python3.11/site-packages/nvidia/x/lib/libx.so.2", "/home/u/.local/lib/python3.11/site-packages/nvidia/x/lib/libx.so",
		"/home/u/.local/lib/python3.11/dist-packages/nvidia/x/lib/libx.so.2", "/home/u/.local/lib/python3.11/dist-packages/nvidia/x/lib/libx.so",
		"/sys/lib/libx.so.2", "/sys/lib/libx.so",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidatePaths:\n got %q\nwant %q", got, want)
	}

	// The driver: plain names first, then fixed folders only.
	got = candidatePaths(driverSpec, getenv, glob)
	if got[0] != "libcuda.so.1" || got[1] != "libcuda.so" {
		t.Errorf("driver candidates start %q", got[:2])
	}
	for _, p := range got {
		if strings.Contains(p, "/opt/cuda") || strings.Contains(p, "python") {
			t.Errorf("driver candidate %q from a toolkit or wheel folder", p)
		}
	}

	// NVRTC: versions newest first, CUDA_PATH after CUDA_HOME, no duplicates.
	env["CUDA_PATH"] = "/opt/cuda"
	got = candidatePaths(nvrtcSpec, getenv, glob)
	wantStart := []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so", "/opt/cuda/lib64/libnvrtc.so.13"}
	if !reflect.DeepEqual(got[:len(wantStart)], wantStart) {
		t.Errorf("nvrtc candidates start %q, want %q", got[:len(wantStart)], wantStart)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Errorf("duplicate candidate %q", p)
		}
		seen[p] = true
	}
	if !seen["/usr/local/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"] ||
		!seen["/usr/local/lib/python3.12/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"] {
		t.Errorf("nvrtc candidates lack wheel folders: %q", got)
	}
	got = candidatePaths(cublasSpec, func(string) string { return "" }, func(string) []string { return nil })
	if got[0] != "libcublas.so.13" || !seen["/usr/local/cuda/lib64/libnvrtc.so.12"] {
		t.Errorf("cublas candidates %q", got)
	}
}

func TestNewestFirst(t *testing.T) {
	got := newestFirst([]string{"/a/cuda-11.8", "/a/cuda-12.10", "/a/cuda-12.4", "/a/cuda-12", "/a/cuda-9.2"})
	want := []string{"/a/cuda-12.10", "/a/cuda-12.4", "/a/cuda-12", "/a/cuda-11.8", "/a/cuda-9.2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("newestFirst = %q, want %q", got, want)
	}
}

func TestNVRTCNames(t *testing.T) {
	names := nvrtcSpec.names
	for _, c := range []struct {
		driver int
		want   []string
	}{
		{0, names},
		{13000, names},
		{12040, []string{"libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.13", "libnvrtc.so"}},
		{11080, []string{"libnvrtc.so.11.2", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}},
	} {
		if got := nvrtcNames(names, c.driver); !reflect.DeepEqual(got, c.want) {
			t.Errorf("nvrtcNames(%d) = %q, want %q", c.driver, got, c.want)
		}
	}
}

func TestChooseArch(t *testing.T) {
	sup := []int{75, 80, 86, 87, 89, 90, 100, 120}
	for _, c := range []struct {
		cc    int
		archs []int
		want  string
		cubin bool
	}{
		{90, sup, "sm_90", true},
		{86, sup, "sm_86", true},
		{121, sup, "compute_120", false},
		{103, sup, "compute_100", false},
		{70, sup, "sm_70", true},
		{90, nil, "sm_90", true},
	} {
		got, cubin := chooseArch(c.cc, c.archs)
		if got != c.want || cubin != c.cubin {
			t.Errorf("chooseArch(%d) = %s, %v; want %s, %v", c.cc, got, cubin, c.want, c.cubin)
		}
	}
}

func TestErrors(t *testing.T) {
	e := &Error{Op: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}
	if got, want := e.Error(), "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{e, true},
		{fmt.Errorf("wrapped: %w", e), true},
		{&Error{Op: "cuMemAlloc_v2", Code: ErrorOutOfMemory}, true},
		{&Error{Op: "cuMemAlloc_v2", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE"}, false},
		{&Error{Op: "nvrtcCompileProgram", Code: 2}, false},
		{&Error{Op: "nvrtcCompileProgram", Code: 1}, true},
		{cublasError("cublasGemmStridedBatchedEx", 3), true},
		{cublasError("cublasGemmStridedBatchedEx", 2), false},
		{errors.New("out of memory"), false},
		{nil, false},
	} {
		if got := IsOutOfMemory(c.err); got != c.want {
			t.Errorf("IsOutOfMemory(%v) = %v", c.err, got)
		}
	}
	log := &Error{Op: "nvrtcCompileProgram", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Msg: "a.cu(3): error: x\n1 error detected\n"}
	if s := log.Error(); !strings.HasPrefix(s, "cuda: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION\na.cu(3)") {
		t.Errorf("compile error text %q", s)
	}
}

func TestArgsPacking(t *testing.T) {
	a := NewArgs()
	a.Ptr(0x1000).I32(-7).F32(1.5).I64(1<<40).F64(2.25).Bytes([]byte{1, 2, 3}, 1).U32(9)
	if a.Len() != 7 {
		t.Fatalf("Len = %d", a.Len())
	}
	wantOffs := []int{0, 8, 12, 16, 24, 32, 36}
	if !reflect.DeepEqual(a.offs, wantOffs) {
		t.Fatalf("offsets %v, want %v", a.offs, wantOffs)
	}
	p := a.params()
	ptrs := unsafe.Slice(p, a.Len())
	if *(*uint64)(ptrs[0]) != 0x1000 || *(*int32)(ptrs[1]) != -7 || *(*float32)(ptrs[2]) != 1.5 ||
		*(*int64)(ptrs[3]) != 1<<40 || *(*float64)(ptrs[4]) != 2.25 || *(*[3]byte)(ptrs[5]) != [3]byte{1, 2, 3} ||
		*(*uint32)(ptrs[6]) != 9 {
		t.Fatalf("packed values wrong")
	}
	if uintptr(ptrs[0])%8 != 0 {
		t.Fatalf("buffer not 8-byte aligned")
	}
	// Growth keeps earlier values.
	a.Reset()
	for i := 0; i < 100; i++ {
		a.I64(int64(i))
	}
	ptrs = unsafe.Slice(a.params(), a.Len())
	for i := 0; i < 100; i++ {
		if *(*int64)(ptrs[i]) != int64(i) {
			t.Fatalf("param %d = %d after growth", i, *(*int64)(ptrs[i]))
		}
	}
	var nilArgs *Args
	if nilArgs.params() != nil || NewArgs().params() != nil {
		t.Fatalf("empty Args must give nil kernelParams")
	}
	// Reuse does not allocate.
	allocs := testing.AllocsPerRun(100, func() {
		a.Reset().Ptr(1).Ptr(2).I32(3).F32(4)
		_ = a.params()
	})
	if allocs != 0 {
		t.Errorf("reusing Args allocates %v times", allocs)
	}
}

// ---- GPU tests: skipped where Available() is false ----

func requireGPU(t testing.TB) *Device {
	t.Helper()
	if ok, err := Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
	d, err := GetDevice(0)
	if err != nil {
		t.Fatalf("GetDevice(0): %v", err)
	}
	return d
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestGPUDeviceProperties(t *testing.T) {
	d := requireGPU(t)
	props := fmt.Sprintf("Name=%q cc=%d.%d SMs=%d TotalMem=%d MaxThreads=%d Shared=%d SharedOptin=%d Warp=%d L2=%d Regs=%d",
		d.Name, d.Major, d.Minor, d.SMCount, d.TotalMem, d.MaxThreadsPerBlock, d.MaxSharedMemPerBlock,
		d.MaxSharedMemPerBlockOptin, d.WarpSize, d.L2CacheSize, d.MaxRegistersPerBlock)
	t.Logf("%s: %s", d, props)
	t.Logf("driver %d, libraries %v", DriverVersion(), LibraryPaths())
	if d.Name == "" || d.Major < 3 || d.SMCount <= 0 || d.TotalMem < 1<<28 ||
		d.MaxThreadsPerBlock < 512 || d.WarpSize != 32 || d.MaxSharedMemPerBlock < 16<<10 ||
		d.MaxSharedMemPerBlockOptin < d.MaxSharedMemPerBlock || d.L2CacheSize <= 0 || d.MaxRegistersPerBlock < 16<<10 {
		t.Errorf("implausible device properties: %s", props)
	}
	if a := d.Arch(); a != fmt.Sprintf("sm_%d%d", d.Major, d.Minor) {
		t.Errorf("Arch() = %q", a)
	}
	if d2, _ := GetDevice(0); d2 != d {
		t.Errorf("GetDevice not cached")
	}
	if _, err := GetDevice(DeviceCount()); err == nil {
		t.Errorf("GetDevice(DeviceCount()) succeeded")
	}
	free, total, err := d.MemInfo()
	check(t, err)
	if free == 0 || free > total || total != d.TotalMem {
		t.Errorf("MemInfo = %d free of %d, TotalMem %d", free, total, d.TotalMem)
	}
	check(t, d.MakeCurrent())
	check(t, d.Synchronize())
	ma, mi, err := NVRTCVersion()
	check(t, err)
	if ma < 11 {
		t.Errorf("NVRTC version %d.%d", ma, mi)
	}
	lp := LibraryPaths()
	if lp["cuda"] == "" || lp["nvrtc"] == "" {
		t.Errorf("LibraryPaths = %v", lp)
	}
	t.Logf("NVRTC %d.%d, supported archs %v, include %q", ma, mi, nv.archs, nv.include)
}

func f32bytes(x []float32) unsafe.Pointer { return unsafe.Pointer(&x[0]) }

func TestGPUMemcpy(t *testing.T) {
	d := requireGPU(t)
	const n = 1 << 18
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.5
	}
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	if s.Device() != d {
		t.Fatalf("Stream.Device() wrong")
	}
	for _, st := range []*Stream{nil, d.DefaultStream(), s} {
		a, err := d.Malloc(4 * n)
		check(t, err)
		b, err := d.Malloc(4 * n)
		check(t, err)
		if a == 0 || a%256 != 0 {
			t.Errorf("Malloc returned %#x", a)
		}
		check(t, st.CopyHtoD(a, f32bytes(src), 4*n))
		check(t, st.CopyDtoD(b, a, 4*n))
		dst := make([]float32, n)
		check(t, st.CopyDtoH(f32bytes(dst), b, 4*n))
		check(t, st.Synchronize())
		for i := range dst {
			if dst[i] != src[i] {
				t.Fatalf("stream %v: dst[%d] = %v, want %v", st, i, dst[i], src[i])
			}
		}
		check(t, d.Free(a))
		check(t, d.Free(b))
	}
	// Pinned host memory, truly asynchronous.
	hp, err := d.MallocHost(4 * n)
	check(t, err)
	defer d.FreeHost(hp)
	h := unsafe.Slice((*float32)(hp), n)
	copy(h, src)
	a, err := d.Malloc(4 * n)
	check(t, err)
	defer d.Free(a)
	check(t, s.CopyHtoD(a, hp, 4*n))
	check(t, s.Memset8(a, 0, 4)) // after the copy, in stream order
	clear(h)
	check(t, s.Synchronize())
	check(t, s.CopyDtoH(hp, a, 4*n))
	check(t, s.Synchronize())
	if h[0] != 0 || h[1] != src[1] || h[n-1] != src[n-1] {
		t.Errorf("pinned round trip: %v %v %v", h[0], h[1], h[n-1])
	}
}

func TestGPUOutOfMemory(t *testing.T) {
	d := requireGPU(t)
	_, err := d.Malloc(1 << 50)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrorOutOfMemory || !IsOutOfMemory(err) {
		t.Fatalf("Malloc(1<<50) = %v, want out of memory", err)
	}
	if !strings.Contains(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY") {
		t.Errorf("error text %q", err)
	}
	t.Log(err)
}

func TestGPUMemset(t *testing.T) {
	d := requireGPU(t)
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	const n = 4096
	p, err := d.Malloc(n)
	check(t, err)
	defer d.Free(p)
	check(t, s.Memset8(p, 0xAB, n))
	check(t, s.Memset32(p+DevicePtr(1024), 0x01020304, 256)) // bytes 1024..2047
	got := make([]byte, n)
	check(t, s.CopyDtoH(unsafe.Pointer(&got[0]), p, n))
	check(t, s.Synchronize())
	for i, v := range got {
		want := byte(0xAB)
		if i >= 1024 && i < 2048 {
			want = [4]byte{4, 3, 2, 1}[i%4] // little-endian 0x01020304
		}
		if v != want {
			t.Fatalf("byte %d = %#x, want %#x", i, v, want)
		}
	}
}

const testKernels = `
extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i];
}
extern "C" __global__ void addc(float* x, float c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + c;
}
extern "C" __global__ void empty() {}
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
struct Pair { double d; int i; };
extern "C" __global__ void bystruct(Pair p, long long* out) {
    out[0] = (long long)p.d + p.i;
}
extern "C" __global__ void bigshared(float* out) {
    extern __shared__ float sh[];
    sh[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = sh[blockDim.x - 1 - threadIdx.x];
}
`

var testModule struct {
	once sync.Once
	mod  *Module
	res  *CompileResult
	err  error
}

func loadTestModule(t testing.TB, d *Device) *Module {
	t.Helper()
	testModule.once.Do(func() {
		r, err := Compile(testKernels, "test_kernels.cu", d)
		if err != nil {
			testModule.err = err
			return
		}
		testModule.res = r
		testModule.mod, testModule.err = d.LoadCompiled(r)
	})
	check(t, testModule.err)
	return testModule.mod
}

func fn(t testing.TB, m *Module, name string) *Function {
	t.Helper()
	f, err := m.Function(name)
	check(t, err)
	return f
}

func upload(t testing.TB, d *Device, x []float32) DevicePtr {
	t.Helper()
	p, err := d.Malloc(4 * len(x))
	check(t, err)
	check(t, (*Stream)(nil).CopyHtoD(p, f32bytes(x), 4*len(x)))
	return p
}

func download(t testing.TB, s *Stream, p DevicePtr, n int) []float32 {
	t.Helper()
	x := make([]float32, n)
	check(t, s.CopyDtoH(f32bytes(x), p, 4*n))
	check(t, s.Synchronize())
	return x
}

func blocks(n, b int) uint32 { return uint32((n + b - 1) / b) }

func TestGPUCompileLaunch(t *testing.T) {
	d := requireGPU(t)
	m := loadTestModule(t, d)
	t.Logf("compiled for %s: %d bytes CUBIN, %d bytes PTX, log %q", testModule.res.Arch, len(testModule.res.CUBIN), len(testModule.res.PTX), testModule.res.Log)
	if !strings.HasPrefix(testModule.res.Arch, "sm_") && !strings.HasPrefix(testModule.res.Arch, "compute_") {
		t.Errorf("Arch = %q", testModule.res.Arch)
	}
	saxpy := fn(t, m, "saxpy")
	regs, shared, maxThreads, err := saxpy.Attributes()
	check(t, err)
	t.Logf("saxpy: %d registers, %d B static shared, %d max threads", regs, shared, maxThreads)
	if regs <= 0 || maxThreads < 128 {
		t.Errorf("implausible attributes")
	}
	if _, err := m.Function("nope"); err == nil {
		t.Errorf("Function(nope) succeeded")
	}

	const n = 10000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	px, py := upload(t, d, x), upload(t, d, y)
	defer d.Free(px)
	defer d.Free(py)
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	args := NewArgs().Ptr(py).Ptr(px).F32(3).I32(n)
	check(t, s.Launch(saxpy, Dim3{X: blocks(n, 256)}, Dim3{X: 256}, 0, args))
	got := download(t, s, py, n)
	for i := range got {
		if want := 3*x[i] + y[i]; got[i] != want {
			t.Fatalf("saxpy y[%d] = %v, want %v", i, got[i], want)
		}
	}

	// A struct by value.
	out, err := d.Malloc(8)
	check(t, err)
	defer d.Free(out)
	var pair [16]byte
	*(*float64)(unsafe.Pointer(&pair[0])) = 40
	*(*int32)(unsafe.Pointer(&pair[8])) = 2
	check(t, s.Launch(fn(t, m, "bystruct"), Dim3{X: 1}, Dim3{X: 1}, 0, args.Reset().Bytes(pair[:], 8).Ptr(out)))
	var res int64
	check(t, s.CopyDtoH(unsafe.Pointer(&res), out, 8))
	check(t, s.Synchronize())
	if res != 42 {
		t.Errorf("bystruct = %d, want 42", res)
	}

	// Dynamic shared memory above 48 KiB needs the opt-in.
	if d.MaxSharedMemPerBlockOptin > 48<<10 {
		big := fn(t, m, "bigshared")
		sh := d.MaxSharedMemPerBlockOptin
		check(t, big.SetMaxDynamicShared(sh))
		o, err := d.Malloc(4 * 256)
		check(t, err)
		defer d.Free(o)
		check(t, s.Launch(big, Dim3{X: 1}, Dim3{X: 256}, sh, args.Reset().Ptr(o)))
		r := download(t, s, o, 256)
		if r[0] != 255 || r[255] != 0 {
			t.Errorf("bigshared = %v … %v", r[0], r[255])
		}
	}

	// A PTX image loads too (JIT).
	if len(testModule.res.PTX) > 0 {
		pm, err := d.LoadModule(testModule.res.PTX[:len(testModule.res.PTX)-1]) // without its NUL
		check(t, err)
		fn(t, pm, "saxpy")
		check(t, pm.Unload())
	}
}

func TestGPUCompileError(t *testing.T) {
	d := requireGPU(t)
	src := "extern \"C\" __global__ void k(float* x) {\n    x[0] = 1;\n    x[1] = undefined_thing;\n}\n"
	_, err := Compile(src, "bad_kernel.cu", d)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Compile of bad source = %v, want *Error", err)
	}
	if e.Op != "nvrtcCompileProgram" || e.Name != "NVRTC_ERROR_COMPILATION" ||
		!strings.Contains(e.Msg, "bad_kernel.cu(3)") || !strings.Contains(e.Msg, "undefined_thing") {
		t.Errorf("compile error = %+v", e)
	}
	t.Log(err)
}

func TestGPUEvents(t *testing.T) {
	d := requireGPU(t)
	m := loadTestModule(t, d)
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	start, err := d.NewEvent()
	check(t, err)
	defer start.Destroy()
	end, err := d.NewEvent()
	check(t, err)
	defer end.Destroy()
	check(t, start.Record(s))
	check(t, s.Launch(fn(t, m, "spin"), Dim3{X: 1}, Dim3{X: 1}, 0, NewArgs().I64(2_000_000)))
	check(t, end.Record(s))
	check(t, end.Synchronize())
	ms, err := ElapsedMs(start, end)
	check(t, err)
	t.Logf("spin of 2e6 cycles: %.3f ms", ms)
	if ms <= 0 || ms > 1000 {
		t.Errorf("ElapsedMs = %v", ms)
	}
}

func TestGPUStreams(t *testing.T) {
	d := requireGPU(t)
	m := loadTestModule(t, d)
	scale := fn(t, m, "scale")
	const n = 1 << 16
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			err := func() error {
				s, err := d.NewStream()
				if err != nil {
					return err
				}
				defer s.Destroy()
				p, err := d.Malloc(4 * n)
				if err != nil {
					return err
				}
				defer d.Free(p)
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(i % 100)
				}
				if err := s.CopyHtoD(p, f32bytes(x), 4*n); err != nil {
					return err
				}
				args := NewArgs()
				for it := 0; it < 10; it++ {
					runtime.Gosched()
					if err := s.Launch(scale, Dim3{X: blocks(n, 256)}, Dim3{X: 256}, 0, args.Reset().Ptr(p).F32(float32(w+1)).I32(n)); err != nil {
						return err
					}
				}
				if err := s.CopyDtoH(f32bytes(x), p, 4*n); err != nil {
					return err
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				f := math.Pow(float64(w+1), 10)
				for i := range x {
					want := float32(float64(i%100) * f)
					if math.Abs(float64(x[i]-want)) > 1e-5*math.Abs(float64(want)) {
						return fmt.Errorf("worker %d: x[%d] = %v, want %v", w, i, x[i], want)
					}
				}
				return nil
			}()
			if err != nil {
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// graphFixture is what the graph tests start from: the test module's
// scale and addc kernels, two device buffers holding 0, 1, ..., n-1, and
// a stream, all released when the test ends.
type graphFixture struct {
	d           *Device
	scale, addc *Function
	init        []float32
	px, py      DevicePtr
	s           *Stream
}

func newGraphFixture(t *testing.T, n int) graphFixture {
	t.Helper()
	d := requireGPU(t)
	m := loadTestModule(t, d)
	f := graphFixture{d: d, scale: fn(t, m, "scale"), addc: fn(t, m, "addc"), init: make([]float32, n)}
	for i := range f.init {
		f.init[i] = float32(i)
	}
	f.px, f.py = upload(t, d, f.init), upload(t, d, f.init)
	t.Cleanup(func() { d.Free(f.px); d.Free(f.py) })
	s, err := d.NewStream()
	check(t, err)
	t.Cleanup(func() { s.Destroy() })
	f.s = s
	return f
}

func TestGPUGraph(t *testing.T) {
	const n = 5000
	f := newGraphFixture(t, n)
	scale, addc, init, px, py, s := f.scale, f.addc, f.init, f.px, f.py, f.s
	args := NewArgs()
	capture := func(p DevicePtr, a, c float32) *Graph {
		t.Helper()
		check(t, s.BeginCapture())
		check(t, s.Launch(scale, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, args.Reset().Ptr(p).F32(a).I32(n)))
		check(t, s.Launch(addc, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, args.Reset().Ptr(p).F32(c).I32(n)))
		g, err := s.EndCapture()
		check(t, err)
		return g
	}
	expect := func(p DevicePtr, f func(float32) float32) {
		t.Helper()
		got := download(t, s, p, n)
		for i := range got {
			if want := f(init[i]); got[i] != want {
				t.Fatalf("x[%d] = %v, want %v", i, got[i], want)
			}
		}
	}
	g1 := capture(px, 2, 1)
	defer g1.Destroy()
	// Capturing queues nothing.
	expect(px, func(v float32) float32 { return v })
	exec, err := g1.Instantiate()
	check(t, err)
	defer exec.Destroy()
	check(t, exec.Launch(s))
	expect(px, func(v float32) float32 { return 2*v + 1 })
	check(t, exec.Launch(s))
	expect(px, func(v float32) float32 { return 2*(2*v+1) + 1 })

	// Same topology, other pointer and scalars: update in place.
	g2 := capture(py, 3, 5)
	defer g2.Destroy()
	check(t, exec.Update(g2))
	check(t, exec.Launch(s))
	expect(py, func(v float32) float32 { return 3*v + 5 })
	expect(px, func(v float32) float32 { return 2*(2*v+1) + 1 })

	// Another topology is refused with a reason.
	check(t, s.BeginCapture())
	check(t, s.Launch(scale, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, args.Reset().Ptr(py).F32(1).I32(n)))
	g3, err := s.EndCapture()
	check(t, err)
	defer g3.Destroy()
	if err := exec.Update(g3); err == nil {
		t.Errorf("Update with another topology succeeded")
	} else {
		t.Log(err)
	}
}

func TestGPULaunchNoAlloc(t *testing.T) {
	d := requireGPU(t)
	m := loadTestModule(t, d)
	scale := fn(t, m, "scale")
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	p, err := d.Malloc(4 * 256)
	check(t, err)
	defer d.Free(p)
	args := NewArgs()
	allocs := testing.AllocsPerRun(200, func() {
		if err := s.Launch(scale, Dim3{X: 1}, Dim3{X: 256}, 0, args.Reset().Ptr(p).F32(1).I32(256)); err != nil {
			t.Fatal(err)
		}
	})
	check(t, s.Synchronize())
	if allocs != 0 {
		t.Errorf("Launch allocates %v times per call", allocs)
	}
}

// gemmRef computes the column-major reference of GemmStridedBatched in float64.
func gemmRef(transA, transB bool, m, n, k int, A []float64, lda, sA int, B []float64, ldb, sB int, C []float64, ldc, sC, batch int) {
	for bi := 0; bi < batch; bi++ {
		a, b, c := A[bi*sA:], B[bi*sB:], C[bi*sC:]
		for col := 0; col < n; col++ {
			for row := 0; row < m; row++ {
				var sum float64
				for p := 0; p < k; p++ {
					var av, bv float64
					if transA {
						av = a[p+row*lda]
					} else {
						av = a[row+p*lda]
					}
					if transB {
						bv = b[col+p*ldb]
					} else {
						bv = b[p+col*ldb]
					}
					sum += av * bv
				}
				c[row+col*ldc] = sum
			}
		}
	}
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	batch          int
	zeroA, zeroB   bool // batch stride 0
}

func runGemm(t *testing.T, d *Device, b *BLAS, s *Stream, c gemmCase, dtype DataType, rng *rand.Rand) (maxRelErr float64) {
	t.Helper()
	rowsA, colsA := c.m, c.k
	if c.transA {
		rowsA, colsA = c.k, c.m
	}
	rowsB, colsB := c.k, c.n
	if c.transB {
		rowsB, colsB = c.n, c.k
	}
	lda, ldb, ldc := rowsA+1, rowsB+2, c.m+3
	sA, sB, sC := lda*colsA+5, ldb*colsB, ldc*c.n+1
	if c.zeroA {
		sA = 0
	}
	if c.zeroB {
		sB = 0
	}
	lenA := lda*colsA + sA*(c.batch-1)
	lenB := ldb*colsB + sB*(c.batch-1)
	lenC := ldc*c.n + sC*(c.batch-1)
	A, B := make([]float64, lenA), make([]float64, lenB)
	for i := range A {
		A[i] = rng.Float64()*2 - 1
	}
	for i := range B {
		B[i] = rng.Float64()*2 - 1
	}
	if dtype == R32F {
		for i := range A {
			A[i] = float64(float32(A[i]))
		}
		for i := range B {
			B[i] = float64(float32(B[i]))
		}
	}
	want := make([]float64, lenC)
	gemmRef(c.transA, c.transB, c.m, c.n, c.k, A, lda, sA, B, ldb, sB, want, ldc, sC, c.batch)

	size := 8
	if dtype == R32F {
		size = 4
	}
	toDev := func(x []float64) DevicePtr {
		p, err := d.Malloc(size * len(x))
		check(t, err)
		if dtype == R32F {
			f := make([]float32, len(x))
			for i, v := range x {
				f[i] = float32(v)
			}
			check(t, s.CopyHtoD(p, unsafe.Pointer(&f[0]), 4*len(f)))
		} else {
			check(t, s.CopyHtoD(p, unsafe.Pointer(&x[0]), 8*len(x)))
		}
		return p
	}
	pA, pB := toDev(A), toDev(B)
	sentinel := make([]float64, lenC)
	for i := range sentinel {
		sentinel[i] = 12345
	}
	pC := toDev(sentinel)
	defer d.Free(pA)
	defer d.Free(pB)
	defer d.Free(pC)
	check(t, b.GemmStridedBatched(s, c.transA, c.transB, c.m, c.n, c.k, pA, lda, int64(sA), pB, ldb, int64(sB), pC, ldc, int64(sC), c.batch, dtype))
	got := make([]float64, lenC)
	if dtype == R32F {
		f := make([]float32, lenC)
		check(t, s.CopyDtoH(unsafe.Pointer(&f[0]), pC, 4*lenC))
		check(t, s.Synchronize())
		for i, v := range f {
			got[i] = float64(v)
		}
	} else {
		check(t, s.CopyDtoH(unsafe.Pointer(&got[0]), pC, 8*lenC))
		check(t, s.Synchronize())
	}
	// Elements outside the C matrices must be untouched.
	inC := make([]bool, lenC)
	for bi := 0; bi < c.batch; bi++ {
		for col := 0; col < c.n; col++ {
			for row := 0; row < c.m; row++ {
				inC[bi*sC+row+col*ldc] = true
			}
		}
	}
	for i := range got {
		if !inC[i] {
			if got[i] != 12345 {
				t.Fatalf("%+v %v: C[%d] outside the matrices changed to %v", c, dtype, i, got[i])
			}
			continue
		}
		e := math.Abs(got[i]-want[i]) / math.Max(1, math.Abs(want[i]))
		maxRelErr = math.Max(maxRelErr, e)
	}
	return maxRelErr
}

func TestGPUBLASGemm(t *testing.T) {
	d := requireGPU(t)
	b, err := d.BLAS()
	check(t, err)
	if b2, _ := d.BLAS(); b2 != b {
		t.Fatalf("BLAS handle not cached")
	}
	t.Logf("cuBLAS from %s", LibraryPaths()["cublas"])
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	rng := rand.New(rand.NewSource(1))
	for _, dtype := range []DataType{R32F, R64F} {
		tol := 1e-5
		if dtype == R64F {
			tol = 1e-13
		}
		for _, c := range []gemmCase{
			{false, false, 5, 7, 3, 3, false, false},
			{true, false, 5, 7, 3, 3, false, false},
			{false, true, 5, 7, 3, 3, false, false},
			{true, true, 5, 7, 3, 3, false, false},
			{false, false, 33, 17, 65, 4, true, false},
			{true, false, 16, 64, 32, 2, false, true},
			{false, true, 64, 1, 128, 5, true, true},
			{true, true, 1, 1, 1, 1, false, false},
		} {
			if e := runGemm(t, d, b, s, c, dtype, rng); e > tol {
				t.Errorf("%v %+v: max relative error %g > %g", dtype, c, e, tol)
			}
		}
	}
	// A GEMM call does not allocate.
	p, err := d.Malloc(8 * 8 * 8 * 3)
	check(t, err)
	defer d.Free(p)
	allocs := testing.AllocsPerRun(50, func() {
		check(t, b.GemmStridedBatched(s, false, false, 8, 8, 8, p, 8, 0, p+256, 8, 0, p+512, 8, 0, 1, R32F))
	})
	if allocs != 0 {
		t.Errorf("GemmStridedBatched allocates %v times per call", allocs)
	}
	// The default (legacy) stream works too.
	if e := runGemm(t, d, b, nil, gemmCase{false, true, 8, 8, 8, 2, false, false}, R32F, rng); e > 1e-5 {
		t.Errorf("nil stream: error %g", e)
	}
}

func TestGPUBLASAllowTF32(t *testing.T) {
	d := requireGPU(t)
	b, err := d.BLAS()
	check(t, err)
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	rng := rand.New(rand.NewSource(2))
	c := gemmCase{false, false, 256, 256, 512, 1, false, false}
	if b.TF32Allowed() {
		t.Fatalf("TF32 allowed by default")
	}
	pedantic := runGemm(t, d, b, s, c, R32F, rng)
	b.AllowTF32(true)
	if !b.TF32Allowed() {
		t.Fatalf("AllowTF32(true) not recorded")
	}
	tf32 := runGemm(t, d, b, s, c, R32F, rng)
	dbl := runGemm(t, d, b, s, c, R64F, rng) // TF32 does not touch float64
	b.AllowTF32(false)
	again := runGemm(t, d, b, s, c, R32F, rng)
	t.Logf("max relative error: pedantic %.3g, TF32 %.3g, float64 with TF32 on %.3g, pedantic again %.3g", pedantic, tf32, dbl, again)
	if pedantic > 1e-5 || again > 1e-5 || dbl > 1e-12 {
		t.Errorf("full-precision results off")
	}
	if tf32 > 5e-2 {
		t.Errorf("TF32 result too far off")
	}
	if d.Major >= 8 && tf32 < 10*pedantic {
		t.Errorf("AllowTF32(true) did not change the precision (TF32 %g vs pedantic %g)", tf32, pedantic)
	}
}

func TestGPUBLASHalf(t *testing.T) {
	d := requireGPU(t)
	b, err := d.BLAS()
	check(t, err)
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	const m, n, k = 16, 8, 32
	rng := rand.New(rand.NewSource(3))
	A, B := make([]float64, m*k), make([]float64, k*n)
	for i := range A {
		A[i] = float64(rng.Intn(5) - 2)
	}
	for i := range B {
		B[i] = float64(rng.Intn(5) - 2)
	}
	want := make([]float64, m*n)
	gemmRef(false, false, m, n, k, A, m, 0, B, k, 0, want, m, 0, 1)
	for _, dtype := range []DataType{R16F, R16BF} {
		enc := func(x []float64) []uint16 {
			out := make([]uint16, len(x))
			for i, v := range x {
				if dtype == R16F {
					out[i] = float16.Fromfloat32(float32(v)).Bits()
				} else {
					out[i] = uint16(math.Float32bits(float32(v)) >> 16)
				}
			}
			return out
		}
		ha, hb := enc(A), enc(B)
		pA, err := d.Malloc(2 * len(ha))
		check(t, err)
		pB, err := d.Malloc(2 * len(hb))
		check(t, err)
		pC, err := d.Malloc(2 * m * n)
		check(t, err)
		check(t, s.CopyHtoD(pA, unsafe.Pointer(&ha[0]), 2*len(ha)))
		check(t, s.CopyHtoD(pB, unsafe.Pointer(&hb[0]), 2*len(hb)))
		check(t, b.GemmStridedBatched(s, false, false, m, n, k, pA, m, 0, pB, k, 0, pC, m, 0, 1, dtype))
		hc := make([]uint16, m*n)
		check(t, s.CopyDtoH(unsafe.Pointer(&hc[0]), pC, 2*m*n))
		check(t, s.Synchronize())
		for i, h := range hc {
			var v float64
			if dtype == R16F {
				v = float64(float16.Frombits(h).Float32())
			} else {
				v = float64(math.Float32frombits(uint32(h) << 16))
			}
			if v != want[i] {
				t.Fatalf("%v: C[%d] = %v, want %v", dtype, i, v, want[i])
			}
		}
		d.Free(pA)
		d.Free(pB)
		d.Free(pC)
	}
}

func BenchmarkGPULaunchEmpty(b *testing.B) {
	d := requireGPU(b)
	m := loadTestModule(b, d)
	empty := fn(b, m, "empty")
	s, err := d.NewStream()
	check(b, err)
	defer s.Destroy()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Launch(empty, Dim3{X: 1}, Dim3{X: 32}, 0, nil); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 1023 {
			check(b, s.Synchronize())
		}
	}
	b.StopTimer()
	check(b, s.Synchronize())
}

func BenchmarkGPULaunchArgs(b *testing.B) {
	d := requireGPU(b)
	m := loadTestModule(b, d)
	scale := fn(b, m, "scale")
	s, err := d.NewStream()
	check(b, err)
	defer s.Destroy()
	p, err := d.Malloc(4 * 256)
	check(b, err)
	defer d.Free(p)
	args := NewArgs()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Launch(scale, Dim3{X: 1}, Dim3{X: 256}, 0, args.Reset().Ptr(p).F32(1).I32(256)); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 1023 {
			check(b, s.Synchronize())
		}
	}
	b.StopTimer()
	check(b, s.Synchronize())
}

// A captured graph's kernel nodes read back with their parameters; giving
// a node new ones redirects the replay; while one goroutine captures,
// another goroutine's launch on the stream waits and is not captured.
func TestGPUGraphKernelParams(t *testing.T) {
	const n = 1000
	f := newGraphFixture(t, n)
	scale, addc, init, px, py, s := f.scale, f.addc, f.init, f.px, f.py, f.s

	check(t, s.BeginCapture())
	other := make(chan error)
	go func() { // queued during the capture: must wait, and land after it
		other <- s.Launch(addc, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, NewArgs().Ptr(py).F32(100).I32(n))
	}()
	check(t, s.Launch(scale, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, NewArgs().Ptr(px).F32(2).I32(n)))
	check(t, s.Launch(addc, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, NewArgs().Ptr(px).F32(1).I32(n)))
	select {
	case err := <-other:
		t.Fatalf("another goroutine's launch ran during the capture (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	g, err := s.EndCapture()
	check(t, err)
	defer g.Destroy()
	check(t, <-other)
	nodes, others, err := g.KernelNodes()
	check(t, err)
	if len(nodes) != 2 || others != 0 {
		t.Fatalf("graph has %d kernel nodes and %d others, want 2 and 0", len(nodes), others)
	}
	for _, k := range nodes {
		if len(k.Params) != 3 || len(k.Params[0]) != 8 || len(k.Params[1]) != 4 || len(k.Params[2]) != 4 {
			t.Fatalf("kernel node parameters %v, want sizes 8, 4, 4", k.Params)
		}
		if p, ok := k.Pointer(0); !ok || p != px {
			t.Fatalf("kernel node reads %#x, want %#x", p, px)
		}
	}
	exec, err := g.Instantiate()
	check(t, err)
	defer exec.Destroy()
	// Redirect both nodes to py.
	for i := range nodes {
		ps := append([][]byte(nil), nodes[i].Params...)
		ps[0] = binary.LittleEndian.AppendUint64(nil, uint64(py))
		check(t, exec.SetKernelParams(&nodes[i], ps))
	}
	check(t, exec.Launch(s))
	gotX, gotY := download(t, s, px, n), download(t, s, py, n)
	for i := range init {
		if gotX[i] != init[i] || gotY[i] != 2*(init[i]+100)+1 {
			t.Fatalf("x[%d] = %v (want %v), y[%d] = %v (want %v)", i, gotX[i], init[i], i, gotY[i], 2*(init[i]+100)+1)
		}
	}
	if err := exec.SetKernelParams(&nodes[0], nodes[0].Params[:2]); err == nil {
		t.Error("SetKernelParams with a parameter missing succeeded")
	}
}

// pdlKernels: produce triggers its dependents at once, then spins before
// writing, so a dependent that read x without griddepcontrol.wait would
// see the old values; consume waits, then reads.
const pdlKernels = `
extern "C" __global__ void produce(float* x, int n, long long spin) {
  asm volatile("griddepcontrol.launch_dependents;");
  const long long t0 = clock64();
  while (clock64() - t0 < spin) {}
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2.f + 1.f;
}
extern "C" __global__ void consume(const float* x, float* y, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.f;
}
`

// A dependent launch reads what the kernel ahead wrote, launched directly
// and replayed from a captured graph.
func TestGPULaunchDependent(t *testing.T) {
	d := requireGPU(t)
	if !d.CanLaunchDependent() {
		t.Skipf("%s (sm_%d%d) has no programmatic dependent launch", d.Name, d.Major, d.Minor)
	}
	r, err := Compile(pdlKernels, "pdl.cu", d)
	check(t, err)
	m, err := d.LoadCompiled(r)
	check(t, err)
	produce, consume := fn(t, m, "produce"), fn(t, m, "consume")
	s, err := d.NewStream()
	check(t, err)
	defer s.Destroy()
	const n = 4099
	px, err := d.Malloc(4 * n)
	check(t, err)
	defer d.Free(px)
	py, err := d.Malloc(4 * n)
	check(t, err)
	defer d.Free(py)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i % 97)
	}
	args := NewArgs()
	run := func() {
		t.Helper()
		check(t, s.Launch(produce, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, args.Reset().Ptr(px).I32(n).I64(200000)))
		check(t, s.LaunchDependent(consume, Dim3{X: blocks(n, 128)}, Dim3{X: 128}, 0, args.Reset().Ptr(px).Ptr(py).I32(n)))
	}
	expect := func(what string, rounds int) {
		t.Helper()
		got := download(t, s, py, n)
		for i, v := range got {
			want := x[i]
			for range rounds {
				want = want*2 + 1
			}
			if v != want+1 {
				t.Fatalf("%s: y[%d] = %v, want %v", what, i, v, want+1)
			}
		}
	}
	check(t, s.CopyHtoD(px, unsafe.Pointer(&x[0]), 4*n))
	run()
	expect("launched", 1)

	check(t, s.BeginCapture())
	run()
	g, err := s.EndCapture()
	check(t, err)
	defer g.Destroy()
	exec, err := g.Instantiate()
	check(t, err)
	defer exec.Destroy()
	check(t, exec.Launch(s))
	expect("graph replay", 2)
	check(t, exec.Launch(s))
	expect("second replay", 3)
}

const chainKernel = `
extern "C" __global__ void chain(const float* x, float* y, int n) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * 2.f + 1.f;
}
`

// BenchmarkGPUGraphChain times a CUDA graph of 256 dependent streaming
// kernels (each reads what the one before wrote), launched plainly and as
// programmatic dependents: what a dependent launch saves a kernel
// boundary, for small (latency-bound) and large (bandwidth-bound) kernels.
func BenchmarkGPUGraphChain(b *testing.B) {
	d := requireGPU(b)
	r, err := Compile(chainKernel, "chain.cu", d)
	check(b, err)
	m, err := d.LoadCompiled(r)
	check(b, err)
	f := fn(b, m, "chain")
	for _, n := range []int{1 << 14, 1 << 18, 1 << 22} {
		for _, dep := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/dependent=%t", n, dep), func(b *testing.B) {
				if dep && !d.CanLaunchDependent() {
					b.Skip("no programmatic dependent launch")
				}
				s, err := d.NewStream()
				check(b, err)
				defer s.Destroy()
				px, err := d.Malloc(4 * n)
				check(b, err)
				defer d.Free(px)
				py, err := d.Malloc(4 * n)
				check(b, err)
				defer d.Free(py)
				const kernels = 256
				grid := Dim3{X: uint32(min(blocks(n, 256), uint32(4*d.SMCount)))}
				args := NewArgs()
				replayGraph(b, s, kernels, func(i int) error {
					src, dst := px, py
					if i%2 == 1 {
						src, dst = py, px
					}
					args.Reset().Ptr(src).Ptr(dst).I32(int32(n))
					if dep {
						return s.LaunchDependent(f, grid, Dim3{X: 256}, 0, args)
					}
					return s.Launch(f, grid, Dim3{X: 256}, 0, args)
				}, nil)
			})
		}
	}
}

// replayGraph captures kernels launches on s into a graph and times b.N
// replays of it, each after before (when not nil) has had its go at the
// executable graph and its kernel nodes; it reports µs a kernel and
// returns the seconds a replay.
func replayGraph(b *testing.B, s *Stream, kernels int, launch func(i int) error, before func(exec *GraphExec, nodes []KernelNode, it int)) float64 {
	check(b, s.BeginCapture())
	for i := range kernels {
		check(b, launch(i))
	}
	g, err := s.EndCapture()
	check(b, err)
	defer g.Destroy()
	exec, err := g.Instantiate()
	check(b, err)
	defer exec.Destroy()
	nodes, _, err := g.KernelNodes()
	check(b, err)
	check(b, exec.Launch(s))
	check(b, s.Synchronize())
	b.ResetTimer()
	for it := range b.N {
		if before != nil {
			before(exec, nodes, it)
		}
		check(b, exec.Launch(s))
	}
	check(b, s.Synchronize())
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*1e6/float64(kernels), "µs/kernel")
	return sec
}

// streamKernel reads nvec 16-byte vectors of w, VPT a thread in a
// grid-wide stride, and writes one sum a block (so the loads are kept).
// With pre set the loads are issued before griddepcontrol.wait, as the
// product kernels issue their weight loads: launched as a programmatic
// dependent they stream while the kernel ahead runs.
const streamKernel = `
template <int VPT>
__device__ void stream(const uint4* __restrict__ w, int nvec, float* out, int pre) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  const int tid = blockIdx.x * blockDim.x + threadIdx.x, all = gridDim.x * blockDim.x;
  uint4 v[VPT];
  if (!pre) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
  #pragma unroll
  for (int j = 0; j < VPT; j++) {
    const int i = tid + j * all;
    v[j] = i < nvec ? __ldg(w + i) : make_uint4(0, 0, 0, 0);
  }
  if (pre) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
  float s = 0.f;
  #pragma unroll
  for (int j = 0; j < VPT; j++) s += __uint_as_float(v[j].x ^ v[j].y ^ v[j].z ^ v[j].w);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.x, s);
}
extern "C" __global__ void stream4(const uint4* w, int nvec, float* out, int pre) { stream<4>(w, nvec, out, pre); }
extern "C" __global__ void stream8(const uint4* w, int nvec, float* out, int pre) { stream<8>(w, nvec, out, pre); }
extern "C" __global__ void stream16(const uint4* w, int nvec, float* out, int pre) { stream<16>(w, nvec, out, pre); }
extern "C" __global__ void streamall(const uint4* __restrict__ w, long long nvec, float* out) {
  float s = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nvec; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = __ldg(w + i);
    s += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.x % 1024, s);
}
`

// BenchmarkGPUGraphStream times a CUDA graph of independent kernels each
// reading its own buffer once (256 MB in all, past the L2), as a chain of
// weight-streaming products does: launched plainly, as programmatic
// dependents loading after griddepcontrol.wait, and as dependents loading
// before it; against one kernel reading all the buffers. What a kernel
// boundary costs a bandwidth-bound kernel of each size, and how much of
// it a dependent launch can hide.
func BenchmarkGPUGraphStream(b *testing.B) {
	d := requireGPU(b)
	r, err := Compile(streamKernel, "stream.cu", d)
	check(b, err)
	m, err := d.LoadCompiled(r)
	check(b, err)
	const total = 256 << 20
	base, err := d.Malloc(total)
	check(b, err)
	defer d.Free(base)
	s, err := d.NewStream()
	check(b, err)
	defer s.Destroy()
	check(b, s.Memset8(base, 1, total))
	out, err := d.Malloc(4 * 65536)
	check(b, err)
	defer d.Free(out)
	// timeGraph times replays of the kernels' graph; with patch set, every
	// replay first gives each kernel node a new out parameter, as a
	// replayed program gives its outputs fresh buffers.
	timeGraph := func(b *testing.B, launch func(i int) error, kernels int, bytes int, patch bool) {
		var before func(exec *GraphExec, nodes []KernelNode, it int)
		if patch {
			before = func(exec *GraphExec, nodes []KernelNode, it int) {
				for i := range nodes {
					params := slices.Clone(nodes[i].Params)
					binary.LittleEndian.PutUint64(params[2], uint64(out)+uint64(4*(it%2)))
					check(b, exec.SetKernelParams(&nodes[i], params))
				}
			}
		}
		sec := replayGraph(b, s, kernels, launch, before)
		b.ReportMetric(float64(kernels*bytes)/sec/1e9, "GB/s")
	}
	b.Run("one-kernel", func(b *testing.B) {
		f := fn(b, m, "streamall")
		args := NewArgs()
		timeGraph(b, func(int) error {
			return s.Launch(f, Dim3{X: uint32(8 * d.SMCount)}, Dim3{X: 512}, 0, args.Reset().Ptr(base).I64(total/16).Ptr(out))
		}, 1, total, false)
	})
	for _, size := range []int{2 << 20, 8 << 20, 32 << 20} {
		kernels := total / size
		nvec := size / 16
		for _, vpt := range []int{4, 8, 16} {
			f := fn(b, m, fmt.Sprintf("stream%d", vpt))
			grid := Dim3{X: blocks(nvec, 256*vpt)}
			for _, mode := range []string{"plain", "dependent", "dependent-early", "dependent-early-patched"} {
				b.Run(fmt.Sprintf("size=%dMB/vpt=%d/%s", size>>20, vpt, mode), func(b *testing.B) {
					if mode != "plain" && !d.CanLaunchDependent() {
						b.Skip("no programmatic dependent launch")
					}
					args := NewArgs()
					timeGraph(b, func(i int) error {
						pre := int32(0)
						if strings.HasPrefix(mode, "dependent-early") {
							pre = 1
						}
						args.Reset().Ptr(base + DevicePtr(i*size)).I32(int32(nvec)).Ptr(out).I32(pre)
						if mode == "plain" {
							return s.Launch(f, grid, Dim3{X: 256}, 0, args)
						}
						return s.LaunchDependent(f, grid, Dim3{X: 256}, 0, args)
					}, kernels, size, strings.HasSuffix(mode, "patched"))
				})
			}
		}
	}
}
