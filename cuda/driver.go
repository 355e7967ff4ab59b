package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// drv holds the driver's function pointers, resolved once.
var drv struct {
	once    sync.Once
	err     error
	path    string
	version int // cuDriverGetVersion, e.g. 12040
	count   int

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                  uintptr
	cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDeviceGetAttribute          uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuCtxSynchronize uintptr
	cuMemGetInfo, cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost            uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                       uintptr
	cuMemsetD8Async, cuMemsetD32Async                                             uintptr
	cuStreamCreate, cuStreamSynchronize, cuStreamDestroy                          uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime          uintptr
	cuEventDestroy                                                                uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction                         uintptr
	cuFuncGetAttribute, cuFuncSetAttribute, cuLaunchKernel                        uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiateWithFlags         uintptr
	cuGraphLaunch, cuGraphExecUpdate, cuGraphDestroy, cuGraphExecDestroy          uintptr
	cuGraphGetNodes, cuGraphNodeGetType, cuGraphKernelNodeGetParams               uintptr
	cuGraphExecKernelNodeSetParams, cuFuncGetParamInfo                            uintptr
	cuLaunchKernelEx                                                              uintptr
}

func driverSymbols() []symbol {
	d := &drv
	return []symbol{
		{"cuInit", &d.cuInit, false},
		{"cuDriverGetVersion", &d.cuDriverGetVersion, false},
		{"cuGetErrorName", &d.cuGetErrorName, true},
		{"cuGetErrorString", &d.cuGetErrorString, true},
		{"cuDeviceGet", &d.cuDeviceGet, false},
		{"cuDeviceGetCount", &d.cuDeviceGetCount, false},
		{"cuDeviceGetName", &d.cuDeviceGetName, false},
		{"cuDeviceGetAttribute", &d.cuDeviceGetAttribute, false},
		{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem, false},
		{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain, false},
		{"cuCtxSetCurrent", &d.cuCtxSetCurrent, false},
		{"cuCtxSynchronize", &d.cuCtxSynchronize, false},
		{"cuMemGetInfo_v2", &d.cuMemGetInfo, false},
		{"cuMemAlloc_v2", &d.cuMemAlloc, false},
		{"cuMemFree_v2", &d.cuMemFree, false},
		{"cuMemAllocHost_v2", &d.cuMemAllocHost, false},
		{"cuMemFreeHost", &d.cuMemFreeHost, false},
		{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync, false},
		{"cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync, false},
		{"cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync, false},
		{"cuMemsetD8Async", &d.cuMemsetD8Async, false},
		{"cuMemsetD32Async", &d.cuMemsetD32Async, false},
		{"cuStreamCreate", &d.cuStreamCreate, false},
		{"cuStreamSynchronize", &d.cuStreamSynchronize, false},
		{"cuStreamDestroy_v2", &d.cuStreamDestroy, false},
		{"cuEventCreate", &d.cuEventCreate, false},
		{"cuEventRecord", &d.cuEventRecord, false},
		{"cuEventSynchronize", &d.cuEventSynchronize, false},
		{"cuEventElapsedTime", &d.cuEventElapsedTime, false},
		{"cuEventDestroy_v2", &d.cuEventDestroy, false},
		{"cuModuleLoadData", &d.cuModuleLoadData, false},
		{"cuModuleUnload", &d.cuModuleUnload, false},
		{"cuModuleGetFunction", &d.cuModuleGetFunction, false},
		{"cuFuncGetAttribute", &d.cuFuncGetAttribute, false},
		{"cuFuncSetAttribute", &d.cuFuncSetAttribute, true},
		{"cuLaunchKernel", &d.cuLaunchKernel, false},
		// Graphs: optional, so that an older driver still runs everything else.
		{"cuStreamBeginCapture_v2", &d.cuStreamBeginCapture, true},
		{"cuStreamEndCapture", &d.cuStreamEndCapture, true},
		{"cuGraphInstantiateWithFlags", &d.cuGraphInstantiateWithFlags, true},
		{"cuGraphLaunch", &d.cuGraphLaunch, true},
		{"cuGraphExecUpdate_v2", &d.cuGraphExecUpdate, true},
		{"cuGraphDestroy", &d.cuGraphDestroy, true},
		{"cuGraphExecDestroy", &d.cuGraphExecDestroy, true},
		{"cuGraphGetNodes", &d.cuGraphGetNodes, true},
		{"cuGraphNodeGetType", &d.cuGraphNodeGetType, true},
		{"cuGraphKernelNodeGetParams_v2", &d.cuGraphKernelNodeGetParams, true},
		{"cuGraphExecKernelNodeSetParams_v2", &d.cuGraphExecKernelNodeSetParams, true},
		{"cuFuncGetParamInfo", &d.cuFuncGetParamInfo, true},
		// Programmatic dependent launch (LaunchDependent): optional.
		{"cuLaunchKernelEx", &d.cuLaunchKernelEx, true},
	}
}

// initDriver loads libcuda, resolves its symbols and calls cuInit(0), once.
func initDriver() error {
	drv.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				drv.err = fmt.Errorf("cuda: initializing the driver panicked: %v", r)
			}
		}()
		h, path, err := loadLibrary(driverSpec)
		if err != nil {
			drv.err = fmt.Errorf("cuda: CUDA driver library not found (is the NVIDIA driver installed?): %w", err)
			return
		}
		drv.path = path
		if err := loadSymbols(h, path, driverSymbols()); err != nil {
			drv.err = err
			return
		}
		var v int32
		purego.SyscallN(drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
		drv.version = int(v)
		if r, _, _ := purego.SyscallN(drv.cuInit, 0); cuResult(r) != 0 {
			drv.err = fmt.Errorf("cuda: driver %s loaded but cuInit failed: %w", path, driverError("cuInit", r))
			return
		}
		var n int32
		if r, _, _ := purego.SyscallN(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); cuResult(r) != 0 {
			drv.err = driverError("cuDeviceGetCount", r)
			return
		}
		drv.count = int(n)
	})
	return drv.err
}

