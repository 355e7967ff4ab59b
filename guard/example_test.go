package guard_test

import (
	"fmt"

	"gocompile/guard"
	"gocompile/ir"
)

func Example() {
	cache := guard.NewCache(guard.DefaultPolicy(), 0)

	// One reused call descriptor: x [batch, 1024] float32, and a scalar.
	call := &guard.Call{Tensors: make([]guard.TensorMeta, 1), Scalars: make([]float64, 1)}
	run := func(batch int) {
		x := &call.Tensors[0]
		x.DType, x.Device, x.Contiguous = ir.Float32, ir.CPU, true
		x.SetShape([]int{batch, 1024})
		call.Scalars[0] = 0.5
		if _, v, ok := cache.Lookup(call); ok {
			fmt.Printf("batch %d: hit %v\n", batch, v)
			return
		}
		e, why := cache.Plan(call)
		fmt.Printf("batch %d: compile (%s)\n", batch, why.Text)
		cache.Insert(e, fmt.Sprintf("entry %d", cache.Len()))
	}
	run(8)
	run(8)
	run(16)
	run(32)
	run(1)
	fmt.Println(cache.Recompiles(), "recompiles; guards of entry 1:")
	fmt.Println(cache.Entries()[1])
	// Output:
	// batch 8: compile (first call)
	// batch 8: hit entry 0
	// batch 16: compile (entry 0: tensor 0 dim 0: size 16, expected 8; automatic dynamic: tensor 0 dim 0)
	// batch 32: hit entry 1
	// batch 1: compile (entry 0: tensor 0 dim 0: size 1, expected 8; entry 1: tensor 0 dim 0: size 1, dynamic dims need >= 2)
	// 2 recompiles; guards of entry 1:
	// tensor 0: float32 cpu contiguous [s0, 1024]
	// s0 >= 2
	// scalar 0 == 0.5
}
