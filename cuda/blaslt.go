package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cuBLASLt: float32 products with a fused bias epilogue, and the library's
// ranked list of algorithms for a problem (cublasLtMatmulAlgoGetHeuristic),
// which an autotuner times on the device.

var cublasLtSpec = libSpec{
	key:       "cublasLt",
	names:     []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"},
	toolkit:   true,
	wheelDirs: []string{"nvidia/cublas/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"},
}

var ltLib struct {
	once sync.Once
	err  error

	create, descCreate, descSetAttr, layoutCreate, prefCreate, prefSetAttr uintptr
	heuristic, matmul, version                                             uintptr
}

func initLt() error {
	ltLib.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				ltLib.err = fmt.Errorf("cuda: loading cuBLASLt panicked: %v", r)
			}
		}()
		h, path, err := loadLibrary(cublasLtSpec)
		if err != nil {
			ltLib.err = fmt.Errorf("cuda: cuBLASLt not found: %w", err)
			return
		}
		ltLib.err = loadSymbols(h, path, []symbol{
			{"cublasLtCreate", &ltLib.create, false},
			{"cublasLtMatmulDescCreate", &ltLib.descCreate, false},
			{"cublasLtMatmulDescSetAttribute", &ltLib.descSetAttr, false},
			{"cublasLtMatrixLayoutCreate", &ltLib.layoutCreate, false},
			{"cublasLtMatmulPreferenceCreate", &ltLib.prefCreate, false},
			{"cublasLtMatmulPreferenceSetAttribute", &ltLib.prefSetAttr, false},
			{"cublasLtMatmulAlgoGetHeuristic", &ltLib.heuristic, false},
			{"cublasLtMatmul", &ltLib.matmul, false},
			{"cublasLtGetVersion", &ltLib.version, false},
		})
	})
	return ltLib.err
}

// cublasLt enum values (cublasLt.h).
const (
	ltDescComputeType  = 0
	ltDescScaleType    = 1
	ltDescTransA       = 3
	ltDescTransB       = 4
	ltDescEpilogue     = 7
	ltDescBiasPointer  = 8
	ltPrefMaxWorkspace = 1
)

// LtEpilogue is what cuBLASLt applies to a product before storing it.
type LtEpilogue uint32

const (
	LtNoEpilogue LtEpilogue = 1 // CUBLASLT_EPILOGUE_DEFAULT
	LtBias       LtEpilogue = 4 // CUBLASLT_EPILOGUE_BIAS: add a vector to every column (row-major: every row)
)

// ltWorkspace is the device memory each handle lends its products.
const ltWorkspace = 32 << 20

// BLASLt is a cuBLASLt handle for one device, with its workspace.
type BLASLt struct {
	dev     *Device
	h       uintptr
	ws      DevicePtr
	Version int // cublasLtGetVersion, e.g. 130100
}