// cuResult is the CUresult in the low 32 bits of a return register.
func cuResult(r uintptr) int { return int(int32(uint32(r))) }

// driverError turns a failing CUresult into an *Error, or nil for success.
func driverError(op string, r uintptr) error {
	code := cuResult(r)
	if code == 0 {
		return nil
	}
	e := &Error{Op: op, Code: code}
	if drv.cuGetErrorName != 0 {
		var p *byte
		if rr, _, _ := purego.SyscallN(drv.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(&p))); cuResult(rr) == 0 {
			e.Name = goString(p)
		}
	}
	if drv.cuGetErrorString != 0 {
		var p *byte
		if rr, _, _ := purego.SyscallN(drv.cuGetErrorString, uintptr(code), uintptr(unsafe.Pointer(&p))); cuResult(rr) == 0 {
			e.Msg = goString(p)
		}
	}
	if e.Name == "" {
		e.Name = driverErrorNames[code]
	}
	return e
}

// DriverVersion returns the version cuDriverGetVersion reports (for example
// 12040 for CUDA 12.4), or 0 when the driver cannot be loaded.
func DriverVersion() int {
	if initDriver() != nil {
		return 0
	}
	return drv.version
}

var avail struct {
	once sync.Once
	ok   bool
	err  error
}

// Available reports whether this process can run generated kernels on a GPU:
// the driver library loads, cuInit succeeds, there is at least one device and
// NVRTC (the runtime compiler) loads. When it cannot, the error says why. The
// result is computed once and cached. Available never panics.
func Available() (bool, error) {
	avail.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				avail.ok, avail.err = false, fmt.Errorf("cuda: checking availability panicked: %v", r)
			}
		}()
		if err := initDriver(); err != nil {
			avail.err = err
			return
		}
		if drv.count == 0 {
			avail.err = fmt.Errorf("cuda: driver %s (version %s) loaded but found no CUDA device", drv.path, versionString(drv.version))
			return
		}
		if err := initNVRTC(); err != nil {
			avail.err = fmt.Errorf("cuda: %d device(s) found but NVRTC is missing, so generated kernels cannot run on the GPU (%w)", drv.count, err)
			return
		}
		avail.ok = true
	})
	return avail.ok, avail.err
}

func versionString(v int) string {
	return strconv.Itoa(v/1000) + "." + strconv.Itoa(v%1000/10)
}

// DeviceCount returns the number of CUDA devices the driver reports, or 0 when
// the driver cannot be loaded or initialized. It does not need NVRTC
// (Available does).
func DeviceCount() int {
	if initDriver() != nil {
		return 0
	}
	return drv.count
}

// Device is one CUDA device and its primary context.
//
// Every method that talks to the driver first makes the device's primary
// context current on the calling OS thread (and keeps the goroutine on that
// thread for the duration of the call), so a Device, and the Streams, Events,
// Modules and Functions made from it, may be used from any goroutine on any
// thread.
type Device struct {
	Ordinal  int
	Name     string
	Major    int // compute capability
	Minor    int
	SMCount  int
	TotalMem uint64 // bytes

	MaxThreadsPerBlock        int
	MaxSharedMemPerBlock      int // bytes, without opt-in
	MaxSharedMemPerBlockOptin int // bytes, with SetMaxDynamicShared
	WarpSize                  int
	L2CacheSize               int // bytes
	MaxRegistersPerBlock      int

	paramLimit sync.Once
	paramBytes int // MaxKernelParamBytes

	dependent    sync.Once
	canDependent bool // CanLaunchDependent, past the driver and capability

	dev     int32     // CUdevice
	ctx     uintptr   // primary CUcontext, retained once
	ctxArgs []uintptr // {ctx}, read-only: the argument list of cuCtxSetCurrent

	blasMu  sync.Mutex
	blas    *BLAS
	blasErr error

	ltMu  sync.Mutex
	lt    *BLASLt
	ltErr error
}

var devices struct {
	mu sync.Mutex
	m  map[int]*Device
}

// Device attribute numbers (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock        = 1
	attrMaxSharedMemPerBlock      = 8
	attrWarpSize                  = 10
	attrMaxRegistersPerBlock      = 12
	attrMultiprocessorCount       = 16
	attrL2CacheSize               = 38
	attrComputeCapabilityMajor    = 75
	attrComputeCapabilityMinor    = 76
	attrMaxSharedMemPerBlockOptin = 97
)

