package kcache

import (
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// encodeUnlabelled returns the file of program entry e as kcache wrote it
// before entries had Func and Name.
func encodeUnlabelled(k Key, e Entry) []byte {
	kind := e.Program.Kind
	buf := make([]byte, headerSize, headerSize+len(kind)+e.Msgsize())
	buf = append(buf, kind...)
	buf = msgp.AppendMapHeader(buf, 3)
	buf = msgp.AppendString(buf, "kernel")
	buf = msgp.AppendNil(buf)
	buf = msgp.AppendString(buf, "program")
	buf, _ = e.Program.MarshalMsg(buf)
	buf = msgp.AppendString(buf, "compile_s")
	buf = msgp.AppendFloat64(buf, e.CompileSeconds)
	return frame(buf, k, kind)
}

// Entries reports each entry's Func and Name, read from the start of its
// file; entries stored before they existed still decode, with neither.
func TestEntriesLabels(t *testing.T) {
	long := "x" + strings.Repeat("é", MaxLabelLen) // é is two bytes: byte MaxLabelLen starts none
	labelled := func(fn, name string, e Entry) Entry {
		e.Func, e.Name = fn, name
		return e
	}
	tests := []struct {
		name     string
		e        Entry
		old      bool // written as before entries had labels
		fn, kern string
	}{
		{"kernel", labelled("main.forward", "fused_add_gelu_f32", kernelEntry("k", 1000)), false, "main.forward", "fused_add_gelu_f32"},
		{"program", labelled("main.(*mlp).forward-fm", "", programEntry("p")), false, "main.(*mlp).forward-fm", ""},
		{"no function", labelled("", "add_f32", kernelEntry("e", 100)), false, "", "add_f32"},
		{"unlabelled", programEntry("u"), false, "", ""},
		{"old format", programEntry("o"), true, "", ""},
		{"long", labelled(long, "x", programEntry("l")), false, long[:MaxLabelLen-1], "x"},
	}
	dir := t.TempDir()
	c, _ := openTest(t, dir)
	for _, tt := range tests {
		k := NewKey("labels", tt.name)
		if tt.old {
			if err := c.disk.write(k, encodeUnlabelled(k, tt.e)); err != nil {
				t.Fatal(err)
			}
		} else if err := c.Put(k, tt.e); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := c.Entries()
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[Key]EntryInfo{}
	for _, info := range infos {
		byKey[info.Key] = info
	}
	fresh := Open(dir) // reads from disk, not memory
	for _, tt := range tests {
		k := NewKey("labels", tt.name)
		info, ok := byKey[k]
		if !ok || info.Err != nil {
			t.Errorf("%s: listed %v, %v", tt.name, ok, info.Err)
			continue
		}
		if info.Func != tt.fn || info.Name != tt.kern {
			t.Errorf("%s: listed Func %q, Name %q; want %q, %q", tt.name, info.Func, info.Name, tt.fn, tt.kern)
		}
		e, ok := fresh.Get(k)
		if !ok || e.Func != tt.fn || e.Name != tt.kern || e.Kind() != tt.e.Kind() {
			t.Errorf("%s: Get = %v, Func %q, Name %q, kind %q", tt.name, ok, e.Func, e.Name, e.Kind())
		}
	}
}
