package tensor

import (
	"errors"
	"strings"
	"testing"

	"gocompile/array"
)

// Every misuse panics with an *Error that names the op, the operands'
// shapes and a fix, and Try turns it into an error.
func TestMisuseErrors(t *testing.T) {
	a := Zeros(Float32, 2, 3)
	// Devices are compared before any storage is touched, so a tensor that
	// only claims to be on GPU 7 shows the error on any machine.
	onGPU := &Tensor{v: array.Meta(CUDA(7), Float32, []int{3}, []int{1})}
	tests := []struct {
		name  string
		f     func()
		op    string
		shows []string // substrings the message must hold
	}{
		{"broadcast", func() { a.Add(Zeros(Float32, 4)) }, "Add", []string{"[2, 3]", "[4]", "not broadcastable"}},
		{"dim", func() { a.Sum(2) }, "Sum", []string{"[2, 3]", "dim 2 is out of range", "[-2, 1]"}},
		{"repeated dim", func() { a.Sum(1, -1) }, "Sum", []string{"more than once"}},
		{"dtype", func() { a.To(Int64).GELU() }, "GELU", []string{"int64", "To(tensor.Float32)"}},
		{"bool sub", func() { a.To(Bool).Sub(a.To(Bool)) }, "Sub", []string{"bool"}},
		{"mean of ints", func() { a.To(Int32).Mean() }, "Mean", []string{"int32"}},
		{"devices", func() { a.Select(0, 0).cpu().Add(onGPU) }, "Add", []string{"cpu", "cuda:7", "operand 1"}},
		{"matmul", func() { a.MatMul(a) }, "MatMul", []string{"[2, 3]", "inner dims"}},
		{"view", func() { a.T().View(6) }, "View", []string{"Contiguous", "Reshape"}},
		{"reshape numel", func() { a.Reshape(4) }, "Reshape", []string{"6", "[4]"}},
		{"item", func() { a.Item() }, "Item", []string{"[2, 3]", "6"}},
		{"mask dtype", func() { a.MaskedFill(a, 1) }, "MaskedFill", []string{"bool mask"}},
		{"index dtype", func() { a.IndexSelect(0, a.Select(1, 0)) }, "IndexSelect", []string{"int32 or int64"}},
		{"index range", func() { a.IndexSelect(0, FromSlice([]int64{5})) }, "IndexSelect", []string{"index 5", "size 2"}},
		{"empty max", func() { Zeros(Float32, 0).Max() }, "Max", []string{"zero elements"}},
		{"layer norm", func() { a.LayerNorm([]int{2}, nil, nil, 1e-5) }, "LayerNorm", []string{"[2, 3]", "normalized shape [2]"}},
		{"cat", func() { Cat([]*Tensor{a, Zeros(Float32, 2, 2)}, 0) }, "Cat", []string{"[2, 2]", "dim 1"}},
		{"fromslice", func() { FromSlice([]float32{1, 2, 3}, 2, 2) }, "FromSlice", []string{"4 elements", "3 values"}},
		{"expand", func() { a.Expand(4, 3) }, "Expand", []string{"size 2", "4"}},
		{"nil operand", func() { a.Add(nil) }, "Add", []string{"nil"}},
	}
	for _, tc := range tests {
		err := Try(tc.f)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want an *Error", tc.name, err)
			continue
		}
		if e.Op != tc.op {
			t.Errorf("%s: op %q, want %q (%v)", tc.name, e.Op, tc.op, err)
		}
		if e.Fix == "" {
			t.Errorf("%s: no fix in %v", tc.name, err)
		}
		for _, s := range tc.shows {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not mention %q", tc.name, err, s)
			}
		}
	}
}

func TestTryPassesThrough(t *testing.T) {
	if err := Try(func() { Zeros(Float32, 2).Add(Ones(Float32, 2)) }); err != nil {
		t.Fatalf("Try of a good op: %v", err)
	}
	defer func() {
		if r := recover(); r != "bug" {
			t.Fatalf("a non-Error panic was swallowed or changed: %v", r)
		}
	}()
	Try(func() { panic("bug") })
}

// UseDevice reports a device it cannot use as an *Error and leaves the
// default device as it was.
func TestUseDevice(t *testing.T) {
	before := DefaultDevice()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true}, {"cpu", true}, {"CPU", true}, {"bogus", false}, {"cuda:-1", false},
	} {
		err := UseDevice(tc.name)
		if tc.ok && err != nil {
			t.Errorf("UseDevice(%q) = %v", tc.name, err)
		}
		var e *Error
		if !tc.ok && (!errors.As(err, &e) || e.Op != "UseDevice" || !strings.Contains(e.Reason, tc.name) || e.Fix == "") {
			t.Errorf("UseDevice(%q) = %v, want an *Error naming it with a fix", tc.name, err)
		}
		SetDefaultDevice(before)
	}
}

// A bad GOCOMPILE_DEVICE names the variable and the value, and the fix
// once.
func TestDefaultDeviceFromEnv(t *testing.T) {
	old := defaultDevice.Load()
	t.Cleanup(func() { defaultDevice.Store(old) })
	tests := []struct {
		env  string
		want string // the error, or "" for none
	}{
		{"bogus", `DefaultDevice: GOCOMPILE_DEVICE="bogus" names no device; set it to cpu, cuda or cuda:N`},
		{"cuda:x", `DefaultDevice: GOCOMPILE_DEVICE="cuda:x" names no device; set it to cpu, cuda or cuda:N`},
		{" CPU ", ""},
	}
	for _, tt := range tests {
		t.Setenv("GOCOMPILE_DEVICE", tt.env)
		defaultDevice.Store(nil)
		var d Device
		err := Try(func() { d = DefaultDevice() })
		switch {
		case tt.want == "" && (err != nil || d != CPU):
			t.Errorf("GOCOMPILE_DEVICE=%q: %v, %v", tt.env, d, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("GOCOMPILE_DEVICE=%q: error %v, want %s", tt.env, err, tt.want)
		}
	}
}

// Try of a nil function is an *Error, not a nil-function panic.
func TestTryNil(t *testing.T) {
	var e *Error
	if err := Try(nil); !errors.As(err, &e) || e.Op != "Try" {
		t.Fatalf("Try(nil) = %v, want an *Error", err)
	}
}

// A misuse panics with an *Error whichever layer finds it, also for a
// caller that recovers by itself rather than through Try.
func TestMisusePanicsWithError(t *testing.T) {
	a := Zeros(Float32, 2, 3)
	for name, f := range map[string]func(){
		"broadcast":  func() { a.Add(Zeros(Float32, 4)) },
		"dim":        func() { a.Sum(5) },
		"reshape":    func() { a.Reshape(7) },
		"index":      func() { a.IndexSelect(0, FromSlice([]int64{9})) },
		"compiled":   func() { Compile(func(x, y *Tensor) *Tensor { return x.Add(y) })(a, Zeros(Float32, 4)) },
		"copy shape": func() { a.Copy(Zeros(Float32, 5)) },
	} {
		func() {
			defer func() {
				if _, ok := recover().(*Error); !ok {
					t.Errorf("%s: did not panic with an *Error", name)
				}
			}()
			f()
		}()
	}
}
