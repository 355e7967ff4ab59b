package tensor

import (
	"sync"
	"testing"
)

// Many goroutines share tensors, the compiled-block cache and the parallel
// kernels; run under -race in CI.
func TestConcurrentOps(t *testing.T) {
	x := Randn(1, Float32, 64, 257)
	w := Randn(2, Float32, 33, 257)
	want := x.Linear(w, nil).GELU().Softmax(-1).Sum(0).Float32s()
	var wg sync.WaitGroup
	errs := make(chan string, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dt := []DType{Float32, Float64, Float16, BFloat16}[g%4]
			for range 5 {
				got := x.Linear(w, nil).GELU().Softmax(-1).Sum(0).Float32s()
				if dt == Float32 {
					for i := range want {
						if got[i] != want[i] {
							errs <- "results differ between goroutines"
							return
						}
					}
				}
				// other dtypes exercise other block-cache entries at once
				x.To(dt).Add(x.T().T().To(dt)).Max(1).Float32s()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
