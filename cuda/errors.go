package cuda

import (
	"errors"
	"strconv"
	"strings"
)

// Error is an error reported by the CUDA driver, NVRTC or cuBLAS.
//
// Op is the library function that failed (for example "cuMemAlloc_v2",
// "nvrtcCompileProgram" or "cublasGemmStridedBatchedEx"), Code its numeric
// result (CUresult, nvrtcResult or cublasStatus_t), Name the symbolic name of
// the code ("CUDA_ERROR_OUT_OF_MEMORY") and Msg a description: the driver's
// cuGetErrorString text, or for a failed NVRTC compilation the compiler log.
type Error struct {
	Op   string
	Code int
	Name string
	Msg  string
}

// ErrorOutOfMemory is the driver's CUDA_ERROR_OUT_OF_MEMORY code, returned by
// (*Device).Malloc in Error.Code when the device has no room left.
const ErrorOutOfMemory = 2

// Error returns a message like
// "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("cuda: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Name != "" {
		b.WriteString(e.Name)
	} else {
		b.WriteString("error ")
		b.WriteString(strconv.Itoa(e.Code))
	}
	if e.Msg != "" {
		if strings.Contains(e.Msg, "\n") {
			b.WriteString("\n")
			b.WriteString(strings.TrimRight(e.Msg, "\n"))
		} else {
			b.WriteString(" (")
			b.WriteString(e.Msg)
			b.WriteString(")")
		}
	}
	return b.String()
}

// IsOutOfMemory reports whether err (or an error it wraps) is an out-of-memory
// error of the driver (CUDA_ERROR_OUT_OF_MEMORY), NVRTC
// (NVRTC_ERROR_OUT_OF_MEMORY) or cuBLAS (CUBLAS_STATUS_ALLOC_FAILED).
func IsOutOfMemory(err error) bool {
	var o interface{ OutOfMemory() bool } // the allocator's *OutOfMemoryError
	if errors.As(err, &o) && o.OutOfMemory() {
		return true
	}
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Name {
	case "CUDA_ERROR_OUT_OF_MEMORY", "NVRTC_ERROR_OUT_OF_MEMORY", "CUBLAS_STATUS_ALLOC_FAILED":
		return true
	case "":
	default:
		return false
	}
	switch {
	case strings.HasPrefix(e.Op, "nvrtc"):
		return e.Code == 1
	case strings.HasPrefix(e.Op, "cublas"):
		return e.Code == 3
	default:
		return e.Code == ErrorOutOfMemory
	}
}

// driverErrorNames names the common CUresult codes, used when cuGetErrorName
// itself is unavailable.
var driverErrorNames = map[int]string{
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	908: "CUDA_ERROR_CAPTURED_EVENT",
	910: "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
	999: "CUDA_ERROR_UNKNOWN",
}

// nvrtcErrorNames names the nvrtcResult codes.
var nvrtcErrorNames = map[int]string{
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
	12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
}

// cublasStatusNames names the cublasStatus_t codes.
var cublasStatusNames = map[int]string{
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

var cublasStatusMsgs = map[int]string{
	1:  "the cuBLAS library was not initialized",
	3:  "resource allocation failed",
	7:  "an unsupported value or parameter was passed",
	8:  "the device does not support the operation",
	11: "access to GPU memory space failed",
	13: "the GPU program failed to execute",
	14: "an internal cuBLAS operation failed",
	15: "the functionality requested is not supported",
	16: "license error",
}

func cublasError(op string, code int) error {
	name, ok := cublasStatusNames[code]
	if !ok {
		name = "CUBLAS_STATUS_" + strconv.Itoa(code)
	}
	return &Error{Op: op, Code: code, Name: name, Msg: cublasStatusMsgs[code]}
}
