package trace

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

type leaf struct{ id int }

type inner struct {
	T      *leaf
	hidden *leaf
	N      int
}

type outer struct {
	In    inner
	P     *inner
	List  []*leaf
	Arr   [2]*leaf
	Flag  bool
	Scale float32
	Nil   *inner
}

var leafType = reflect.TypeOf((*leaf)(nil))

func TestFlattenRebuild(t *testing.T) {
	l := func(i int) *leaf { return &leaf{i} }
	v := outer{
		In:    inner{T: l(1), hidden: l(2), N: 3},
		P:     &inner{T: l(4), hidden: l(5), N: 6},
		List:  []*leaf{l(7), nil},
		Arr:   [2]*leaf{l(8), l(9)},
		Flag:  true,
		Scale: 0.5,
	}
	var got Leaves
	if err := Flatten(reflect.ValueOf(v), leafType, &got); err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, x := range got.Tensors {
		if p := x.Interface().(*leaf); p != nil {
			ids = append(ids, p.id)
		} else {
			ids = append(ids, 0)
		}
	}
	if want := []int{1, 2, 4, 5, 7, 0, 8, 9}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("tensor leaves %v, want %v (unexported fields included, nil kept)", ids, want)
	}
	if want := []float64{3, 6, 1, 0.5}; !reflect.DeepEqual(got.Scalars, want) {
		t.Fatalf("scalars %v, want %v", got.Scalars, want)
	}
	// P is set, List has two entries, Nil is nil.
	if want := []int{1, 2, -1}; !reflect.DeepEqual(got.Structure, want) {
		t.Fatalf("structure %v, want %v", got.Structure, want)
	}
	k := 100
	r := Rebuild(reflect.ValueOf(v), leafType, func() reflect.Value { k++; return reflect.ValueOf(&leaf{k}) }).Interface().(outer)
	if r.In.T.id != 101 || r.In.hidden.id != 102 || r.P.T.id != 103 || r.List[1].id != 106 || r.Arr[1].id != 108 {
		t.Fatalf("rebuild placed leaves wrongly: %+v", r)
	}
	if r.P == v.P || r.In.N != 3 || !r.Flag || r.Scale != 0.5 || r.Nil != nil {
		t.Fatalf("rebuild must copy structure and keep scalars: %+v", r)
	}
	if v.In.T.id != 1 {
		t.Fatal("rebuild changed its input")
	}
}

type node struct {
	T    *leaf
	Next *node
	Kids []node
}

func TestFlattenRejects(t *testing.T) {
	loop := &node{}
	loop.Next = &node{Next: loop}
	kids := make([]node, 1)
	kids[0].Kids = kids
	bad := []any{map[string]*leaf{}, "text", func() {}, make(chan int), new(int), (*int)(nil), struct{ S []string }{}}
	cyclic := []any{loop, kids} // their types are fine, their values are not
	for i, v := range append(bad, cyclic...) {
		var l Leaves
		err := Flatten(reflect.ValueOf(v), leafType, &l)
		if err == nil || !strings.Contains(err.Error(), "unsupported") {
			t.Errorf("%T: %v", v, err)
		}
		if typeErr := CheckType(reflect.TypeOf(v), leafType); (i < len(bad)) != (typeErr != nil) {
			t.Errorf("%T: CheckType: %v", v, typeErr)
		}
	}
	// A value shared by two fields is not a cycle.
	shared := &node{T: &leaf{1}}
	var l Leaves
	if err := Flatten(reflect.ValueOf([]*node{shared, shared}), leafType, &l); err != nil || len(l.Tensors) != 2 {
		t.Errorf("shared value: %v, %d leaves", err, len(l.Tensors))
	}
}

func TestCheckTypeAccepts(t *testing.T) {
	for _, v := range []any{outer{}, node{}, []*leaf{}, [3]float32{}, uint8(1), struct{ X [2]*leaf }{}} {
		if err := CheckType(reflect.TypeOf(v), leafType); err != nil {
			t.Errorf("%T: %v", v, err)
		}
	}
}

func TestSameScalars(t *testing.T) {
	nan := math.NaN()
	if !SameScalars([]float64{1, nan}, []float64{1, nan}) || SameScalars([]float64{0}, []float64{math.Copysign(0, -1)}) ||
		SameScalars([]float64{1}, []float64{1, 2}) {
		t.Fatal("SameScalars")
	}
}

func TestLocIsCallerOutsideLibrary(t *testing.T) {
	loc := Loc() // this test file is user code
	if !strings.HasPrefix(loc, "trace_test.go:") {
		t.Fatalf("Loc() = %q", loc)
	}
	if !inLibrary(libraryDirs[0]+"x.go") || inLibrary(libraryDirs[0]+"x_test.go") {
		t.Fatal("inLibrary")
	}
	if goroot == "" || !strings.HasSuffix(goroot, "/src/") || !inLibrary(goroot+"reflect/value.go") {
		t.Fatalf("standard library frames not recognised (goroot %q)", goroot)
	}
}
