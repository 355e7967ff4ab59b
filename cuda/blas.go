package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// blasLib holds cuBLAS's function pointers, resolved once.
var blasLib struct {
	once sync.Once
	err  error
	path string

	create, destroy, setStream, setMathMode, gemmStridedBatchedEx uintptr
}

func initBLAS() error {
	blasLib.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				blasLib.err = fmt.Errorf("cuda: loading cuBLAS panicked: %v", r)
			}
		}()
		h, path, err := loadLibrary(cublasSpec)
		if err != nil {
			blasLib.err = fmt.Errorf("cuda: cuBLAS not found: %w", err)
			return
		}
		blasLib.path = path
		blasLib.err = loadSymbols(h, path, []symbol{
			{"cublasCreate_v2", &blasLib.create, false},
			{"cublasDestroy_v2", &blasLib.destroy, false},
			{"cublasSetStream_v2", &blasLib.setStream, false},
			{"cublasSetMathMode", &blasLib.setMathMode, false},
			{"cublasGemmStridedBatchedEx", &blasLib.gemmStridedBatchedEx, false},
		})
	})
	return blasLib.err
}

// DataType is the element type of a cuBLAS operand (cudaDataType).
type DataType int

// Element types for GemmStridedBatched.
const (
	R32F  DataType = 0  // CUDA_R_32F, float
	R64F  DataType = 1  // CUDA_R_64F, double
	R16F  DataType = 2  // CUDA_R_16F, half
	R16BF DataType = 14 // CUDA_R_16BF, bfloat16
)

func (t DataType) String() string {
	switch t {
	case R32F:
		return "R32F"
	case R64F:
		return "R64F"
	case R16F:
		return "R16F"
	case R16BF:
		return "R16BF"
	}
	return fmt.Sprintf("DataType(%d)", int(t))
}

// cublasComputeType_t, cublasMath_t, cublasGemmAlgo_t and cublasOperation_t values.
const (
	computeType32F         = 68 // CUBLAS_COMPUTE_32F
	computeType32FPedantic = 69 // CUBLAS_COMPUTE_32F_PEDANTIC
	computeType64F         = 70 // CUBLAS_COMPUTE_64F
	computeType32FFastTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32

	mathDefault = 0           // CUBLAS_DEFAULT_MATH
	mathTF32    = 3           // CUBLAS_TF32_TENSOR_OP_MATH
	gemmDefault = ^uintptr(0) // CUBLAS_GEMM_DEFAULT (-1)
	opN, opT    = 0, 1        // CUBLAS_OP_N, CUBLAS_OP_T
)

// BLAS is a cuBLAS handle for one device, safe for concurrent use: calls are
// serialized by a mutex (cublasSetStream, then the operation).
type BLAS struct {
	dev    *Device
	mu     sync.Mutex
	h      uintptr // cublasHandle_t
	tf32   bool
	math   uintptr // the math mode last set on h
	stream uintptr // the stream last set on h (0 at creation)

	// alpha and beta live here, on the heap, so that passing their
	// addresses does not allocate.
	alpha32, beta32 float32
	alpha64, beta64 float64
}

// BLAS returns d's cuBLAS handle, creating it on first use (cublasCreate_v2).
func (d *Device) BLAS() (*BLAS, error) {
	d.blasMu.Lock()
	defer d.blasMu.Unlock()
	if d.blas != nil || d.blasErr != nil {
		return d.blas, d.blasErr
	}
	if err := initBLAS(); err != nil {
		d.blasErr = err
		return nil, err
	}
	b := &BLAS{dev: d, alpha32: 1, alpha64: 1}
	if err := d.lock(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	r, _, _ := purego.SyscallN(blasLib.create, uintptr(unsafe.Pointer(&b.h)))
	if r == 0 {
		r, _, _ = purego.SyscallN(blasLib.setMathMode, b.h, mathDefault)
	}
	runtime.UnlockOSThread()
	if code := int(int32(uint32(r))); code != 0 {
		d.blasErr = cublasError("cublasCreate_v2", code)
		return nil, d.blasErr
	}
	d.blas = b
	return b, nil
}

// AllowTF32 lets float32 GEMMs use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32,
// CUBLAS_TF32_TENSOR_OP_MATH): faster, with about 10 bits of mantissa in the
// products. Off by default: float32 GEMMs use CUBLAS_COMPUTE_32F_PEDANTIC.
func (b *BLAS) AllowTF32(on bool) {
	b.mu.Lock()
	b.tf32 = on
	b.mu.Unlock()
}

// TF32Allowed reports the AllowTF32 setting.
func (b *BLAS) TF32Allowed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tf32
}

