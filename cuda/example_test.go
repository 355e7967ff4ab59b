package cuda_test

import (
	"fmt"
	"unsafe"

	"gocompile/cuda"
)

// Example checks whether generated kernels can run on a GPU here. Without
// one, Available says why (no driver, no device, or no NVRTC).
func Example() {
	ok, err := cuda.Available()
	if !ok {
		fmt.Println("CUDA not available:", err)
		return
	}
	d, err := cuda.GetDevice(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("CUDA available: %d device(s); device 0 is %s with %d SMs\n", cuda.DeviceCount(), d.Name, d.SMCount)
}

// Example_saxpy compiles a kernel with NVRTC, launches it and reads the result back.
func Example_saxpy() {
	if ok, _ := cuda.Available(); !ok {
		return
	}
	const src = `extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}`
	d, _ := cuda.GetDevice(0)
	res, err := cuda.Compile(src, "saxpy.cu", d)
	if err != nil {
		fmt.Println(err) // the compiler log
		return
	}
	mod, _ := d.LoadCompiled(res)
	saxpy, _ := mod.Function("saxpy")

	const n = 4
	x, y := []float32{1, 2, 3, 4}, []float32{10, 20, 30, 40}
	px, _ := d.Malloc(4 * n)
	py, _ := d.Malloc(4 * n)
	defer d.Free(px)
	defer d.Free(py)
	s, _ := d.NewStream()
	defer s.Destroy()
	s.CopyHtoD(px, unsafe.Pointer(&x[0]), 4*n)
	s.CopyHtoD(py, unsafe.Pointer(&y[0]), 4*n)
	args := cuda.NewArgs().Ptr(py).Ptr(px).F32(2).I32(n)
	if err := s.Launch(saxpy, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, args); err != nil {
		fmt.Println(err)
		return
	}
	s.CopyDtoH(unsafe.Pointer(&y[0]), py, 4*n)
	s.Synchronize()
	fmt.Println(y) // [12 24 36 48]
}