// GetDevice returns device ordinal (0-based), with its properties read and its
// primary context retained. Devices are cached: every call with the same
// ordinal returns the same *Device.
func GetDevice(ordinal int) (*Device, error) {
	if err := initDriver(); err != nil {
		return nil, err
	}
	devices.mu.Lock()
	defer devices.mu.Unlock()
	if d := devices.m[ordinal]; d != nil {
		return d, nil
	}
	if ordinal < 0 || ordinal >= drv.count {
		return nil, fmt.Errorf("cuda: no device %d (%d found)", ordinal, drv.count)
	}
	d := &Device{Ordinal: ordinal}
	if r, _, _ := purego.SyscallN(drv.cuDeviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(ordinal)); cuResult(r) != 0 {
		return nil, driverError("cuDeviceGet", r)
	}
	name := make([]byte, 256)
	if r, _, _ := purego.SyscallN(drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev)); cuResult(r) != 0 {
		return nil, driverError("cuDeviceGetName", r)
	}
	d.Name = goString(&name[0])
	attrs := []struct {
		attr int
		dst  *int
	}{
		{attrComputeCapabilityMajor, &d.Major},
		{attrComputeCapabilityMinor, &d.Minor},
		{attrMultiprocessorCount, &d.SMCount},
		{attrMaxThreadsPerBlock, &d.MaxThreadsPerBlock},
		{attrMaxSharedMemPerBlock, &d.MaxSharedMemPerBlock},
		{attrMaxSharedMemPerBlockOptin, &d.MaxSharedMemPerBlockOptin},
		{attrWarpSize, &d.WarpSize},
		{attrL2CacheSize, &d.L2CacheSize},
		{attrMaxRegistersPerBlock, &d.MaxRegistersPerBlock},
	}
	for _, a := range attrs {
		var v int32
		if r, _, _ := purego.SyscallN(drv.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a.attr), uintptr(d.dev)); cuResult(r) != 0 {
			return nil, driverError("cuDeviceGetAttribute", r)
		}
		*a.dst = int(v)
	}
	var total uint64
	if r, _, _ := purego.SyscallN(drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev)); cuResult(r) != 0 {
		return nil, driverError("cuDeviceTotalMem_v2", r)
	}
	d.TotalMem = total
	if r, _, _ := purego.SyscallN(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); cuResult(r) != 0 {
		return nil, driverError("cuDevicePrimaryCtxRetain", r)
	}
	d.ctxArgs = []uintptr{d.ctx}
	if devices.m == nil {
		devices.m = map[int]*Device{}
	}
	devices.m[ordinal] = d
	return d, nil
}

// String returns "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)".
func (d *Device) String() string {
	return "cuda:" + strconv.Itoa(d.Ordinal) + " (" + d.Name + ", " + d.Arch() + ")"
}

// Arch returns the device's real architecture name, such as "sm_90".
func (d *Device) Arch() string {
	return "sm_" + strconv.Itoa(d.Major) + strconv.Itoa(d.Minor)
}

// MakeCurrent makes d's primary context current on the calling OS thread.
// The package's own methods do this themselves (pinning the goroutine to the
// thread for each call); MakeCurrent is for code that calls other CUDA
// libraries directly, which should hold runtime.LockOSThread around both.
func (d *Device) MakeCurrent() error {
	r, _, _ := purego.SyscallN(drv.cuCtxSetCurrent, d.ctxArgs...)
	return driverError("cuCtxSetCurrent", r)
}

// lock pins the goroutine to its OS thread and makes d's context current
// there. The caller must call runtime.UnlockOSThread when done (also when
// lock returns an error).
func (d *Device) lock() error {
	runtime.LockOSThread()
	r, _, _ := purego.SyscallN(drv.cuCtxSetCurrent, d.ctxArgs...)
	if cuResult(r) != 0 {
		return driverError("cuCtxSetCurrent", r)
	}
	return nil
}

// call runs the driver function fn with d's context current and converts its
// result. Like purego.SyscallN, its uintptr arguments may be pointers
// converted in the call expression.
//
// The arguments are copied into a pooled array handed to purego.SyscallN:
// passing them as a variadic list would allocate on every call. Unused
// trailing arguments are 0; the C calling convention ignores extra ones.
//
//go:uintptrescapes
func (d *Device) call(op string, fn, a1, a2, a3, a4 uintptr) error {
	if fn == 0 {
		return &Error{Op: op, Code: 500, Name: "CUDA_ERROR_NOT_FOUND", Msg: "the driver lacks " + op + " (driver too old?)"}
	}
	b := callPool.Get().(*callBuf)
	b.a[0], b.a[1], b.a[2], b.a[3] = a1, a2, a3, a4
	if err := d.lock(); err != nil {
		runtime.UnlockOSThread()
		callPool.Put(b)
		return err
	}
	r, _, _ := purego.SyscallN(fn, b.a[:4]...)
	runtime.UnlockOSThread()
	callPool.Put(b)
	if cuResult(r) != 0 {
		return driverError(op, r)
	}
	return nil
}

// callBuf holds the arguments of one foreign call.
type callBuf struct{ a [24]uintptr }

var callPool = sync.Pool{New: func() any { return new(callBuf) }}

// Synchronize waits until all work on the device's primary context is done
// (cuCtxSynchronize).
func (d *Device) Synchronize() error {
	return d.call("cuCtxSynchronize", drv.cuCtxSynchronize, 0, 0, 0, 0)
}

