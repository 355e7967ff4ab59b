package trace

import (
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// Flattening turns a Go value into leaves, pytree style: tensors (values
// of the leaf type, a pointer type), scalars (bools, integers and floats,
// as float64), walking slices, arrays, structs (every field, exported or
// not) and pointers to structs. Nil pointers and nil slices stay as they
// are. Anything else (maps, channels, funcs, interfaces, strings) is an
// error: its meaning for a compiled function would be a guess.

// Leaves are the flattened contents of some values.
type Leaves struct {
	Tensors []reflect.Value // values of the leaf type, in walk order
	Scalars []float64       // scalar values, in walk order
	// Structure is what else the walk met, in walk order: the length of
	// each slice (-1 if nil) and, for each pointer to a struct, 1 or -1 if
	// nil. Values with the same leaf counts can differ here: []{a}, []{b, c}
	// against []{a, b}, []{c}.
	Structure []int

	path map[walkKey]bool // slices and pointers being walked: a cycle is an error
}

type walkKey struct {
	p unsafe.Pointer
	t reflect.Type
}

// enter marks the slice or pointer v as being walked, or reports that it
// already is (v is reachable from itself).
func (l *Leaves) enter(v reflect.Value) (walkKey, error) {
	k := walkKey{v.UnsafePointer(), v.Type()}
	if l.path == nil {
		l.path = map[walkKey]bool{}
	}
	if l.path[k] {
		return k, fmt.Errorf("unsupported cyclic value of type %v: it contains itself", v.Type())
	}
	l.path[k] = true
	return k, nil
}

// Flatten appends the leaves of v to l.
func Flatten(v reflect.Value, leaf reflect.Type, l *Leaves) error {
	switch {
	case v.Type() == leaf:
		l.Tensors = append(l.Tensors, v)
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		f := 0.0
		if v.Bool() {
			f = 1
		}
		l.Scalars = append(l.Scalars, f)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		l.Scalars = append(l.Scalars, float64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		l.Scalars = append(l.Scalars, float64(v.Uint()))
	case reflect.Float32, reflect.Float64:
		l.Scalars = append(l.Scalars, v.Float())
	case reflect.Slice:
		if v.Len() == 0 { // no element to reject: check their type
			if err := CheckType(v.Type().Elem(), leaf); err != nil {
				return err
			}
		}
		if v.IsNil() {
			l.Structure = append(l.Structure, -1)
			return nil
		}
		l.Structure = append(l.Structure, v.Len())
		if v.Len() == 0 {
			return nil
		}
		k, err := l.enter(v)
		if err != nil {
			return err
		}
		defer delete(l.path, k)
		for i := range v.Len() {
			if err := Flatten(v.Index(i), leaf, l); err != nil {
				return err
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if err := Flatten(v.Index(i), leaf, l); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if !v.CanAddr() { // copy, so that unexported fields can be read
			c := reflect.New(v.Type()).Elem()
			c.Set(v)
			v = c
		}
		for i := range v.NumField() {
			f := v.Field(i)
			f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			if err := Flatten(f, leaf, l); err != nil {
				return fmt.Errorf("field %s: %w", v.Type().Field(i).Name, err)
			}
		}
	case reflect.Pointer:
		if v.Type().Elem().Kind() != reflect.Struct {
			return fmt.Errorf("unsupported pointer type %v", v.Type())
		}
		if v.IsNil() {
			l.Structure = append(l.Structure, -1)
			return nil
		}
		l.Structure = append(l.Structure, 1)
		k, err := l.enter(v)
		if err != nil {
			return err
		}
		defer delete(l.path, k)
		return Flatten(v.Elem(), leaf, l)
	default:
		return fmt.Errorf("unsupported type %v: compiled functions take tensors, slices and structs of them, and numbers", v.Type())
	}
	return nil
}

// CheckType reports an error if a value of type t may hold something
// Flatten rejects, so that a function's signature can be checked before it
// is called. It accepts exactly the types Flatten walks.
func CheckType(t, leaf reflect.Type) error {
	return checkType(t, leaf, map[reflect.Type]bool{})
}

func checkType(t, leaf reflect.Type, seen map[reflect.Type]bool) error {
	if t == leaf {
		return nil
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return nil
	case reflect.Slice, reflect.Array:
		return checkType(t.Elem(), leaf, seen)
	case reflect.Struct:
		if seen[t] { // a recursive type, checked further up
			return nil
		}
		seen[t] = true
		for i := range t.NumField() {
			if err := checkType(t.Field(i).Type, leaf, seen); err != nil {
				return fmt.Errorf("field %s: %w", t.Field(i).Name, err)
			}
		}
		return nil
	case reflect.Pointer:
		if t.Elem().Kind() != reflect.Struct {
			return fmt.Errorf("unsupported pointer type %v", t)
		}
		return checkType(t.Elem(), leaf, seen)
	}
	return fmt.Errorf("unsupported type %v: compiled functions take tensors, slices and structs of them, and numbers", t)
}

// Rebuild returns a copy of v (of type t) with its tensor leaves replaced,
// in walk order, by the values next() returns; scalars are kept.
func Rebuild(v reflect.Value, leaf reflect.Type, next func() reflect.Value) reflect.Value {
	return RebuildScalars(v, leaf, next, nil)
}

// RebuildScalars is Rebuild that also replaces each scalar leaf, in walk
// order, by scalar(old value, as float64) converted to the leaf's type;
// scalar may be nil to keep scalars.
func RebuildScalars(v reflect.Value, leaf reflect.Type, next func() reflect.Value, scalar func(float64) float64) reflect.Value {
	t := v.Type()
	if t == leaf {
		return next()
	}
	if scalar != nil {
		out := reflect.New(t).Elem()
		switch v.Kind() {
		case reflect.Bool:
			out.SetBool(scalar(b2f(v.Bool())) != 0)
			return out
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out.SetInt(int64(scalar(float64(v.Int()))))
			return out
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			out.SetUint(uint64(scalar(float64(v.Uint()))))
			return out
		case reflect.Float32, reflect.Float64:
			out.SetFloat(scalar(v.Float()))
			return out
		}
	}
	next2 := func(x reflect.Value) reflect.Value { return RebuildScalars(x, leaf, next, scalar) }
	switch v.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(next2(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(t).Elem()
		for i := range v.Len() {
			out.Index(i).Set(next2(v.Index(i)))
		}
		return out
	case reflect.Struct:
		out := reflect.New(t).Elem()
		src := reflect.New(t).Elem()
		src.Set(v) // addressable, so unexported fields can be read
		for i := range v.NumField() {
			f := reflect.NewAt(src.Field(i).Type(), unsafe.Pointer(src.Field(i).UnsafeAddr())).Elem()
			dst := reflect.NewAt(out.Field(i).Type(), unsafe.Pointer(out.Field(i).UnsafeAddr())).Elem()
			dst.Set(next2(f))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(next2(v.Elem()))
		return p
	}
	return v
}

// SameScalars reports whether two scalar lists are equal bit for bit (so a
// NaN argument matches itself).
func SameScalars(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
