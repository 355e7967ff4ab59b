package kcache_test

import (
	"fmt"
	"log"
	"os"

	"gocompile/kcache"
)

func Example() {
	dir, err := os.MkdirTemp("", "kcache-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The key hashes everything the compiled kernel depends on.
	spec := kcache.KernelSpec{
		Source:         `extern "C" __global__ void add1(float* x) { x[threadIdx.x] += 1; }`,
		Name:           "add1",
		CodegenVersion: "1",
		NVRTCVersion:   "12.8",
		Arch:           "sm_90",
		Options:        []string{"-default-device"},
	}
	compile := func() (kcache.Entry, error) {
		fmt.Println("compiling")
		// Here a real caller runs NVRTC on spec.Source.
		return kcache.Entry{
			Kernel: &kcache.Kernel{
				Arch:      spec.Arch,
				CUBIN:     []byte("\x7fELF…"),
				Functions: []kcache.Function{{Name: "add1", Registers: 8, MaxThreads: 1024}},
			},
			CompileSeconds: 0.2,
		}, nil
	}

	c := kcache.Open(dir)
	e, _ := c.GetOrCompute(spec.Key(), compile) // a miss: compiles
	fmt.Println(e.Kind(), e.Kernel.Functions[0].Name)
	c.GetOrCompute(spec.Key(), compile) // a memory hit

	// A later process opens the same directory and finds the kernel there.
	later := kcache.Open(dir)
	e, _ = later.GetOrCompute(spec.Key(), compile) // a disk hit
	fmt.Println(e.Kind(), e.Kernel.Functions[0].Name)

	s, t := c.Stats(), later.Stats()
	fmt.Printf("first: %d miss, %d memory hit; later: %d disk hit, %.1fs saved\n", s.Misses, s.MemoryHits, t.DiskHits, t.SavedSeconds)
	// Output:
	// compiling
	// kernel add1
	// kernel add1
	// first: 1 miss, 1 memory hit; later: 1 disk hit, 0.2s saved
}