// MemInfo returns the free and total device memory in bytes (cuMemGetInfo_v2).
func (d *Device) MemInfo() (free, total uint64, err error) {
	var f, t uint64
	err = d.call("cuMemGetInfo_v2", drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)), 0, 0)
	return f, t, err
}

// DevicePtr is a device memory address (CUdeviceptr).
type DevicePtr uint64

// Malloc allocates n bytes of device memory (cuMemAlloc_v2). When the device
// is out of memory the error is an *Error with Code == ErrorOutOfMemory (see
// IsOutOfMemory). Memory is aligned to at least 256 bytes.
func (d *Device) Malloc(n int) (DevicePtr, error) {
	if n < 0 {
		return 0, fmt.Errorf("cuda: Malloc: negative size %d", n)
	}
	var p DevicePtr
	err := d.call("cuMemAlloc_v2", drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n), 0, 0)
	return p, err
}

// Free frees device memory from Malloc (cuMemFree_v2). Freeing 0 does nothing.
func (d *Device) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return d.call("cuMemFree_v2", drv.cuMemFree, uintptr(p), 0, 0, 0)
}

// MallocHost allocates n bytes of page-locked host memory
// (cuMemAllocHost_v2), which copies can use asynchronously. The memory is
// not Go memory: free it with FreeHost.
func (d *Device) MallocHost(n int) (unsafe.Pointer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: MallocHost: negative size %d", n)
	}
	var p unsafe.Pointer
	err := d.call("cuMemAllocHost_v2", drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n), 0, 0)
	return p, err
}

// FreeHost frees memory from MallocHost (cuMemFreeHost).
func (d *Device) FreeHost(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	return d.call("cuMemFreeHost", drv.cuMemFreeHost, uintptr(p), 0, 0, 0)
}

// Stream is a CUDA stream bound to a device. A nil *Stream, and the stream of
// (*Device).DefaultStream, is the legacy default stream (handle 0) of device
// 0 or of that device; streams from NewStream are non-blocking, so they do
// not synchronize with the legacy default stream.
type Stream struct {
	dev *Device
	h   uintptr // CUstream

	// While one thread captures s (BeginCapture), gate keeps every other
	// thread's work off s, so the graph holds the capturer's work only.
	gate   sync.RWMutex
	captor atomic.Int64 // the capturing OS thread's id, or 0
}

// enter admits a call that queues work on s or waits for it: at once on
// the capturing thread, else once no capture is running (it reports
// whether exit must release the gate).
func (s *Stream) enter() bool {
	if s == nil {
		return false
	}
	if c := s.captor.Load(); c != 0 && c == threadID() {
		return false
	}
	s.gate.RLock()
	return true
}

func (s *Stream) exit(held bool) {
	if held {
		s.gate.RUnlock()
	}
}

// CU_STREAM_NON_BLOCKING
const streamNonBlocking = 1

// NewStream creates a non-blocking stream (cuStreamCreate with
// CU_STREAM_NON_BLOCKING).
func (d *Device) NewStream() (*Stream, error) {
	s := &Stream{dev: d}
	if err := d.call("cuStreamCreate", drv.cuStreamCreate, uintptr(unsafe.Pointer(&s.h)), streamNonBlocking, 0, 0); err != nil {
		return nil, err
	}
	return s, nil
}

// DefaultStream returns d's legacy default stream (handle 0). It needs no
// Destroy.
func (d *Device) DefaultStream() *Stream { return &Stream{dev: d} }

var errNoDevice = errors.New("cuda: no CUDA device available")

var device0 atomic.Pointer[Device]

// device returns s's device; for a nil stream, device 0.
func (s *Stream) device() (*Device, error) {
	if s != nil && s.dev != nil {
		return s.dev, nil
	}
	if d := device0.Load(); d != nil {
		return d, nil
	}
	d, err := GetDevice(0)
	if err != nil {
		if initDriver() == nil && drv.count == 0 {
			return nil, errNoDevice
		}
		return nil, err
	}
	device0.Store(d)
	return d, nil
}

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// Device returns the device the stream belongs to (device 0 for nil).
func (s *Stream) Device() *Device {
	d, _ := s.device()
	return d
}

// Handle returns the raw CUstream, for handing to other CUDA libraries.
func (s *Stream) Handle() uintptr { return s.handle() }

//go:uintptrescapes
func (s *Stream) call(op string, fn, a1, a2, a3, a4 uintptr) error {
	d, err := s.device()
	if err != nil {
		return err
	}
	defer s.exit(s.enter())
	return d.call(op, fn, a1, a2, a3, a4)
}

// Synchronize waits for all work queued on s (cuStreamSynchronize).
func (s *Stream) Synchronize() error {
	return s.call("cuStreamSynchronize", drv.cuStreamSynchronize, s.handle(), 0, 0, 0)
}

// Destroy destroys the stream (cuStreamDestroy_v2). Destroying nil or a
// default stream does nothing.
func (s *Stream) Destroy() error {
	if s == nil || s.h == 0 {
		return nil
	}
	err := s.call("cuStreamDestroy_v2", drv.cuStreamDestroy, s.h, 0, 0, 0)
	s.h = 0
	return err
}