// GemmStridedBatched computes, for i in [0, batch), in column-major terms as
// cuBLAS does,
//
//	C_i = op(A_i)·op(B_i),  X_i = X + i·strideX (strides in elements, 0 allowed)
//
// where op(A) is m×k (A itself k×m when transA), op(B) is k×n and C is m×n,
// with leading dimensions lda, ldb, ldc (cublasGemmStridedBatchedEx, alpha 1,
// beta 0). All operands have type dtype. The computation is in float32
// (pedantic, or TF32 when allowed) for R32F, float64 for R64F, and float32
// accumulation for R16F and R16BF. A row-major product C = A·B is the
// column-major Cᵀ = Bᵀ·Aᵀ: swap the operands and m with n.
func (b *BLAS) GemmStridedBatched(s *Stream, transA, transB bool, m, n, k int,
	A DevicePtr, lda int, strideA int64, B DevicePtr, ldb int, strideB int64,
	C DevicePtr, ldc int, strideC int64, batch int, dtype DataType) error {
	var compute uintptr
	switch dtype {
	case R32F:
		compute = computeType32FPedantic
	case R64F:
		compute = computeType64F
	case R16F, R16BF:
		compute = computeType32F
	default:
		return fmt.Errorf("cuda: GemmStridedBatched: unsupported data type %v", dtype)
	}
	ta, tb := uintptr(opN), uintptr(opN)
	if transA {
		ta = opT
	}
	if transB {
		tb = opT
	}
	// cuBLAS launches on s itself: pass the stream's capture gate first, as
	// the package's own launches do, so another thread's capture of s
	// neither holds this product nor deadlocks with it over b.mu.
	defer s.exit(s.enter())
	b.mu.Lock()
	defer b.mu.Unlock()
	if dtype == R32F && b.tf32 {
		compute = computeType32FFastTF32
	}
	alpha, beta := unsafe.Pointer(&b.alpha32), unsafe.Pointer(&b.beta32)
	if dtype == R64F {
		alpha, beta = unsafe.Pointer(&b.alpha64), unsafe.Pointer(&b.beta64)
	}
	if err := b.dev.lock(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer runtime.UnlockOSThread()
	// Pooled argument arrays: variadic calls would allocate.
	cb := callPool.Get().(*callBuf)
	defer callPool.Put(cb)
	math := uintptr(mathDefault)
	if b.tf32 {
		math = mathTF32
	}
	if math != b.math {
		cb.a[0], cb.a[1] = b.h, math
		if r, _, _ := purego.SyscallN(blasLib.setMathMode, cb.a[:2]...); r != 0 {
			return cublasError("cublasSetMathMode", int(int32(uint32(r))))
		}
		b.math = math
	}
	if h := s.handle(); h != b.stream {
		cb.a[0], cb.a[1] = b.h, h
		if r, _, _ := purego.SyscallN(blasLib.setStream, cb.a[:2]...); r != 0 {
			return cublasError("cublasSetStream_v2", int(int32(uint32(r))))
		}
		b.stream = h
	}
	dt := uintptr(dtype)
	// alpha and beta point into b, heap memory kept alive below.
	cb.a = [24]uintptr{b.h, ta, tb,
		uintptr(m), uintptr(n), uintptr(k),
		uintptr(alpha),
		uintptr(A), dt, uintptr(lda), uintptr(strideA),
		uintptr(B), dt, uintptr(ldb), uintptr(strideB),
		uintptr(beta),
		uintptr(C), dt, uintptr(ldc), uintptr(strideC),
		uintptr(batch), compute, gemmDefault}
	r, _, _ := purego.SyscallN(blasLib.gemmStridedBatchedEx, cb.a[:23]...)
	runtime.KeepAlive(b)
	if r != 0 {
		return cublasError("cublasGemmStridedBatchedEx", int(int32(uint32(r))))
	}
	return nil
}
