package kcache

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

//go:generate go tool msgp -file entry.go -o entry_gen.go -io=false

// KindKernel is the kind of entries that hold a Kernel.
const KindKernel = "kernel"

// maxKindLen bounds a program kind, which is stored in the entry header.
const maxKindLen = 255

// MaxLabelLen bounds what an entry keeps of its Func and Name, in bytes.
const MaxLabelLen = 512

// maxFunctions is the most functions a Kernel may list; it matches the
// limit in Kernel's msgp tag, so that what encodes also decodes.
const maxFunctions = 4096

// maxCompileSeconds bounds CompileSeconds, so that summing hits' times
// in nanoseconds cannot overflow.
const maxCompileSeconds = 1 << 30

// Entry is one cached artifact: a compiled kernel module or an opaque
// compiled program. Exactly one of Kernel and Program is set.
//
// The cache hands the same Entry, and the same byte slices, to every
// caller that asks for its key, so callers must treat it as read-only.
type Entry struct {
	// Func and Name say what the entry is for, for people listing the
	// cache (Cache.Entries): the compiled function that stored it, and
	// the kernel or other artifact it holds. The cache does not interpret
	// them, and keeps at most MaxLabelLen bytes of each. They are encoded
	// first, so that a listing reads them without decoding the rest;
	// entries written before they existed have neither.
	Func string `msg:"func"`
	Name string `msg:"name"`

	Kernel  *Kernel  `msg:"kernel"`
	Program *Program `msg:"program"`

	// CompileSeconds is how long producing the artifact took. Hits add it
	// to Stats.SavedSeconds. GetOrCompute measures it when it is zero.
	CompileSeconds float64 `msg:"compile_s"`
}

// Kernel is a compiled GPU module: the output of NVRTC for one source, and
// what launching its functions needs to know without recompiling.
type Kernel struct {
	Arch  string `msg:"arch"`           // target: "sm_90" (CUBIN) or "compute_90" (PTX)
	CUBIN []byte `msg:"cubin,zerocopy"` // machine code for Arch; nil when only PTX was made
	PTX   []byte `msg:"ptx,zerocopy"`   // PTX, when available
	Log   string `msg:"log"`            // the compiler's log (warnings)

	// Functions describes the module's kernels, in the order the code
	// generator listed them. The limit bounds what decoding a corrupt
	// count allocates: a module has a handful of kernels, not millions.
	Functions []Function `msg:"functions,limit=4096"`
}

// Function is the launch metadata of one kernel in a module: what the
// driver reports for it and what the code generator chose.
type Function struct {
	Name               string   `msg:"name"`
	Registers          int      `msg:"regs"`        // registers per thread
	SharedBytes        int      `msg:"shared"`      // static shared memory per block
	DynamicSharedBytes int      `msg:"dyn_shared"`  // dynamic shared memory per block
	LocalBytes         int      `msg:"local"`       // local (spill) memory per thread
	MaxThreads         int      `msg:"max_threads"` // most threads per block it can launch with
	Block              [3]int32 `msg:"block"`       // block shape chosen by the code generator, or zeros
}

// Program is a compiled program of a kind the cache does not interpret:
// the caller serialises it into Payload and names the format in Kind.
type Program struct {
	Kind    string `msg:"kind"` // e.g. "inductor.program/v1"; not "kernel"
	Payload []byte `msg:"payload,zerocopy"`
}

// Kind names what e holds: KindKernel, or the Program's kind.
func (e *Entry) Kind() string {
	switch {
	case e.Kernel != nil:
		return KindKernel
	case e.Program != nil:
		return e.Program.Kind
	}
	return ""
}

// clipLabels cuts Func and Name to MaxLabelLen bytes, at a character
// boundary.
func (e *Entry) clipLabels() {
	e.Func, e.Name = clipLabel(e.Func), clipLabel(e.Name)
}

func clipLabel(s string) string {
	if len(s) <= MaxLabelLen {
		return s
	}
	n := MaxLabelLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// size estimates the memory e holds, for the memory cache's byte limit.
func (e *Entry) size() int64 {
	n := int64(128 + len(e.Func) + len(e.Name))
	if k := e.Kernel; k != nil {
		n += int64(len(k.Arch) + len(k.CUBIN) + len(k.PTX) + len(k.Log))
		for _, f := range k.Functions {
			n += int64(64 + len(f.Name))
		}
	}
	if p := e.Program; p != nil {
		n += int64(len(p.Kind) + len(p.Payload))
	}
	return n
}

// validate reports why e cannot be stored, or nil. Decoding applies it too,
// so that a well-formed but meaningless file is a miss rather than an entry
// that fails later in a caller.
func (e *Entry) validate() error {
	switch {
	case e.Kernel == nil && e.Program == nil:
		return errors.New("neither Kernel nor Program is set")
	case e.Kernel != nil && e.Program != nil:
		return errors.New("both Kernel and Program are set")
	case math.IsNaN(e.CompileSeconds) || e.CompileSeconds < 0 || e.CompileSeconds > maxCompileSeconds:
		return fmt.Errorf("CompileSeconds is %v", e.CompileSeconds)
	}
	if k := e.Kernel; k != nil {
		switch {
		case len(k.CUBIN) == 0 && len(k.PTX) == 0:
			return errors.New("kernel has neither CUBIN nor PTX")
		case len(k.Functions) > maxFunctions:
			return fmt.Errorf("kernel lists %d functions; the limit is %d", len(k.Functions), maxFunctions)
		}
	}
	if p := e.Program; p != nil {
		switch {
		case p.Kind == "":
			return errors.New("program kind is empty")
		case p.Kind == KindKernel:
			return fmt.Errorf("program kind %q is reserved", p.Kind)
		case len(p.Kind) > maxKindLen:
			return fmt.Errorf("program kind is %d bytes long; the limit is %d", len(p.Kind), maxKindLen)
		}
	}
	return nil
}