// BLASLt returns d's cuBLASLt handle, creating it on first use.
func (d *Device) BLASLt() (*BLASLt, error) {
	d.ltMu.Lock()
	defer d.ltMu.Unlock()
	if d.lt != nil || d.ltErr != nil {
		return d.lt, d.ltErr
	}
	if err := initLt(); err != nil {
		d.ltErr = err
		return nil, err
	}
	l := &BLASLt{dev: d}
	ws, err := d.Malloc(ltWorkspace)
	if err != nil {
		d.ltErr = err
		return nil, err
	}
	l.ws = ws
	if err := d.lock(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	r, _, _ := purego.SyscallN(ltLib.create, uintptr(unsafe.Pointer(&l.h)))
	v, _, _ := purego.SyscallN(ltLib.version)
	runtime.UnlockOSThread()
	if code := int(int32(uint32(r))); code != 0 {
		d.ltErr = cublasError("cublasLtCreate", code)
		return nil, d.ltErr
	}
	l.Version = int(v)
	d.lt = l
	return l, nil
}

// call calls a cuBLASLt function with the device's context current.
func (l *BLASLt) call(op string, fn uintptr, args ...uintptr) error {
	if err := l.dev.lock(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	r, _, _ := purego.SyscallN(fn, args...)
	runtime.UnlockOSThread()
	if code := int(int32(uint32(r))); code != 0 {
		return cublasError(op, code)
	}
	return nil
}

// LtGemm is one float32 product shape as cuBLASLt runs it, in row-major
// terms: D (m×n, row stride n) = A·B (+ bias, a vector of n), A m×k and B
// k×n, each given as a matrix with unit stride along one dim (Trans: the
// column dim is the strided one, as for x·Wᵀ with W [n, k]) and leading
// dimension LD. Described once, run many times; safe for concurrent use.
type LtGemm struct {
	lt               *BLASLt
	mu               sync.Mutex
	desc, a, b, d    uintptr // descriptor and layouts (owned by cuBLASLt; kept for the process)
	pref             uintptr
	epilogue         LtEpilogue
	alpha, beta      float32
	bias             DevicePtr
	M, N, K          int
	algos            []ltHeuristic
	heuristicsLoaded bool
}

// LtMatrix is an operand of an LtGemm: Trans means its rows are the
// strided dim (element (i, j) at j·LD + i), else element (i, j) is at
// i·LD + j.
type LtMatrix struct {
	Trans bool
	LD    int
}

// ltHeuristic is cublasLtMatmulHeuristicResult_t.
type ltHeuristic struct {
	algo          [8]uint64
	workspaceSize uintptr
	state         int32
	waves         float32
	_             [4]int32
}

// NewGemm describes the product D = A·B (+bias) of an m×k A and a k×n B.
func (l *BLASLt) NewGemm(m, n, k int, a, b LtMatrix, epilogue LtEpilogue) (*LtGemm, error) {
	g := &LtGemm{lt: l, epilogue: epilogue, alpha: 1, M: m, N: n, K: k}
	// Row-major D = A·B is column-major Dᵀ = Bᵀ·Aᵀ: cuBLASLt's A is our B
	// (n×k column-major, or k×n transposed), its B is our A.
	opA, opB := uintptr(opN), uintptr(opN)
	rowsA, colsA := n, k // our B, column-major
	if b.Trans {
		opA, rowsA, colsA = opT, k, n
	}
	rowsB, colsB := k, m // our A, column-major
	if a.Trans {
		opB, rowsB, colsB = opT, m, k
	}
	compute := uintptr(computeType32F)
	set := func(attr uintptr, v *uint32) error {
		return l.call("cublasLtMatmulDescSetAttribute", ltLib.descSetAttr, g.desc, attr, uintptr(unsafe.Pointer(v)), 4)
	}
	if err := l.call("cublasLtMatmulDescCreate", ltLib.descCreate, uintptr(unsafe.Pointer(&g.desc)), compute, uintptr(R32F)); err != nil {
		return nil, err
	}
	ta, tb, ep := uint32(opA), uint32(opB), uint32(epilogue)
	for _, err := range []error{set(ltDescTransA, &ta), set(ltDescTransB, &tb), set(ltDescEpilogue, &ep)} {
		if err != nil {
			return nil, err
		}
	}
	layout := func(dst *uintptr, rows, cols, ld int) error {
		return l.call("cublasLtMatrixLayoutCreate", ltLib.layoutCreate, uintptr(unsafe.Pointer(dst)), uintptr(R32F),
			uintptr(rows), uintptr(cols), uintptr(ld))
	}
	if err := layout(&g.a, rowsA, colsA, b.LD); err != nil {
		return nil, err
	}
	if err := layout(&g.b, rowsB, colsB, a.LD); err != nil {
		return nil, err
	}
	if err := layout(&g.d, n, m, n); err != nil {
		return nil, err
	}
	if err := l.call("cublasLtMatmulPreferenceCreate", ltLib.prefCreate, uintptr(unsafe.Pointer(&g.pref))); err != nil {
		return nil, err
	}
	wsBytes := uint64(ltWorkspace)
	if err := l.call("cublasLtMatmulPreferenceSetAttribute", ltLib.prefSetAttr, g.pref, ltPrefMaxWorkspace,
		uintptr(unsafe.Pointer(&wsBytes)), 8); err != nil {
		return nil, err
	}
	runtime.KeepAlive(&ta)
	return g, nil
}

// Algorithms returns how many of cuBLASLt's ranked algorithms for the
// product (up to max) can run it; algorithm 0 is the library's first
// choice. The list is asked for once.
func (g *LtGemm) Algorithms(max int) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.heuristicsLoaded {
		return len(g.algos), nil
	}
	res := make([]ltHeuristic, max)
	var n int32
	err := g.lt.call("cublasLtMatmulAlgoGetHeuristic", ltLib.heuristic, g.lt.h, g.desc, g.a, g.b, g.d, g.d, g.pref,
		uintptr(max), uintptr(unsafe.Pointer(&res[0])), uintptr(unsafe.Pointer(&n)))
	if err != nil {
		return 0, err
	}
	for _, r := range res[:n] {
		if r.state == 0 && r.workspaceSize <= ltWorkspace {
			g.algos = append(g.algos, r)
		}
	}
	g.heuristicsLoaded = true
	if len(g.algos) == 0 {
		return 0, fmt.Errorf("cuda: cuBLASLt has no algorithm for a %d×%d×%d float32 product", g.M, g.N, g.K)
	}
	return len(g.algos), nil
}

// Run queues D = A·B (+ bias, for the LtBias epilogue) on s with algorithm
// algo (an index below Algorithms).
func (g *LtGemm) Run(s *Stream, algo int, a, b, d, bias DevicePtr) error {
	if _, err := g.Algorithms(8); err != nil {
		return err
	}
	if algo < 0 || algo >= len(g.algos) {
		return fmt.Errorf("cuda: LtGemm.Run: algorithm %d of %d", algo, len(g.algos))
	}
	defer s.exit(s.enter())
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epilogue == LtBias && bias != g.bias {
		p := uint64(bias)
		if err := g.lt.call("cublasLtMatmulDescSetAttribute", ltLib.descSetAttr, g.desc, ltDescBiasPointer,
			uintptr(unsafe.Pointer(&p)), 8); err != nil {
			return err
		}
		g.bias = bias
	}
	err := g.lt.call("cublasLtMatmul", ltLib.matmul, g.lt.h, g.desc, uintptr(unsafe.Pointer(&g.alpha)),
		uintptr(b), g.a, uintptr(a), g.b, uintptr(unsafe.Pointer(&g.beta)), uintptr(d), g.d, uintptr(d), g.d,
		uintptr(unsafe.Pointer(&g.algos[algo].algo)), uintptr(g.lt.ws), ltWorkspace, s.handle())
	runtime.KeepAlive(g)
	return err
}