// CopyHtoD queues a copy of n bytes from host memory src to device memory dst
// on s (cuMemcpyHtoDAsync_v2). From pageable (Go) memory the driver has taken
// its copy of src when the call returns; from MallocHost memory src must stay
// untouched until the stream reaches the copy.
func (s *Stream) CopyHtoD(dst DevicePtr, src unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	return s.call("cuMemcpyHtoDAsync_v2", drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.handle())
}

// CopyDtoH queues a copy of n bytes from device memory src to host memory dst
// on s (cuMemcpyDtoHAsync_v2). Into pageable (Go) memory the copy has
// completed when the call returns; into MallocHost memory it is complete only
// once the stream is synchronized.
func (s *Stream) CopyDtoH(dst unsafe.Pointer, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return s.call("cuMemcpyDtoHAsync_v2", drv.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), s.handle())
}

// CopyDtoD queues a copy of n bytes between device buffers on s
// (cuMemcpyDtoDAsync_v2).
func (s *Stream) CopyDtoD(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return s.call("cuMemcpyDtoDAsync_v2", drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.handle())
}

// Memset8 queues setting n bytes at dst to v (cuMemsetD8Async).
func (s *Stream) Memset8(dst DevicePtr, v uint8, n int) error {
	if n == 0 {
		return nil
	}
	return s.call("cuMemsetD8Async", drv.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(n), s.handle())
}

// Memset32 queues setting n 32-bit words (4·n bytes) at dst to v
// (cuMemsetD32Async); dst must be 4-byte aligned.
func (s *Stream) Memset32(dst DevicePtr, v uint32, n int) error {
	if n == 0 {
		return nil
	}
	return s.call("cuMemsetD32Async", drv.cuMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), s.handle())
}

// Event is a CUDA event with timing enabled.
type Event struct {
	dev *Device
	h   uintptr // CUevent
}

// NewEvent creates an event with timing enabled (cuEventCreate, CU_EVENT_DEFAULT).
func (d *Device) NewEvent() (*Event, error) {
	e := &Event{dev: d}
	if err := d.call("cuEventCreate", drv.cuEventCreate, uintptr(unsafe.Pointer(&e.h)), 0, 0, 0); err != nil {
		return nil, err
	}
	return e, nil
}

// Record records the event on s (cuEventRecord); s may be nil for the legacy
// default stream.
func (e *Event) Record(s *Stream) error {
	defer s.exit(s.enter())
	return e.dev.call("cuEventRecord", drv.cuEventRecord, e.h, s.handle(), 0, 0)
}

// Synchronize waits until the event has completed (cuEventSynchronize).
func (e *Event) Synchronize() error {
	return e.dev.call("cuEventSynchronize", drv.cuEventSynchronize, e.h, 0, 0, 0)
}

// Destroy destroys the event (cuEventDestroy_v2).
func (e *Event) Destroy() error {
	if e == nil || e.h == 0 {
		return nil
	}
	err := e.dev.call("cuEventDestroy_v2", drv.cuEventDestroy, e.h, 0, 0, 0)
	e.h = 0
	return err
}

// ElapsedMs returns the time in milliseconds between two recorded, completed
// events (cuEventElapsedTime); resolution is about half a microsecond.
func ElapsedMs(start, end *Event) (float32, error) {
	var ms float32
	err := start.dev.call("cuEventElapsedTime", drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, end.h, 0)
	return ms, err
}

// Module is a loaded CUDA module (CUmodule).
type Module struct {
	dev *Device
	h   uintptr
}

// LoadModule loads a CUBIN or PTX image (cuModuleLoadData). PTX is passed
// NUL-terminated (a NUL is appended when missing) and JIT-compiled by the
// driver.
func (d *Device) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.New("cuda: LoadModule: empty image")
	}
	img := image
	isELF := len(image) >= 4 && string(image[:4]) == "\x7fELF"
	if !isELF && image[len(image)-1] != 0 {
		img = make([]byte, len(image)+1)
		copy(img, image)
	}
	m := &Module{dev: d}
	if err := d.call("cuModuleLoadData", drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&img[0])), 0, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// Unload unloads the module (cuModuleUnload); its Functions become invalid.
func (m *Module) Unload() error {
	if m == nil || m.h == 0 {
		return nil
	}
	err := m.dev.call("cuModuleUnload", drv.cuModuleUnload, m.h, 0, 0, 0)
	m.h = 0
	return err
}

// Function is a kernel in a loaded module (CUfunction).
type Function struct {
	mod  *Module
	h    uintptr
	Name string
}

// Handle is the function's CUfunction.
func (f *Function) Handle() uintptr { return f.h }

// Function looks up the kernel name, which must be its unmangled (extern "C")
// name (cuModuleGetFunction).
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{mod: m, Name: name}
	cname := cString(name)
	if err := m.dev.call("cuModuleGetFunction", drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0])), 0); err != nil {
		return nil, fmt.Errorf("cuda: kernel %q: %w", name, err)
	}
	return f, nil
}

// CUfunction_attribute numbers.
const (
	funcAttrMaxThreadsPerBlock   = 0
	funcAttrSharedSizeBytes      = 1
	funcAttrNumRegs              = 4
	funcAttrMaxDynamicSharedSize = 8
)

func (f *Function) attr(a int) (int, error) {
	var v int32
	err := f.mod.dev.call("cuFuncGetAttribute", drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), f.h, 0)
	return int(v), err
}

