package trace_test

import (
	"fmt"
	"reflect"

	"gocompile/trace"
)

type weight struct{ name string }

// A model's arguments flatten into tensor leaves (here *weight; a nil one
// is a leaf too, so optional tensors keep their place) and scalar leaves,
// and rebuild with new tensors in the same places.
func Example() {
	type layer struct {
		W, B  *weight
		Scale float64
	}
	args := []layer{{&weight{"w0"}, &weight{"b0"}, 0.5}, {&weight{"w1"}, nil, 2}}
	leaf := reflect.TypeFor[*weight]()
	var l trace.Leaves
	if err := trace.Flatten(reflect.ValueOf(args), leaf, &l); err != nil {
		panic(err)
	}
	fmt.Println(len(l.Tensors), "tensors, scalars", l.Scalars)

	k := 0
	rebuilt := trace.Rebuild(reflect.ValueOf(args), leaf, func() reflect.Value {
		k++
		return reflect.ValueOf(&weight{fmt.Sprintf("new%d", k)})
	}).Interface().([]layer)
	fmt.Println(rebuilt[0].W.name, rebuilt[0].B.name, rebuilt[1].W.name, rebuilt[1].B.name, rebuilt[1].Scale)
	// Output:
	// 4 tensors, scalars [0.5 2]
	// new1 new2 new3 new4 2
}
