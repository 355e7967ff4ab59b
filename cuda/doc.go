// Package cuda is gocompile's thin binding to NVIDIA's CUDA driver API, the
// NVRTC runtime compiler and cuBLAS: just what running generated kernels
// needs. It lets the rest of gocompile allocate device memory, copy data,
// compile CUDA C++ source at run time, launch kernels on streams, capture and
// replay CUDA graphs, time work with events, and call cuBLAS GEMMs.
//
// # No cgo
//
// gocompile builds as one static Go binary with CGO_ENABLED=0, so this
// package does not link against CUDA. It loads the libraries at run time with
// github.com/ebitengine/purego (dlopen, dlsym) and calls their C functions
// through purego.SyscallN. A binary built without a GPU in sight therefore
// runs everywhere: on a machine without the NVIDIA driver, Available returns
// false with the reason, and nothing in the package panics.
//
// The driver functions used are the versioned symbols the CUDA headers map
// to (cuMemAlloc_v2, cuStreamBeginCapture_v2, cuGraphExecUpdate_v2 …).
// Graph functions are optional: on a driver without them the graph methods
// return an error and everything else works. cuGraphExecUpdate_v2 needs a
// CUDA 12 driver.
//
// # Finding the libraries
//
// Each library is tried first by its plain file name, so that the dynamic
// loader's own search (LD_LIBRARY_PATH, the ld.so cache, the default
// folders) wins, then in well-known folders:
//
//   - the driver, libcuda.so.1 (then libcuda.so): also
//     /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64,
//     /usr/local/nvidia/lib64 and /usr/lib/wsl/lib;
//   - NVRTC, libnvrtc.so.13, .so.12, .so.11.2, .so (versions not newer than
//     the driver first), and cuBLAS, libcublas.so.13, .so.12, .so.11, .so:
//     also $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64,
//     /usr/local/cuda-*/lib64 (newest version first), the nvidia/*/lib
//     folders of Python wheels (nvidia/cuda_nvrtc/lib, nvidia/cublas/lib,
//     nvidia/cu13/lib, nvidia/cu12/lib) in the site-packages and
//     dist-packages of $VIRTUAL_ENV/lib/python3*, $CONDA_PREFIX/lib/python3*,
//     /usr/lib/python3*, /usr/local/lib/python3* and ~/.local/lib/python3*,
//     and $CONDA_PREFIX/lib.
//
// When a library is found in a folder, its companions there
// (libnvrtc-builtins, libcublasLt) are loaded first so that its own
// dependencies resolve. LibraryPaths reports where each library came from.
//
// # Devices, contexts and threads
//
// GetDevice returns a cached *Device per ordinal and retains the device's
// primary context once. The CUDA driver keeps the current context per OS
// thread, while goroutines move between threads; so every method that calls
// the driver pins its goroutine to the thread (runtime.LockOSThread), makes
// the device's primary context current there (cuCtxSetCurrent, which is
// cheap) and unpins it. Devices, streams, events, modules, functions, graphs
// and BLAS handles may thus be used from any goroutine. An *Args must not be
// shared between goroutines while in use.
//
// A nil *Stream is device 0's legacy default stream; streams from NewStream
// are non-blocking and do not synchronize with it.
//
// # Launching kernels
//
// Compile turns CUDA C++ into CUBIN for the device's sm_XY (or PTX for the
// newest compute_XY NVRTC supports, which the driver JIT-compiles);
// LoadCompiled loads it and Module.Function finds a kernel by its extern "C"
// name. Stream.Launch passes parameters packed in an Args:
//
//	args := cuda.NewArgs()
//	args.Reset().Ptr(y).Ptr(x).F32(2).I32(n)
//	err := s.Launch(saxpy, cuda.Dim3{X: (n + 255) / 256}, cuda.Dim3{X: 256}, 0, args)
//
// Args keeps the values in its own 8-byte aligned Go buffer and the
// kernelParams pointer array beside it, so a reused Args makes launching
// allocation-free.
//
// # Errors
//
// Failures are *Error values carrying the failing function, the numeric
// code and its symbolic name and description, for example
// "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)". A failed
// compilation's Error holds NVRTC's log in Msg. IsOutOfMemory recognizes
// out-of-memory errors of all three libraries.
//
// The caching device allocator built on Malloc and Free is in alloc.go; see
// Allocator.
package cuda