// Attributes returns the kernel's registers per thread, static shared memory
// in bytes, and the most threads per block it can be launched with
// (cuFuncGetAttribute).
func (f *Function) Attributes() (regs, sharedStatic, maxThreads int, err error) {
	if regs, err = f.attr(funcAttrNumRegs); err != nil {
		return
	}
	if sharedStatic, err = f.attr(funcAttrSharedSizeBytes); err != nil {
		return
	}
	maxThreads, err = f.attr(funcAttrMaxThreadsPerBlock)
	return
}

// SetMaxDynamicShared allows launches of f with up to bytes of dynamic shared
// memory (cuFuncSetAttribute with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
// needed above 48 KiB, up to the device's MaxSharedMemPerBlockOptin minus
// the kernel's static shared memory.
func (f *Function) SetMaxDynamicShared(bytes int) error {
	return f.mod.dev.call("cuFuncSetAttribute", drv.cuFuncSetAttribute, f.h, funcAttrMaxDynamicSharedSize, uintptr(bytes), 0)
}

// Dim3 is a grid or block shape. Zero components are treated as 1.
type Dim3 struct{ X, Y, Z uint32 }

func one(v uint32) uintptr {
	if v == 0 {
		return 1
	}
	return uintptr(v)
}

// MaxKernelParamBytes is the most parameter memory one launch of a kernel
// compiled here may take on d: 32,764 bytes where the driver and NVRTC are
// CUDA 12.1 or later and d is sm_70 or later, else the 4 KB every device
// takes.
func (d *Device) MaxKernelParamBytes() int {
	d.paramLimit.Do(func() {
		d.paramBytes = 4096
		major, minor, err := NVRTCVersion()
		if err == nil && (major > 12 || major == 12 && minor >= 1) && DriverVersion() >= 12010 && d.Major >= 7 {
			d.paramBytes = 32764
		}
	})
	return d.paramBytes
}

// launches counts Launch and LaunchDependent calls.
var launches atomic.Int64

// Launches returns how many kernels this process has launched through
// Stream.Launch and Stream.LaunchDependent (library kernels such as
// cuBLAS's not included): tests count them to check that a step is as
// many kernels as it should be.
func Launches() int64 { return launches.Load() }

// dependentLaunches counts LaunchDependent calls that launched as
// programmatic dependents.
var dependentLaunches atomic.Int64

// DependentLaunches returns how many kernels this process has launched
// as programmatic dependents of the kernel ahead (LaunchDependent on a
// device that CanLaunchDependent).
func DependentLaunches() int64 { return dependentLaunches.Load() }

// Launch queues f on s with the given grid, block, dynamic shared memory in
// bytes and parameters (cuLaunchKernel with kernelParams). args may be nil
// for a kernel without parameters. The parameters are copied by the driver,
// so args may be reset and reused as soon as Launch returns. Launch does not
// allocate.
func (s *Stream) Launch(f *Function, grid, block Dim3, sharedMem int, args *Args) error {
	launches.Add(1)
	d := f.mod.dev
	b := callPool.Get().(*callBuf)
	b.a = [24]uintptr{f.h,
		one(grid.X), one(grid.Y), one(grid.Z),
		one(block.X), one(block.Y), one(block.Z),
		uintptr(sharedMem), s.handle(),
		// kernelParams points into args's heap memory, which does not move
		// and is kept alive below.
		uintptr(unsafe.Pointer(args.params())), 0}
	held := s.enter()
	if err := d.lock(); err != nil {
		runtime.UnlockOSThread()
		s.exit(held)
		callPool.Put(b)
		return err
	}
	r, _, _ := purego.SyscallN(drv.cuLaunchKernel, b.a[:11]...)
	runtime.UnlockOSThread()
	s.exit(held)
	callPool.Put(b)
	runtime.KeepAlive(args)
	if cuResult(r) != 0 {
		return fmt.Errorf("cuda: launching %s: %w", f.Name, driverError("cuLaunchKernel", r))
	}
	return nil
}

// launchConfig is CUlaunchConfig with room for one attribute
// (CUlaunchAttribute: a 4-byte id, padding to 8, a 64-byte value union).
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	sharedMem              uint32
	_                      uint32
	stream                 uintptr
	attrs                  *launchAttribute
	numAttrs               uint32
	_                      uint32
}

type launchAttribute struct {
	id    uint32
	_     uint32
	value [64]byte
}

// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
const launchAttrProgrammaticStreamSerialization = 6

// CanLaunchDependent reports whether LaunchDependent overlaps kernels on
// d: the driver has cuLaunchKernelEx, d is compute capability 9.0 or
// later, and NVRTC compiles its kernels for sm_90 or later, so that their
// griddepcontrol instructions (guarded by __CUDA_ARCH__) are compiled in:
// a dependent kernel without its wait would read too early.
func (d *Device) CanLaunchDependent() bool {
	if drv.cuLaunchKernelEx == 0 || d.Major < 9 {
		return false
	}
	d.dependent.Do(func() {
		arch, err := d.CompileArch()
		d.canDependent = err == nil && arch >= 90
	})
	return d.canDependent
}

var launchConfigPool = sync.Pool{New: func() any { return &launchConfig{attrs: new(launchAttribute)} }}

