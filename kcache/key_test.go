package kcache

import "testing"

func TestNewKeyDistinct(t *testing.T) {
	tests := [][]string{
		nil,
		{""},
		{"", ""},
		{"ab", "c"},
		{"a", "bc"},
		{"abc"},
		{"kernel source", "sm_90"},
		{"kernel source", "sm_80"},
	}
	seen := make(map[Key][]string)
	for _, parts := range tests {
		k := NewKey(parts...)
		if prev, ok := seen[k]; ok {
			t.Errorf("NewKey(%q) = NewKey(%q)", parts, prev)
		}
		seen[k] = parts
		if k != NewKey(parts...) {
			t.Errorf("NewKey(%q) is not deterministic", parts)
		}
	}
}

func TestKeyBuilderTyped(t *testing.T) {
	keys := map[string]Key{
		"string 1":   new(KeyBuilder).String("1").Key(),
		"int 1":      new(KeyBuilder).Int(1).Key(),
		"bytes 1":    new(KeyBuilder).Bytes([]byte("1")).Key(),
		"list [1]":   new(KeyBuilder).Strings([]string{"1"}).Key(),
		"list []":    new(KeyBuilder).Strings(nil).Key(),
		"nothing":    new(KeyBuilder).Key(),
		"list [] []": new(KeyBuilder).Strings(nil).Strings(nil).Key(),
	}
	seen := make(map[Key]string)
	for name, k := range keys {
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s hash alike", name, prev)
		}
		seen[k] = name
	}
}

func TestSpecKeys(t *testing.T) {
	base := KernelSpec{Source: "src", Name: "k", CodegenVersion: "1", NVRTCVersion: "12.8", Arch: "sm_90", Options: []string{"-O3"}}
	kernels := map[string]func(*KernelSpec){
		"source":  func(s *KernelSpec) { s.Source = "src2" },
		"name":    func(s *KernelSpec) { s.Name = "k2" },
		"codegen": func(s *KernelSpec) { s.CodegenVersion = "2" },
		"nvrtc":   func(s *KernelSpec) { s.NVRTCVersion = "12.9" },
		"arch":    func(s *KernelSpec) { s.Arch = "sm_80" },
		"options": func(s *KernelSpec) { s.Options = []string{"-O2"} },
		"no opts": func(s *KernelSpec) { s.Options = nil },
	}
	for name, change := range kernels {
		s := base
		change(&s)
		if s.Key() == base.Key() {
			t.Errorf("changing the kernel's %s does not change its key", name)
		}
	}
	prog := ProgramSpec{Kind: "p", Graph: "g", Guards: []string{"x.shape[0]==4"}, Mode: "default", Device: "cuda:sm_90", Version: "1"}
	programs := map[string]func(*ProgramSpec){
		"kind":    func(s *ProgramSpec) { s.Kind = "q" },
		"graph":   func(s *ProgramSpec) { s.Graph = "h" },
		"guards":  func(s *ProgramSpec) { s.Guards = nil },
		"mode":    func(s *ProgramSpec) { s.Mode = "max-autotune" },
		"device":  func(s *ProgramSpec) { s.Device = "cpu" },
		"version": func(s *ProgramSpec) { s.Version = "2" },
	}
	for name, change := range programs {
		s := prog
		change(&s)
		if s.Key() == prog.Key() {
			t.Errorf("changing the program's %s does not change its key", name)
		}
	}
	if (KernelSpec{}).Key() == (ProgramSpec{}).Key() {
		t.Error("empty kernel and program specs hash alike")
	}
}

func TestParseKey(t *testing.T) {
	k := NewKey("x")
	got, err := ParseKey(k.String())
	if err != nil || got != k {
		t.Fatalf("ParseKey(%s) = %v, %v", k, got, err)
	}
	for _, s := range []string{"", "00", k.String()[:63] + "g", k.String() + "00"} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) succeeded", s)
		}
	}
}