// LaunchDependent is Launch for a kernel that may start before the
// kernel ahead of it on s has finished (programmatic dependent launch,
// sm_90): its blocks are scheduled once every block of the kernel ahead
// has executed griddepcontrol.launch_dependents (or exited), and must
// execute griddepcontrol.wait before they read anything the kernel ahead
// writes. The work before the wait overlaps the kernel ahead: a GEMM loads
// its weights there. Launches captured into a graph keep the
// relationship as a programmatic edge. Without CanLaunchDependent it is
// Launch (the wait is then a no-op).
func (s *Stream) LaunchDependent(f *Function, grid, block Dim3, sharedMem int, args *Args) error {
	d := f.mod.dev
	if !d.CanLaunchDependent() {
		return s.Launch(f, grid, block, sharedMem, args)
	}
	launches.Add(1)
	dependentLaunches.Add(1)
	c := launchConfigPool.Get().(*launchConfig)
	attrs := c.attrs
	*c = launchConfig{
		gridX: uint32(one(grid.X)), gridY: uint32(one(grid.Y)), gridZ: uint32(one(grid.Z)),
		blockX: uint32(one(block.X)), blockY: uint32(one(block.Y)), blockZ: uint32(one(block.Z)),
		sharedMem: uint32(sharedMem), stream: s.handle(), attrs: attrs, numAttrs: 1,
	}
	*attrs = launchAttribute{id: launchAttrProgrammaticStreamSerialization}
	attrs.value[0] = 1 // programmaticStreamSerializationAllowed
	held := s.enter()
	err := d.call("cuLaunchKernelEx", drv.cuLaunchKernelEx, uintptr(unsafe.Pointer(c)), f.h, uintptr(unsafe.Pointer(args.params())), 0)
	s.exit(held)
	launchConfigPool.Put(c)
	runtime.KeepAlive(args)
	if err != nil {
		return fmt.Errorf("cuda: launching %s: %w", f.Name, err)
	}
	return nil
}

// Args packs kernel parameters for Launch. Values are stored in an internal
// 8-byte aligned buffer, and Launch passes the driver an array of pointers to
// each value. Reuse one Args per goroutine (Reset, then add the values) so
// that launching does not allocate; an Args must not be used by two
// goroutines at once.
type Args struct {
	buf  []uint64         // the values, 8-byte aligned
	n    int              // bytes of buf used
	offs []int            // byte offset of each parameter in buf
	ptrs []unsafe.Pointer // &buf[offs[i]], rebuilt by params
}

// NewArgs returns an empty Args.
func NewArgs() *Args { return &Args{} }

// Reset empties a for reuse, keeping its memory.
func (a *Args) Reset() *Args {
	a.n = 0
	a.offs = a.offs[:0]
	return a
}

// Len returns the number of parameters added.
func (a *Args) Len() int { return len(a.offs) }

// slot reserves size bytes aligned to align and returns a pointer to them.
func (a *Args) slot(size, align int) unsafe.Pointer {
	if align < 1 {
		align = 1
	}
	off := (a.n + align - 1) / align * align
	end := off + size
	if need := (end + 7) / 8; need > len(a.buf) {
		c := 2 * len(a.buf)
		if c < need {
			c = need
		}
		if c < 8 {
			c = 8
		}
		nb := make([]uint64, c)
		copy(nb, a.buf)
		a.buf = nb
	}
	a.n = end
	a.offs = append(a.offs, off)
	return unsafe.Add(unsafe.Pointer(&a.buf[0]), off)
}

// Ptr adds a device pointer parameter (a T* in the kernel).
func (a *Args) Ptr(p DevicePtr) *Args {
	*(*uint64)(a.slot(8, 8)) = uint64(p)
	return a
}

// I32 adds an int (int32_t) parameter.
func (a *Args) I32(v int32) *Args {
	*(*int32)(a.slot(4, 4)) = v
	return a
}

// U32 adds an unsigned int (uint32_t) parameter.
func (a *Args) U32(v uint32) *Args {
	*(*uint32)(a.slot(4, 4)) = v
	return a
}

// I64 adds a long long (int64_t) parameter.
func (a *Args) I64(v int64) *Args {
	*(*int64)(a.slot(8, 8)) = v
	return a
}

// F32 adds a float parameter.
func (a *Args) F32(v float32) *Args {
	*(*float32)(a.slot(4, 4)) = v
	return a
}

// F64 adds a double parameter.
func (a *Args) F64(v float64) *Args {
	*(*float64)(a.slot(8, 8)) = v
	return a
}

// Bytes adds a by-value parameter of len(b) bytes, such as a struct, laid out
// as in the kernel and aligned to align bytes.
func (a *Args) Bytes(b []byte, align int) *Args {
	size := len(b)
	if size == 0 {
		size = 1
	}
	p := a.slot(size, align)
	copy(unsafe.Slice((*byte)(p), size), b)
	return a
}

// params builds the kernelParams array and returns its address, or nil when
// there are no parameters (also for a nil a).
func (a *Args) params() *unsafe.Pointer {
	if a == nil || len(a.offs) == 0 {
		return nil
	}
	if cap(a.ptrs) < len(a.offs) {
		a.ptrs = make([]unsafe.Pointer, len(a.offs), cap(a.offs))
	}
	a.ptrs = a.ptrs[:len(a.offs)]
	base := unsafe.Pointer(&a.buf[0])
	for i, off := range a.offs {
		a.ptrs[i] = unsafe.Add(base, off)
	}
	return &a.ptrs[0]
}

// CU_STREAM_CAPTURE_MODE_RELAXED: the capturing thread may make calls
// such as cuMemAlloc that are unsafe in the stricter modes; other threads
// are kept off the stream by its gate instead.
const captureModeRelaxed = 2

// BeginCapture starts capturing the work queued on s into a graph
// (cuStreamBeginCapture_v2, relaxed mode). The calling goroutine is locked
// to its OS thread until EndCapture, which it must call; meanwhile calls
// from other threads that queue work on s or wait for it block, so the
// graph holds this goroutine's work only. s must be a stream from
// NewStream, not the legacy default stream.
func (s *Stream) BeginCapture() error {
	if s.handle() == 0 {
		return errors.New("cuda: BeginCapture: the legacy default stream cannot be captured")
	}
	tid := threadIDLocked()
	if tid == 0 {
		return errors.New("cuda: BeginCapture: capture needs thread ids, which this platform does not give")
	}
	s.gate.Lock()
	s.captor.Store(tid)
	if err := s.call("cuStreamBeginCapture_v2", drv.cuStreamBeginCapture, s.h, captureModeRelaxed, 0, 0); err != nil {
		s.release()
		return err
	}
	return nil
}

// CapturingHere reports whether the calling goroutine is capturing s
// (between its BeginCapture and EndCapture).
func (s *Stream) CapturingHere() bool {
	c := s.captor.Load()
	return c != 0 && c == threadID()
}

// release ends BeginCapture's hold on s and the calling goroutine.
func (s *Stream) release() {
	s.captor.Store(0)
	s.gate.Unlock()
	runtime.UnlockOSThread()
}

// EndCapture ends capturing on s and returns the captured graph
// (cuStreamEndCapture). It fails when the capture was invalidated, for
// example by waiting for the stream while capturing.
func (s *Stream) EndCapture() (*Graph, error) {
	if s.captor.Load() != threadID() {
		return nil, errors.New("cuda: EndCapture: not capturing on this goroutine")
	}
	defer s.release()
	g := &Graph{dev: s.Device()}
	if err := s.call("cuStreamEndCapture", drv.cuStreamEndCapture, s.handle(), uintptr(unsafe.Pointer(&g.h)), 0, 0); err != nil {
		return nil, err
	}
	return g, nil
}

// Graph is a captured CUDA graph (CUgraph).
type Graph struct {
	dev *Device
	h   uintptr
}

// Instantiate makes an executable graph of g (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate() (*GraphExec, error) {
	e := &GraphExec{dev: g.dev}
	if err := g.dev.call("cuGraphInstantiateWithFlags", drv.cuGraphInstantiateWithFlags, uintptr(unsafe.Pointer(&e.h)), g.h, 0, 0); err != nil {
		return nil, err
	}
	return e, nil
}

// Destroy destroys the graph (cuGraphDestroy); executable graphs made from it
// stay valid.
func (g *Graph) Destroy() error {
	if g == nil || g.h == 0 {
		return nil
	}
	err := g.dev.call("cuGraphDestroy", drv.cuGraphDestroy, g.h, 0, 0, 0)
	g.h = 0
	return err
}

// GraphExec is an executable graph (CUgraphExec).
type GraphExec struct {
	dev *Device
	h   uintptr
}

// Launch queues the graph on s (cuGraphLaunch).
func (e *GraphExec) Launch(s *Stream) error {
	defer s.exit(s.enter())
	return e.dev.call("cuGraphLaunch", drv.cuGraphLaunch, e.h, s.handle(), 0, 0)
}

// graphExecUpdateResults names CUgraphExecUpdateResult values.
var graphExecUpdateResults = []string{
	"CU_GRAPH_EXEC_UPDATE_SUCCESS",
	"CU_GRAPH_EXEC_UPDATE_ERROR",
	"CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED",
	"CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE",
	"CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED",
}

// Update replaces the parameters of e's nodes with those of g, which must have
// the same topology (same kernels in the same order, as from capturing the
// same code with other arguments) (cuGraphExecUpdate_v2). When the update is
// refused the error says why, and e should be replaced by g.Instantiate().
func (e *GraphExec) Update(g *Graph) error {
	// CUgraphExecUpdateResultInfo: {CUgraphExecUpdateResult result;
	// CUgraphNode errorNode; CUgraphNode errorFromNode}.
	var info struct {
		result        int32
		_             int32
		errorNode     uintptr
		errorFromNode uintptr
	}
	err := e.dev.call("cuGraphExecUpdate_v2", drv.cuGraphExecUpdate, e.h, g.h, uintptr(unsafe.Pointer(&info)), 0)
	var ce *Error
	if errors.As(err, &ce) && info.result != 0 {
		r := "result " + strconv.Itoa(int(info.result))
		if int(info.result) < len(graphExecUpdateResults) {
			r = graphExecUpdateResults[info.result]
		}
		ce.Msg += "; " + r
	}
	return err
}

// Destroy destroys the executable graph (cuGraphExecDestroy).
func (e *GraphExec) Destroy() error {
	if e == nil || e.h == 0 {
		return nil
	}
	err := e.dev.call("cuGraphExecDestroy", drv.cuGraphExecDestroy, e.h, 0, 0, 0)
	e.h = 0
	return err
}
