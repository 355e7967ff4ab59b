package inductor

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// GemmKernel is a float32 matrix product for few rows (a "skinny" A, as in
// inference at small batch), out = epilogue(A·B), with the pointwise
// epilogue of the product (a bias add, an activation) applied before the
// only store, so the product is never written to memory and read back.
//
// A is M×K with unit column stride (row stride lda); B is K×N read as
// column n at B + n·ldb with unit stride along k, which is how x·Wᵀ reads
// a Linear weight W [N, K]. Each warp computes NT columns of MT rows: its
// lanes split k, hold MT×NT partial sums, and add them across the warp at
// the end; grid.y walks the row tiles. The weight, the large operand at
// small M, is streamed once per row tile with 128-bit loads.
type GemmKernel struct {
	// Epilogue computes the stored value from the product (operand
	// Product) and the other operands, each read at [m, n] through two
	// strides (0 for a broadcast dim); nil stores the product as is.
	Epilogue *ir.Expr
	Product  int
	Operands []Operand // of the epilogue; Operands[Product] is the product (float32)
	Compute  ir.Kind
	Out      ir.DType
	// Label names the epilogue uniquely (a hash of it); Doc describes it in
	// the source.
	Label, Doc string
	Config     GemmConfig
	// In is A's and B's storage type: Float32 (the zero value means
	// Float32), BFloat16 or Float16. Products of 16-bit operands add in
	// float32 and run only in the warp kernel (see Takes), which streams
	// B, the weight, with 16-byte loads of eight elements.
	In ir.DType
	// Prologue, when set, is the row region that computes A from its
	// inputs (gemm_prologue.go), run by the warp kernel's blocks into
	// PrologueBytes of dynamic shared memory; A's parameter is unused.
	Prologue *RowKernel
	// ReadyA is set when A, like B, is what no kernel ahead of this one
	// may still be writing (an input or a constant, written in place if
	// at all only after its readers): the warp and tensor-core kernels
	// then read A before griddepcontrol.wait too, and wait only before
	// their stores and the epilogue's operands. Launched as a
	// programmatic dependent, the whole product then overlaps the kernel
	// ahead, not only the weight loads. Not with a Prologue, which
	// computes A from its inputs, nor the tiled kernel, which never waits.
	ReadyA bool
}

// in is k's operand type.
func (k *GemmKernel) in() ir.DType {
	if k.In == ir.Invalid {
		return ir.Float32
	}
	return k.In
}

// Gemm16MaxM is the most rows a GemmKernel of 16-bit operands is meant
// for: beyond it a tensor-core library GEMM wins.
const Gemm16MaxM = 16

// Takes reports whether c can compute a product of operands stored as
// in: any launch shape for float32; for bfloat16 and float16, the warp
// kernel only.
func (c GemmConfig) Takes(in ir.DType) bool {
	switch in {
	case ir.Float32, ir.Invalid:
		return true
	case ir.BFloat16, ir.Float16:
		return c.Split == 0 && !c.Tensor || c.Tensor && c.Split == 1
	}
	return false
}

// ChooseGemm16Config picks the launch shape for an M×N product of
// 16-bit operands (M ≤ Gemm16MaxM) with inner dimension k on a device
// with sms multiprocessors of compute capability arch (80 for sm_80).
// The tensor-core kernel, where it Fits (vec: the operands allow 16-byte
// loads) on sm_80 and later, for 8 rows and more, where the warp kernel's
// float32 multiply-adds bound it, and for 2 rows and more when k is short
// enough (tensor16Prefetch) that every weight load of a warp is issued
// before griddepcontrol.wait: 8 warps splitting k, and the widest column
// group (4, 2 or 1 tiles of 8 columns) that still occupies half the
// multiprocessors (the weight is in flight at once; more blocks measured
// no faster). Else the warp kernel as ChooseGemmConfig picks it for up to
// 16 rows (row tiles of 16 beyond).
func ChooseGemm16Config(m, n, k, sms, arch int, vec bool) GemmConfig {
	c := GemmConfig{Tensor: true, Warps: tensor16Warps, Split: 1}
	if m <= 8 {
		c.MT = 8
	}
	if arch < 80 || !c.Fits(k, vec) || m < 2 || m < 8 && k > tensor16Prefetch || m > Gemm16MaxM {
		return warpConfig(min(m, Gemm16MaxM), n, sms)
	}
	for _, nt := range []int{4, 2, 1} {
		c.NT = nt
		if x, y, _ := c.Grid(m, n); 2*x*y >= sms {
			break
		}
	}
	return c
}

// The 16-bit tensor-core kernel: a warp's step loads tensor16U chunks of
// 32 elements of each weight row, two steps ahead of griddepcontrol.wait,
// in tensor16Warps warps (ChooseGemm16Config's). tensor16Prefetch is the
// longest inner dimension whose weight loads its warps all issue before
// the wait.
const (
	tensor16U        = 4
	tensor16Warps    = 8
	tensor16Prefetch = 2 * tensor16U * 32 * tensor16Warps
)

// GemmConfig is a GemmKernel's launch shape: a warp kernel (Split 0), or
// a tiled kernel (Split > 0).
//
// The warp kernel has each warp compute NT columns of MT rows, its lanes
// splitting k; it suits very few rows. The tiled kernel stages 32×32
// tiles of A and 64×32 tiles of B in shared memory, each of its 128
// threads computing 4×4 outputs of a 32×64 block, and splits k across
// Split blocks (grid.z): each writes its partial sums to a workspace, and
// the last block of a tile to finish adds them in order (so results do not
// depend on timing) and applies the epilogue.
type GemmConfig struct {
	Warps int // warps per block
	NT    int // columns per warp
	MT    int // rows per block (grid.y is ⌈M/MT⌉); a 16-bit tensor-core kernel: 8 (up to 8 rows) or 16 (0)
	Split int // tiled: blocks sharing each output tile's k range
	// Cluster makes the Split blocks of a tile one thread block cluster
	// (sm_90 and later, Split ≤ 8) that adds its partial sums through
	// distributed shared memory instead of a workspace.
	Cluster bool
	// TileN is the tiled kernel's block width in columns: 64 (0 means 64)
	// or 32, which gives twice the blocks.
	TileN int
	// Tensor selects the tensor-core kernel (sm_90 and later): each warp
	// computes 32 rows × 8·NT columns with mma.sync on TF32 operands
	// split in two (hi + lo, accumulating hi·lo + lo·hi + hi·hi in
	// float32), which keeps float32's accuracy; the Warps warps of a block
	// split its k range, and Split blocks (a cluster) split k further. It
	// reads whole 16-byte vectors only (see Fits).
	Tensor bool
}

// Fits reports whether c can compute a product of inner dimension k
// whose operands are vectorizable (vec: k, the row strides and the base
// addresses allow 16-byte loads): the tensor-core kernel needs vec and k
// a multiple of 16; the others take any product.
func (c GemmConfig) Fits(k int, vec bool) bool {
	return !c.Tensor || vec && k%16 == 0
}

// tileN is c's block width.
func (c GemmConfig) tileN() int {
	if c.TileN == 0 {
		return gemmTileN
	}
	return c.TileN
}

func (c GemmConfig) String() string {
	if c.Tensor {
		m8 := ""
		if c.MT == 8 {
			m8 = "m8"
		}
		return fmt.Sprintf("x%dw%ds%d%s", c.NT, c.Warps, max(c.Split, 1), m8)
	}
	suffix := ""
	if c.tileN() != gemmTileN {
		suffix = fmt.Sprintf("n%d", c.tileN())
	}
	if c.Cluster {
		return fmt.Sprintf("c%d%s", c.Split, suffix)
	}
	if c.Split > 0 {
		return fmt.Sprintf("t%d%s", c.Split, suffix)
	}
	return fmt.Sprintf("w%dn%dm%d", c.Warps, c.NT, c.MT)
}

// Tiled kernels' block tile.
const (
	gemmTileM = 32
	gemmTileN = 64
)

// Grid is the launch grid for an M×N output.
func (c GemmConfig) Grid(m, n int) (x, y, z int) {
	if c.Tensor {
		return (n + 8*c.NT - 1) / (8 * c.NT), (m + 31) / 32, max(c.Split, 1)
	}
	if c.Split > 0 {
		return (n + c.tileN() - 1) / c.tileN(), (m + gemmTileM - 1) / gemmTileM, c.Split
	}
	cols := c.Warps * c.NT
	return (n + cols - 1) / cols, (m + c.MT - 1) / c.MT, 1
}

// Threads is the block size.
func (c GemmConfig) Threads() int {
	if c.Split > 0 && !c.Tensor {
		return 128
	}
	return c.Warps * 32
}

// Workspace is the float32 partial sums and tile counters a tiled launch
// for an M×N output needs (zero for others). Counters must be zero before
// the launch; the kernel leaves them zero.
func (c GemmConfig) Workspace(m, n int) (partials, counters int) {
	if c.Split <= 1 || c.Cluster || c.Tensor {
		return 0, 0
	}
	x, y, _ := c.Grid(m, n)
	return c.Split * m * n, x * y
}

// GemmMaxM is the most rows a GemmKernel is meant for: beyond it a tiled
// library GEMM, which reuses each loaded element across many rows, wins.
const GemmMaxM = 64

// ChooseGemmConfig picks the launch shape for an M×N output with inner
// dimension k on a device with sms multiprocessors of compute capability
// arch (90 for sm_90). Up to 8 rows (4 where the operands do not allow
// 16-byte loads, vec false; 16 where the tensor-core kernel does not Fit):
// the warp kernel, every row in one row tile
// (MT, a power of two), so the weight is read once. One row: the widest
// column group a warp (4, 2 or 1) that still gives every multiprocessor
// two blocks of 4 warps. More: 4 columns a warp, each of A's vectors
// feeding four columns' sums, in blocks of 4 warps, or 2 where that
// gives too few blocks for two a multiprocessor. 9 to 16 rows on sm_90
// and later, where it Fits: the tensor-core kernel, 8 warps of 32 columns
// and k split across two blocks. More rows: the tensor-core kernel, 4 warps of 16
// columns, with k split across a cluster of up to 8 blocks while there
// are fewer than 4 blocks per multiprocessor and each warp keeps at least
// two 16-wide steps of k. (8 warps and one block per multiprocessor,
// which leaves more room for a dependent launch, measured slower over
// the 4-layer MLP.) Else the tiled kernel, split along k until there
// are about two blocks per multiprocessor, each with at least four 32-wide
// steps of k before splitting.
func ChooseGemmConfig(m, n, k, sms, arch int, vec bool) GemmConfig {
	if m <= 4 || m <= 8 && vec {
		return warpConfig(m, n, sms)
	}
	if m <= 16 && arch >= 90 && (GemmConfig{Tensor: true}).Fits(k, vec) {
		// Up to 16 rows the tensor-core kernel's lanes hold half as many
		// sums as 16-row warp tiles, which run short of registers: 8 warps
		// of 32 columns, k split across a pair of blocks.
		return GemmConfig{Tensor: true, NT: 4, Warps: 8, Split: 2}
	}
	if m <= 16 && vec {
		return warpConfig(m, n, sms)
	}
	if arch >= 90 && (GemmConfig{Tensor: true}).Fits(k, vec) {
		c := GemmConfig{Tensor: true, NT: 2, Warps: 4, Split: 1}
		x, y, _ := c.Grid(m, n)
		steps := k / 16
		for c.Split < 8 && x*y*c.Split < 4*sms && steps >= 2*2*c.Split*c.Warps {
			c.Split *= 2
		}
		return c
	}
	c := GemmConfig{Split: 1}
	x, y, _ := c.Grid(m, n)
	for c.Split < 32 && x*y*c.Split*2 <= 2*sms && (k+31)/32 >= 8*c.Split {
		c.Split *= 2
	}
	c.Cluster = arch >= 90 && c.Split > 1 && c.Split <= 8
	return c
}

// warpConfig is the warp kernel's launch shape for an M×N output (M ≤
// 16) on sms multiprocessors, as ChooseGemmConfig describes it.
func warpConfig(m, n, sms int) GemmConfig {
	c := GemmConfig{Warps: 4, MT: 1}
	for c.MT < m {
		c.MT *= 2
	}
	if c.MT > 1 {
		c.NT = 4
		if x, y, _ := c.Grid(m, n); x*y < 2*sms {
			c.Warps = 2
		}
		return c
	}
	for _, nt := range []int{4, 2, 1} {
		c.NT = nt
		if x, y, _ := c.Grid(m, n); x*y >= 2*sms {
			break
		}
	}
	return c
}

// GemmCandidates are the launch shapes an autotuner tries for M rows on
// a device of compute capability arch (90 for sm_90).
func GemmCandidates(m, arch int) []GemmConfig {
	var cs []GemmConfig
	for _, w := range []int{2, 4, 8} {
		for _, nt := range []int{1, 2, 4} {
			for _, mt := range []int{1, 2, 4, 8, 16} {
				if mt > 1 && mt/2 >= m || mt*nt > 64 {
					continue
				}
				cs = append(cs, GemmConfig{Warps: w, NT: nt, MT: mt})
			}
		}
	}
	for _, tn := range []int{64, 32} {
		for _, split := range []int{1, 2, 4, 8, 16, 32} {
			cs = append(cs, GemmConfig{Split: split, TileN: tn})
			if arch >= 90 && split > 1 && split <= 8 {
				cs = append(cs, GemmConfig{Split: split, Cluster: true, TileN: tn})
			}
		}
	}
	if arch >= 90 {
		for _, nt := range []int{1, 2, 4} {
			for _, w := range []int{1, 2, 4, 8} {
				for _, split := range []int{1, 2, 4, 8} {
					c := GemmConfig{Tensor: true, NT: nt, Warps: w, Split: split}
					if m <= 8 {
						c.MT = 8 // the 16-bit kernel's 8-row form, as ChooseGemm16Config picks it
					}
					if c.checkTensor() == nil {
						cs = append(cs, c)
					}
				}
			}
		}
	}
	return cs
}

// Name is the kernel's entry point, unique for its epilogue, types and
// launch shape.
func (k *GemmKernel) Name() string {
	var b strings.Builder
	b.WriteString("gc_gemm_")
	if k.Epilogue == nil {
		b.WriteString("plain")
	} else {
		b.WriteString(k.Label)
		for i, o := range k.Operands {
			if i != k.Product {
				b.WriteString("_" + o.DType.String())
			}
		}
		b.WriteString("_" + k.Compute.String())
	}
	if in := k.in(); in != ir.Float32 {
		b.WriteString("_" + in.String())
	}
	b.WriteString(k.prologueName())
	if k.readyA() {
		b.WriteString("_readya")
	}
	b.WriteString("_to_" + k.Out.String() + "_" + k.Config.String())
	return b.String()
}

// Source is the kernel's CUDA C source.
func (k *GemmKernel) Source() (string, error) {
	body, err := k.body()
	if err != nil {
		return "", err
	}
	c := k.Config
	var b strings.Builder
	fmt.Fprintf(&b, "// gocompile GEMM kernel: out[m, n] = epilogue(sum over k of A[m, k]·B[k, n]), %v operands added in float32, launch shape %v\n", k.in(), c)
	if k.Doc != "" {
		for _, l := range strings.Split(k.Doc, "\n") {
			fmt.Fprintf(&b, "// %s\n", l)
		}
	}
	return b.String() + cudaPrelude + body, nil
}

// body is the kernel's source after the prelude.
func (k *GemmKernel) body() (string, error) {
	c := k.Config
	if c.Split <= 0 && !c.Tensor && (c.Warps < 1 || c.NT < 1 || c.MT < 1) {
		return "", fmt.Errorf("gemm: bad launch shape %v", c)
	}
	if !c.Takes(k.in()) {
		return "", fmt.Errorf("gemm: launch shape %v does not take %v operands (the warp kernel does)", c, k.in())
	}
	var b strings.Builder

	// The epilogue, once, as a device function of the product and the
	// other operands.
	outKind := ir.F32
	var params, loads []string
	if k.Epilogue != nil {
		argKinds := make([]ir.Kind, len(k.Operands))
		var fargs []string
		for i, o := range k.Operands {
			argKinds[i] = o.Kind
			fargs = append(fargs, fmt.Sprintf("%s a%d", kindC(o.Kind), i))
		}
		pk, ok, err := k.Epilogue.ParamKinds(argKinds, k.Compute)
		if err == nil && len(pk) > 0 {
			err = fmt.Errorf("the epilogue takes op parameters")
		}
		if err != nil {
			return "", fmt.Errorf("gemm %s: %w", k.Label, err)
		}
		e, err := k.Epilogue.C(func(i int) string { return fmt.Sprintf("a%d", i) }, nil, argKinds, k.Compute)
		if err != nil {
			return "", fmt.Errorf("gemm %s: %w", k.Label, err)
		}
		outKind = ok
		fmt.Fprintf(&b, "\n// epilogue: a%d is the product; %v\n", k.Product, k.Epilogue)
		fmt.Fprintf(&b, "__device__ __forceinline__ %s epilogue(%s) {\n  return %s;\n}\n", kindC(ok), strings.Join(fargs, ", "), e)
		for i, o := range k.Operands {
			if i == k.Product {
				loads = append(loads, fmt.Sprintf("(%s)acc[i][j]", kindC(o.Kind)))
				continue
			}
			params = append(params, fmt.Sprintf("const %s* __restrict__ x%d, long long x%dm, long long x%dn", storageC(o.DType), i, i, i))
			loads = append(loads, loadC(fmt.Sprintf("x%d[(long long)m * x%dm + (long long)n * x%dn]", i, i, i), o.DType, o.Kind))
		}
	}
	if k.Prologue != nil {
		if c.Tensor || c.Split != 0 {
			return "", fmt.Errorf("gemm: a prologue runs in the warp kernel, not launch shape %v", c)
		}
		if k.Prologue.Out != k.in() || k.Prologue.Expr == nil {
			return "", fmt.Errorf("gemm: a prologue must compute A per element, as %v (it gives %v)", k.in(), k.Prologue.Out)
		}
		params = append(params, k.prologueParams()...)
		b.WriteString(k.prologueHelpers())
	}
	value := "acc[i][j]"
	if k.Epilogue != nil {
		value = "epilogue(" + strings.Join(loads, ", ") + ")"
	}
	if c.Tensor && k.in() != ir.Float32 {
		if err := c.checkTensor(); err != nil {
			return "", err
		}
		k.tensor16Body(&b, params, storeC(value, outKind, k.Out))
		return b.String(), nil
	}
	if c.Tensor {
		if err := c.checkTensor(); err != nil {
			return "", err
		}
		k.tensorBody(&b, params, storeC(value, outKind, k.Out))
		return b.String(), nil
	}
	if c.Split > 0 {
		if c.Cluster && (c.Split != 2 && c.Split != 4 && c.Split != 8) {
			return "", fmt.Errorf("gemm: a cluster of %d blocks (2, 4 or 8: each block adds an equal share of the tile)", c.Split)
		}
		if c.tileN() != 32 && c.tileN() != 64 {
			return "", fmt.Errorf("gemm: tile width %d (32 or 64)", c.tileN())
		}
		k.tiledBody(&b, params, storeC(value, outKind, k.Out))
		return b.String(), nil
	}

	if err := k.warpBody(&b, params, storeC(value, outKind, k.Out)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// warpBody writes the warp kernel; store is the expression stored for
// acc[i][j] at [m, n]. Each lane loads VE consecutive elements (16 bytes)
// of a row of A and of a column of B at a time when vec is set, else one.
//
// The weight B streams in groups of G vectors a lane, with the next
// group's loads in flight while a group's products are computed. The
// first two groups are loaded before griddepcontrol.wait: under a
// programmatic dependent launch (a product replayed from a CUDA graph
// after a kernel that calls gc_launch_dependents) they stream while the
// kernel ahead finishes, and a product whose weight a lane holds in two
// groups (2048 bfloat16 elements a row at one column a warp) waits only for
// A. A and the epilogue's operands are read with plain loads, never
// through the non-coherent path, and after the wait (A before it with
// ReadyA): under a dependent launch the kernel ahead writes them while
// this one starts.
//
// With a prologue the block fills its rows of A after the wait (every
// warp takes part, so none returns early: warps past N compute the last
// columns again and store nothing), and only the vector path runs: A's
// rows in shared memory are whole vectors.
func (k *GemmKernel) warpBody(b *strings.Builder, params []string, store string) error {
	c, in := k.Config, k.in()
	ve, groups := 16/in.Size(), k.warpGroup()
	early, prologue, scalar := "if (n0 >= N) return;", "", "gc_grid_wait();"
	wait, storeWait := k.waits("B", "    ")
	if k.readyA() {
		scalar = "// A is ready too: the wait comes before the stores."
	}
	if k.Prologue != nil {
		code, err := k.prologueC()
		if err != nil {
			return err
		}
		early, prologue = "// Every warp fills A (no early return).", code
		scalar = "gc_grid_wait(); // never run: a prologue is launched with vec only"
	}
	b.WriteString(weightLoadC)
	fmt.Fprintf(b, `
// gc_xraw loads the 16-byte vector of A at p with a plain load, cached in
// L1 for the block's other warps: after griddepcontrol.wait the kernel
// ahead's writes are visible to plain loads (not to the non-coherent
// path, which assumes data fixed for the kernel's whole life).
__device__ __forceinline__ uint4 gc_xraw(const void* p) { return *(const uint4*)p; }

// gc_vcvt converts the VE elements of the vector q to floats.
%[9]s

extern "C" __global__ void __launch_bounds__(%[1]d) %[2]s(
    const %[10]s* A, long long lda, const %[10]s* __restrict__ B, long long ldb,
    int M, int N, int K, int vec, %[3]s* __restrict__ out, long long ldo%[4]s) {
  const int MT = %[5]d, NT = %[6]d, VE = %[11]d, G = %[12]d;
  const int lane = threadIdx.x & 31;
  const int n0 = (blockIdx.x * %[7]d + (threadIdx.x >> 5)) * NT;
  const int m0 = blockIdx.y * MT;
  gc_launch_dependents();
  %[15]s
  // Rows and columns past the end read the last one: their sums are
  // dropped at the store, and the loop stays free of branches.
  const %[10]s* a[MT];
  const %[10]s* b[NT];
  #pragma unroll
  for (int i = 0; i < MT; i++) a[i] = A + (long long)min(m0 + i, M - 1) * lda;
  #pragma unroll
  for (int j = 0; j < NT; j++) b[j] = B + (long long)min(n0 + j, N - 1) * ldb;
  float acc[MT][NT];
  #pragma unroll
  for (int i = 0; i < MT; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++) acc[i][j] = 0.f;
  if (vec) { // K, lda, ldb multiples of VE and A, B 16-byte aligned
    // Group g of a lane is its vectors at k0 + 32·VE·e, e < G, from
    // k0 = lane·VE + 32·VE·G·g; vectors past K read as zeros.
    const int step = 32 * VE;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 wc[G][NT], wn[G][NT];
    #pragma unroll
    for (int e = 0; e < G; e++) {
      const int kc = lane * VE + step * e, kn = kc + step * G;
      #pragma unroll
      for (int j = 0; j < NT; j++) {
        wc[e][j] = kc < K ? gc_wraw(b[j] + kc) : zero;
        wn[e][j] = kn < K ? gc_wraw(b[j] + kn) : zero;
      }
    }
    %[18]s
%[16]s    for (int k0 = lane * VE; k0 < K; k0 += step * G) {
      uint4 xv[G][MT];
      #pragma unroll
      for (int e = 0; e < G; e++)
        #pragma unroll
        for (int i = 0; i < MT; i++) xv[e][i] = k0 + step * e < K ? gc_xraw(a[i] + k0 + step * e) : zero;
      #pragma unroll
      for (int e = 0; e < G; e++) {
        float w[NT][VE];
        #pragma unroll
        for (int j = 0; j < NT; j++) gc_vcvt(wc[e][j], w[j]);
        #pragma unroll
        for (int i = 0; i < MT; i++) {
          float x[VE];
          gc_vcvt(xv[e][i], x);
          #pragma unroll
          for (int j = 0; j < NT; j++)
            #pragma unroll
            for (int q = 0; q < VE; q++) acc[i][j] = fmaf(x[q], w[j][q], acc[i][j]);
        }
      }
      // The group after next: its loads are in flight during the next
      // group's products.
      #pragma unroll
      for (int e = 0; e < G; e++) {
        const int kn = k0 + step * (2 * G + e);
        #pragma unroll
        for (int j = 0; j < NT; j++) {
          wc[e][j] = wn[e][j];
          wn[e][j] = kn < K ? gc_wraw(b[j] + kn) : zero;
        }
      }
    }
  } else {
    %[17]s
    for (int k = lane; k < K; k += 32) {
      float w[NT];
      #pragma unroll
      for (int j = 0; j < NT; j++) w[j] = %[13]s;
      #pragma unroll
      for (int i = 0; i < MT; i++) {
        const float x = %[14]s;
        #pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j] = fmaf(x, w[j], acc[i][j]);
      }
    }
  }
%[19]s  // Sum each partial across the warp; every lane ends with every sum.
  #pragma unroll
  for (int i = 0; i < MT; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int s = 16; s > 0; s >>= 1) acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], s);
  // Lane (i·NT + j) %% 32 stores [m0 + i, n0 + j].
  #pragma unroll
  for (int i = 0; i < MT; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++) {
      const int m = m0 + i, n = n0 + j;
      if (((i * NT + j) & 31) == lane && m < M && n < N) {
        out[(long long)m * ldo + n] = %[8]s;
      }
    }
}
`, c.Threads(), k.Name(), storageC(k.Out), unrestrictedParams(params), c.MT, c.NT, c.Warps,
		store, vcvtC(in), storageC(in), ve, groups,
		loadC("__ldg(b[j] + k)", in, ir.F32), loadC("a[i][k]", in, ir.F32), early, prologue, scalar, wait, storeWait)
	return nil
}

// warpGroup is how many vectors of each of its columns a lane of the warp
// kernel loads in a group: 4 for 16-bit weights, which stream at small M
// where nothing else hides their latency, 2 for float32, and at most 8
// vectors a group in all (two groups are held in registers).
func (k *GemmKernel) warpGroup() int {
	groups := 2
	if k.in() != ir.Float32 {
		groups = 4
	}
	for groups*k.Config.NT > 8 && groups > 1 {
		groups /= 2
	}
	return groups
}

// PrefetchLoads is how many 16-byte weight loads a lane of the kernel
// issues before griddepcontrol.wait: two groups of the warp kernel, two
// steps of 4 chunks of the 16-bit tensor-core kernel, one step of the
// float32 one, for each of its columns (tiles); none for the tiled kernel.
func (k *GemmKernel) PrefetchLoads() int {
	c := k.Config
	switch {
	case c.Tensor && k.in() != ir.Float32:
		return 2 * tensor16U * c.NT
	case c.Tensor:
		return c.NT
	case c.Split == 0:
		return 2 * k.warpGroup() * c.NT
	}
	return 0
}

// vcvtC is the C of gc_vcvt for operands stored as dt.
func vcvtC(dt ir.DType) string {
	switch dt {
	case ir.BFloat16: // a bfloat16 is the high half of a float
		return `__device__ __forceinline__ void gc_vcvt(uint4 q, float* v) {
  const unsigned int u[4] = {q.x, q.y, q.z, q.w};
  #pragma unroll
  for (int e = 0; e < 4; e++) {
    v[2 * e] = __uint_as_float(u[e] << 16);
    v[2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
  }
}`
	case ir.Float16:
		return `__device__ __forceinline__ void gc_vcvt(uint4 q, float* v) {
  const unsigned int u[4] = {q.x, q.y, q.z, q.w};
  #pragma unroll
  for (int e = 0; e < 4; e++) {
    v[2 * e] = gc_ld_half((gc_half)(u[e] & 0xffffu));
    v[2 * e + 1] = gc_ld_half((gc_half)(u[e] >> 16));
  }
}`
	}
	return `__device__ __forceinline__ void gc_vcvt(uint4 q, float* v) {
  v[0] = __uint_as_float(q.x); v[1] = __uint_as_float(q.y); v[2] = __uint_as_float(q.z); v[3] = __uint_as_float(q.w);
}`
}

// tiledBody writes the tiled kernel; store is the expression stored for
// acc[i][j] at [m, n].
func (k *GemmKernel) tiledBody(b *strings.Builder, params []string, store string) {
	fmt.Fprintf(b, `
// gc_gemm_load loads k..k+7 of A's row and of B's column (or two, Two)
// (zeros past kEnd).
template <bool Two> __device__ __forceinline__ void gc_gemm_load(const float* ar, const float* br0, const float* br1, int k, int kEnd, int vec,
    float4 (&a)[2], float4 (&b0)[2], float4 (&b1)[2]) {
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    const int kh = k + 4 * h;
    if (vec && kh < kEnd) { // K a multiple of 4: the whole vector is in range
      a[h] = __ldg((const float4*)(ar + kh));
      b0[h] = __ldg((const float4*)(br0 + kh));
      if constexpr (Two) b1[h] = __ldg((const float4*)(br1 + kh));
      continue;
    }
    float va[4], vb0[4], vb1[4];
    #pragma unroll
    for (int q = 0; q < 4; q++) {
      const bool in = kh + q < kEnd;
      va[q] = in ? __ldg(ar + kh + q) : 0.f;
      vb0[q] = in ? __ldg(br0 + kh + q) : 0.f;
      vb1[q] = in && Two ? __ldg(br1 + kh + q) : 0.f;
    }
    a[h] = make_float4(va[0], va[1], va[2], va[3]);
    b0[h] = make_float4(vb0[0], vb0[1], vb0[2], vb0[3]);
    b1[h] = make_float4(vb1[0], vb1[1], vb1[2], vb1[3]);
  }
}

// gc_gemm_put stores the 8 values of v from k index lk of row (or
// column) r of a [k][r] tile.
template <int W> __device__ __forceinline__ void gc_gemm_put(float (*s)[W], int lk, int r, const float4 (&v)[2]) {
  #pragma unroll
  for (int h = 0; h < 2; h++) {
    s[lk + 4 * h][r] = v[h].x; s[lk + 4 * h + 1][r] = v[h].y;
    s[lk + 4 * h + 2][r] = v[h].z; s[lk + 4 * h + 3][r] = v[h].w;
  }
}

// Block (x, y, z) computes rows 32y.., columns %[8]dx.. of the product
// over its share of k (split z of %[5]d); thread (ty, tx) holds rows
// 4ty..4ty+3 and columns %[8]d/16 tx.. of the block.
extern "C" __global__ void __launch_bounds__(128) %[7]s%[1]s(
    const float* __restrict__ A, long long lda, const float* __restrict__ B, long long ldb,
    int M, int N, int K, int vec, %[2]s* __restrict__ out, long long ldo,
    float* __restrict__ ws, unsigned int* __restrict__ counters%[3]s) {
  constexpr int BN = %[8]d, TN = BN / 16;
  __align__(16) __shared__ float As[32][36];     // [k][m], rows padded, 16-byte aligned
  __align__(16) __shared__ float Bs[32][BN + 4]; // [k][n]
  const int t = threadIdx.x, tx = t & 15, ty = t >> 4;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * 32;
  const int S = %[5]d, z = blockIdx.z; // S is gridDim.z
  const int chunks = (K + 31) / 32, per = (chunks + S - 1) / S;
  const int kBegin = min(K, z * per * 32), kEnd = min(K, kBegin + per * 32);
  // Loads: thread t brings k lk..lk+7 of A's row lr and of B's column lr
  // (and lr+32 when BN is 64); rows and columns past the end read the
  // last one.
  const int lr = t >> 2, lk = (t & 3) * 8;
  const float* ar = A + (long long)min(m0 + lr, M - 1) * lda;
  const float* br0 = B + (long long)min(n0 + lr, N - 1) * ldb;
  const float* br1 = B + (long long)min(n0 + lr + 32, N - 1) * ldb;
  float acc[4][TN];
  #pragma unroll
  for (int i = 0; i < 4; i++)
    #pragma unroll
    for (int j = 0; j < TN; j++) acc[i][j] = 0.f;
  // The loads of the next step of k are in flight while this one's
  // products are computed.
  float4 a[2], b0[2], b1[2];
  gc_gemm_load<BN == 64>(ar, br0, br1, kBegin + lk, kEnd, vec, a, b0, b1);
  for (int k0 = kBegin; k0 < kEnd; k0 += 32) {
    gc_gemm_put(As, lk, lr, a);
    gc_gemm_put(Bs, lk, lr, b0);
    if constexpr (BN == 64) gc_gemm_put(Bs, lk, lr + 32, b1);
    __syncthreads();
    if (k0 + 32 < kEnd) gc_gemm_load<BN == 64>(ar, br0, br1, k0 + 32 + lk, kEnd, vec, a, b0, b1);
    #pragma unroll
    for (int kk = 0; kk < 32; kk++) {
      const float4 av = *(const float4*)&As[kk][ty * 4];
      const float ar4[4] = {av.x, av.y, av.z, av.w};
      float br4[TN];
      if constexpr (TN == 4) {
        const float4 bv = *(const float4*)&Bs[kk][tx * 4];
        br4[0] = bv.x; br4[1] = bv.y; br4[2] = bv.z; br4[3] = bv.w;
      } else {
        const float2 bv = *(const float2*)&Bs[kk][tx * 2];
        br4[0] = bv.x; br4[1] = bv.y;
      }
      #pragma unroll
      for (int i = 0; i < 4; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = fmaf(ar4[i], br4[j], acc[i][j]);
    }
    __syncthreads();
  }
%[6]s  #pragma unroll
  for (int i = 0; i < 4; i++)
    #pragma unroll
    for (int j = 0; j < TN; j++) {
      const int m = m0 + ty * 4 + i, n = n0 + tx * TN + j;
      if (m < M && n < N) out[(long long)m * ldo + n] = %[4]s;
    }
}
`, k.Name(), storageC(k.Out), strings.Join(prefixAll(", ", params), ""), store, k.Config.Split, splitReduce(k.Config, store), clusterDims(k.Config), k.Config.tileN())
}

// clusterDims is the kernel attribute making a tile's split blocks one
// cluster.
func clusterDims(c GemmConfig) string {
	if !c.Cluster {
		return ""
	}
	return fmt.Sprintf("__cluster_dims__(1, 1, %d) ", c.Split)
}

// splitReduce is how a tiled kernel's split blocks add their partial
// sums: nothing to add for one block, through distributed shared memory
// in a cluster (clusterReduce), else through the workspace.
func splitReduce(c GemmConfig, store string) string {
	switch {
	case c.Split <= 1:
		return ""
	case c.Cluster:
		return clusterReduce(store)
	}
	return workspaceReduce
}

// workspaceReduce publishes each block's partial sums to the workspace;
// the last block of the tile to finish (by the tile's counter, which it
// resets) adds all of them in split order, into acc, for the store.
const workspaceReduce = `  {
    // Publish this block's partial sums; the last block of the tile to
    // finish adds all of them, in split order.
    __shared__ unsigned int last;
    #pragma unroll
    for (int i = 0; i < 4; i++)
      #pragma unroll
      for (int j = 0; j < TN; j++) {
        const int m = m0 + ty * 4 + i, n = n0 + tx * TN + j;
        if (m < M && n < N) ws[((long long)z * M + m) * N + n] = acc[i][j];
      }
    __threadfence();
    __syncthreads();
    if (t == 0) last = atomicAdd(&counters[blockIdx.y * gridDim.x + blockIdx.x], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    #pragma unroll
    for (int i = 0; i < 4; i++)
      #pragma unroll
      for (int j = 0; j < TN; j++) {
        const int m = m0 + ty * 4 + i, n = n0 + tx * TN + j;
        float p[S];
        #pragma unroll
        for (int s = 0; s < S; s++) p[s] = m < M && n < N ? __ldcg(&ws[((long long)s * M + m) * N + n]) : 0.f;
        float v = 0.f;
        #pragma unroll
        for (int s = 0; s < S; s++) v += p[s];
        acc[i][j] = v;
      }
    if (t == 0) counters[blockIdx.y * gridDim.x + blockIdx.x] = 0; // ready for the next launch
  }
`

// clusterReduce is the tiled kernel's reduction through distributed
// shared memory: each block leaves its partial sums in its shared memory
// for clusterSum to add.
func clusterReduce(store string) string {
	return `  {
    __shared__ float red[32 * BN];
    #pragma unroll
    for (int i = 0; i < 4; i++)
      #pragma unroll
      for (int j = 0; j < TN; j++) red[(ty * 4 + i) * BN + tx * TN + j] = acc[i][j];
` + clusterSum("red", "32 * BN", "128", "v", store) + `    return;
  }
`
}

// clusterSum adds the partial tiles (tile floats each, in array sum of
// every block's shared memory) of a cluster of S blocks: after a cluster
// barrier, block z of the cluster adds, in block order, every block's
// values for its 1/S of the tile, threads at a time, and stores each
// (storeAt with value, an expression of the sum v); a second barrier
// keeps every block's shared memory alive until read.
func clusterSum(sum, tile, threads, value, store string) string {
	return fmt.Sprintf(`  // The sums are visible to the cluster: a fence at cluster scope, then a
  // barrier without one of its own (cheaper than the barrier's release,
  // which fences at GPU scope).
  asm volatile("fence.acq_rel.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
  unsigned base;
  asm("{ .reg .u64 g; cvta.to.shared.u64 g, %%1; cvt.u32.u64 %%0, g; }" : "=r"(base) : "l"(%[1]s));
  for (int f = z * ((%[2]s) / S) + threadIdx.x; f < (z + 1) * ((%[2]s) / S); f += %[3]s) {
    float p[S];
    #pragma unroll
    for (int s = 0; s < S; s++) {
      unsigned r;
      asm volatile("mapa.shared::cluster.u32 %%0, %%1, %%2;" : "=r"(r) : "r"(base + 4u * f), "r"(s));
      asm volatile("ld.shared::cluster.f32 %%0, [%%1];" : "=f"(p[s]) : "r"(r) : "memory");
    }
    float v = 0.f;
    #pragma unroll
    for (int s = 0; s < S; s++) v += p[s];
    const int m = m0 + f / BN, n = n0 + f %% BN;
%[4]s  }
  // Keep this block's sums alive until the cluster has read them (the
  // reads are complete: their values are stored), no ordering needed.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
`, sum, tile, threads, storeAt(value, store))
}

// storeAt is the statements of a loop body that store value, the sum at
// [m, n], through store (an expression of acc[i][j]), skipping rows and
// columns past the end.
func storeAt(value, store string) string {
	return fmt.Sprintf(`    if (m >= M || n >= N) continue;
    const float acc[1][1] = {{%s}};
    const int i = 0, j = 0;
    out[(long long)m * ldo + n] = %s;
`, value, store)
}

// weightLoadC defines gc_wraw, the kernels' load of 16 bytes of the
// weight B at p, which is read once: it bypasses L1, leaving it to A,
// which every block reads. Volatile, and coherent (not ld.global.nc): the
// loads stay ahead of griddepcontrol.wait, past which NVVM would move a
// plain load and ptxas a non-coherent one.
const weightLoadC = `
__device__ __forceinline__ uint4 gc_wraw(const void* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
`

// unrestrictedParams is the epilogue operands' params as the end of a
// parameter list (each after ", ") without __restrict__, so that they are
// read coherently, never through the non-coherent path: under a
// dependent launch the kernel ahead writes them during this kernel's life.
func unrestrictedParams(params []string) string {
	return strings.ReplaceAll(strings.Join(prefixAll(", ", params), ""), "__restrict__ ", "")
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// tensorSharedMax is the most shared memory (floats) a tensor-core block
// uses for its warps' partial tiles and their sum: 48 KiB, the static
// limit.
const tensorSharedMax = 12 * 1024

// checkTensor reports whether c is a valid tensor-core launch shape.
func (c GemmConfig) checkTensor() error {
	switch {
	case c.NT < 1 || c.NT > 8:
		return fmt.Errorf("gemm: %d column tiles per warp (1 to 8)", c.NT)
	case c.Warps < 1 || c.Warps > 16:
		return fmt.Errorf("gemm: %d warps (1 to 16)", c.Warps)
	case c.Split != 1 && c.Split != 2 && c.Split != 4 && c.Split != 8:
		return fmt.Errorf("gemm: a cluster of %d blocks (1, 2, 4 or 8)", c.Split)
	case c.Warps > 1 || c.Split > 1:
		if t := 32 * 8 * c.NT; (c.Warps+1)*t > tensorSharedMax {
			return fmt.Errorf("gemm: %d warps of %d columns need more than 48 KiB of shared memory", c.Warps, 8*c.NT)
		}
	}
	return nil
}

// tensorBody writes the tensor-core kernel; store is the expression
// stored for acc[i][j] at [m, n].
//
// Lane (g, t) of a warp (g = lane/4, t = lane%4) loads k 4t..4t+3 of A's
// rows g, g+8, g+16, g+24 and of B's columns g, g+8, ... as 16-byte
// vectors, and feeds them to m16n8k8 MMAs as k t and t+4 of two MMAs:
// the MMAs see k in a permuted order, the same for A and B, which the sum
// does not depend on. The weight loads of the first step are issued
// before griddepcontrol.wait, so under a programmatic dependent launch they
// overlap the kernel ahead; nothing the kernel ahead writes is read before
// the wait. K is a multiple of 16 and every vector aligned (Fits), so the
// loop has no bounds checks: the kernel stays within the registers that
// let its whole grid be resident at once, which measured 20% faster than
// a version with a checked path.
func (k *GemmKernel) tensorBody(b *strings.Builder, params []string, store string) {
	c := k.Config
	cluster := ""
	if c.Split > 1 {
		cluster = fmt.Sprintf("__cluster_dims__(1, 1, %d) ", c.Split)
	}
	wait, storeWait := k.waits("B", "  ")
	fmt.Fprintf(b, `
// gc_tc_ldw loads 4 floats of B, which is read once: they bypass L1,
// leaving it to A, which every block of a row tile reads. Volatile, and
// coherent (not ld.global.nc): the loads stay ahead of
// griddepcontrol.wait, past which NVVM would move a plain load and ptxas
// a non-coherent one.
__device__ __forceinline__ float4 gc_tc_ldw(const float* p) {
  float4 v;
  asm volatile("ld.global.L1::no_allocate.v4.f32 {%%0, %%1, %%2, %%3}, [%%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

// gc_tc_split splits x into TF32 parts, x ≈ hi + lo. An infinite x has
// a NaN lo, which makes its sums NaN: gc_tc_exact redoes those.
__device__ __forceinline__ void gc_tc_split(float x, unsigned& hi, unsigned& lo) {
  asm("cvt.rna.tf32.f32 %%0, %%1;" : "=r"(hi) : "f"(x));
  const float r = x - __uint_as_float(hi);
  asm("cvt.rna.tf32.f32 %%0, %%1;" : "=r"(lo) : "f"(r));
}

// gc_tc_exact is v, or, when v is NaN, A's row m times B's column n
// summed in float32 one k at a time: the split turns an infinite operand
// into NaN sums, and this gives them float32's own result (an infinity,
// or NaN where float32 has one). Rare, so it may be slow.
__device__ __noinline__ float gc_tc_exact_slow(const float* A, long long lda, const float* B, long long ldb, int K, int m, int n) {
  float s = 0.f;
  for (int k = 0; k < K; k++) s = fmaf(__ldcg(A + (long long)m * lda + k), B[(long long)n * ldb + k], s);
  return s;
}
__device__ __forceinline__ float gc_tc_exact(float v, const float* A, long long lda, const float* B, long long ldb, int K, int m, int n) {
  return v == v ? v : gc_tc_exact_slow(A, lda, B, ldb, K, m, n);
}

__device__ __forceinline__ void gc_tc_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, {%%8,%%9}, {%%0,%%1,%%2,%%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float gc_tc_at(const float4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Block (x, y, z) computes rows 32y.. and columns %[5]dx.. of the product;
// its %[6]d warps and the cluster's %[7]d blocks split k in 16-wide steps.
// A and the epilogue's operands are not __restrict__, and A is read with
// ld.global.cg: under a dependent launch the kernel ahead writes them
// while this one runs (before its griddepcontrol.wait), so the
// non-coherent read-only path, which assumes data fixed for the kernel's
// whole life, could return stale values.
extern "C" __global__ void __launch_bounds__(%[6]d * 32) %[8]s%[1]s(
    const float* A, long long lda, const float* __restrict__ B, long long ldb,
    int M, int N, int K, int vec, %[2]s* __restrict__ out, long long ldo,
    float* __restrict__ ws, unsigned int* __restrict__ counters%[3]s) {
  constexpr int NT = %[9]d, W = %[6]d, S = %[7]d, BN = 8 * NT, T = 32 * BN;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * 32, z = blockIdx.z;
  // This warp's share of k: whole 16-wide steps (K is a multiple of 16).
  const int steps = K / 16, per = (steps + S * W - 1) / (S * W);
  const int kBegin = min(K, (z * W + w) * per * 16), kw = min(K, kBegin + per * 16) - kBegin;
  // Lane (g, t) reads k 4t..4t+3 of each step; rows and columns past the
  // end read the last one, dropped at the store.
  const float* a[4];
  #pragma unroll
  for (int r = 0; r < 4; r++) a[r] = A + (long long)min(m0 + g + 8 * r, M - 1) * lda + kBegin + 4 * t;
  const float* b[NT];
  #pragma unroll
  for (int j = 0; j < NT; j++) b[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + kBegin + 4 * t;
  gc_launch_dependents();
  float acc4[2][NT][4];
  #pragma unroll
  for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++)
      #pragma unroll
      for (int q = 0; q < 4; q++) acc4[i][j][q] = 0.f;
  float4 av[4], bv[NT];
  #pragma unroll
  for (int j = 0; j < NT; j++) bv[j] = kw > 0 ? gc_tc_ldw(b[j]) : make_float4(0.f, 0.f, 0.f, 0.f);
  %[10]s
  #pragma unroll
  for (int r = 0; r < 4; r++) av[r] = kw > 0 ? __ldcg((const float4*)a[r]) : make_float4(0.f, 0.f, 0.f, 0.f);
  for (int k = 0; k < kw; k += 16) {
    // The next step's loads are in flight during this one's MMAs.
    float4 an[4], bn[NT];
    if (k + 16 < kw) {
      #pragma unroll
      for (int r = 0; r < 4; r++) an[r] = __ldcg((const float4*)(a[r] + k + 16));
      #pragma unroll
      for (int j = 0; j < NT; j++) bn[j] = gc_tc_ldw(b[j] + k + 16);
    }
    #pragma unroll
    for (int p = 0; p < 2; p++) {
      // MMA p takes k 4t+2p as its k t, and 4t+2p+1 as its k t+4.
      unsigned ah[4][2], al[4][2];
      #pragma unroll
      for (int r = 0; r < 4; r++) {
        gc_tc_split(gc_tc_at(av[r], 2 * p), ah[r][0], al[r][0]);
        gc_tc_split(gc_tc_at(av[r], 2 * p + 1), ah[r][1], al[r][1]);
      }
      #pragma unroll
      for (int j = 0; j < NT; j++) {
        unsigned bh0, bl0, bh1, bl1;
        gc_tc_split(gc_tc_at(bv[j], 2 * p), bh0, bl0);
        gc_tc_split(gc_tc_at(bv[j], 2 * p + 1), bh1, bl1);
        #pragma unroll
        for (int i = 0; i < 2; i++) {
          // Rows g+16i (a0, a2) and g+16i+8 (a1, a3); small terms first.
          gc_tc_mma(acc4[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bl0, bl1);
          gc_tc_mma(acc4[i][j], al[2 * i][0], al[2 * i + 1][0], al[2 * i][1], al[2 * i + 1][1], bh0, bh1);
          gc_tc_mma(acc4[i][j], ah[2 * i][0], ah[2 * i + 1][0], ah[2 * i][1], ah[2 * i + 1][1], bh0, bh1);
        }
      }
    }
    if (k + 16 < kw) {
      #pragma unroll
      for (int r = 0; r < 4; r++) av[r] = an[r];
      #pragma unroll
      for (int j = 0; j < NT; j++) bv[j] = bn[j];
    }
  }
  // acc4[i][j][q] is row 16i + g + 8(q/2), column 8j + 2t + q%%2 of the tile.
%[11]s%[4]s}
`, k.Name(), storageC(k.Out), unrestrictedParams(params), tensorReduce(c, store), 8*c.NT, c.Warps, c.Split, cluster, c.NT, wait, storeWait)
}

// tensor16Body writes the tensor-core kernel for 16-bit operands; store
// is the expression stored for acc[i][j] at [m, n]. A block computes 16
// rows (all of them: M ≤ Gemm16MaxM; the 8-row form, MT 8, loads A's rows
// 8 to 15 as zeros) × 8·NT columns with m16n8k16 MMAs
// adding in float32; its W warps split k in 32-wide chunks, interleaved,
// so a block's loads of a weight row are contiguous, and add their tiles
// in shared memory in a fixed order at the end.
//
// Lane (g, t) (g = lane/4, t = lane%4) loads k 8t..8t+7 of a chunk as one
// 16-byte vector of A's rows g and g+8 and of B's column g of each column
// tile, and feeds them to two MMAs: words 0 and 1 of the vector as the
// first MMA's k 2t..2t+1 and 2t+8..2t+9, words 2 and 3 as the second's.
// The MMAs see k permuted, the same way for A and B, which the sum does
// not depend on. K is a multiple of 8 and the vectors aligned (Fits); a
// chunk's vectors past K read zeros. Each warp keeps the next step's
// weight loads in flight during a step's MMAs, and the first two steps'
// are issued before griddepcontrol.wait, so under a programmatic
// dependent launch (a product replayed from a CUDA graph after a kernel
// that calls gc_launch_dependents) the weight streams while the kernel
// ahead finishes.
func (k *GemmKernel) tensor16Body(b *strings.Builder, params []string, store string) {
	c, in := k.Config, k.in()
	mma := "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
	if in == ir.Float16 {
		mma = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
	}
	wait, storeWait := k.waits("B", "  ")
	b.WriteString(weightLoadC)
	fmt.Fprintf(b, `
__device__ __forceinline__ void gc_tc16_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm("%[9]s {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, {%%8,%%9}, {%%0,%%1,%%2,%%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Block x computes columns %[5]dx.. of all rows; its %[6]d warps split k.
// A and the epilogue's operands are not __restrict__, and A is read with
// plain loads after the wait (before it only where the kernel ahead
// cannot write it, ReadyA): under a dependent launch the kernel ahead
// writes them while this one starts, so the non-coherent read-only path
// could return stale values; plain loads see them once the wait returns.
// The first step's weight loads are issued before griddepcontrol.wait, so
// they overlap the kernel ahead; nothing it writes is read before the wait.
extern "C" __global__ void __launch_bounds__(%[6]d * 32) %[1]s(
    const %[7]s* A, long long lda, const %[7]s* __restrict__ B, long long ldb,
    int M, int N, int K, int vec, %[2]s* __restrict__ out, long long ldo,
    float* __restrict__ ws, unsigned int* __restrict__ counters%[3]s) {
  constexpr int NT = %[8]d, W = %[6]d, BN = 8 * NT, T = 16 * BN, U = %[11]d, STEP = 32 * W * U, MT = %[10]d;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * BN;
  // Rows and columns past the end read the last one, dropped at the
  // store; rows g+8 are all past the end when M ≤ 8.
  const %[7]s* a0 = A + (long long)min(g, M - 1) * lda + 8 * t;
  const %[7]s* a1 = A + (long long)min(g + 8, M - 1) * lda + 8 * t;
  const bool high = MT > 8 && M > 8;
  const %[7]s* b[NT];
  #pragma unroll
  for (int j = 0; j < NT; j++) b[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + 8 * t;
  float acc[NT][4];
  #pragma unroll
  for (int j = 0; j < NT; j++)
    #pragma unroll
    for (int q = 0; q < 4; q++) acc[j][q] = 0.f;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  gc_launch_dependents();
  // A step is U chunks of this warp's k, chunk u at k0 + 32·W·u. The
  // weight loads of the first two steps are issued before
  // griddepcontrol.wait (they read only B, which no kernel of the program
  // writes); after that, the loads two steps ahead are in flight while a
  // step's MMAs run.
  uint4 bv[U][NT], bn[U][NT];
  #pragma unroll
  for (int u = 0; u < U; u++) {
    const int k = 32 * w + 32 * W * u;
    #pragma unroll
    for (int j = 0; j < NT; j++) {
      bv[u][j] = k + 8 * t < K ? gc_wraw(b[j] + k) : zero;
      bn[u][j] = k + STEP + 8 * t < K ? gc_wraw(b[j] + k + STEP) : zero;
    }
  }
  %[12]s
  // A's vectors of a step are loaded a step ahead, so their L2 latency
  // overlaps the step before.
  uint4 av0[U], av1[U];
  #pragma unroll
  for (int u = 0; u < U; u++) {
    const int k = 32 * w + 32 * W * u;
    const bool in = k + 8 * t < K;
    av0[u] = in ? *(const uint4*)(a0 + k) : zero;
    av1[u] = in && high ? *(const uint4*)(a1 + k) : zero;
  }
  for (int k0 = 32 * w; k0 < K; k0 += STEP) {
    uint4 an0[U], an1[U];
    #pragma unroll
    for (int u = 0; u < U; u++) {
      const int k = k0 + STEP + 32 * W * u;
      const bool in = k + 8 * t < K;
      an0[u] = in ? *(const uint4*)(a0 + k) : zero;
      an1[u] = in && high ? *(const uint4*)(a1 + k) : zero;
    }
    #pragma unroll
    for (int u = 0; u < U; u++)
      #pragma unroll
      for (int j = 0; j < NT; j++) {
        gc_tc16_mma(acc[j], av0[u].x, av1[u].x, av0[u].y, av1[u].y, bv[u][j].x, bv[u][j].y);
        gc_tc16_mma(acc[j], av0[u].z, av1[u].z, av0[u].w, av1[u].w, bv[u][j].z, bv[u][j].w);
      }
    #pragma unroll
    for (int u = 0; u < U; u++) {
      av0[u] = an0[u];
      av1[u] = an1[u];
    }
    if (k0 + STEP < K) {
      #pragma unroll
      for (int u = 0; u < U; u++) {
        const int k = k0 + 2 * STEP + 32 * W * u;
        #pragma unroll
        for (int j = 0; j < NT; j++) {
          bv[u][j] = bn[u][j];
          bn[u][j] = k + 8 * t < K ? gc_wraw(b[j] + k) : zero;
        }
      }
    }
  }
%[13]s  // acc[j][q] is row g + 8(q/2), column 8j + 2t + q%%2 of the tile.
  __shared__ float red[W * T];
  #pragma unroll
  for (int j = 0; j < NT; j++)
    #pragma unroll
    for (int q = 0; q < 4; q++)
      red[w * T + (g + 8 * (q >> 1)) * BN + 8 * j + 2 * t + (q & 1)] = acc[j][q];
  __syncthreads();
  for (int f = threadIdx.x; f < T; f += W * 32) {
    float v = 0.f;
    #pragma unroll
    for (int s = 0; s < W; s++) v += red[s * T + f];
    const int m = f / BN, n = n0 + f %% BN;
%[4]s  }
}
`, k.Name(), storageC(k.Out), unrestrictedParams(params), storeAt("v", store), 8*c.NT, c.Warps, storageC(in), c.NT, mma, c.tensor16Rows(), tensor16U, wait, storeWait)
}

// readyA reports whether k reads A before griddepcontrol.wait (ReadyA
// applies).
func (k *GemmKernel) readyA() bool {
	return k.ReadyA && k.Prologue == nil && (k.Config.Tensor || k.Config.Split == 0)
}

// waits gives the kernel's griddepcontrol.wait after its early loads of
// what (the weight), indented by indent, and the one before its stores:
// the first, or with ReadyA the second, a comment in the other's place.
func (k *GemmKernel) waits(what, indent string) (afterLoads, beforeStores string) {
	if k.readyA() {
		return "// A and " + what + " are inputs or constants, which no kernel ahead may still\n" +
				indent + "// be writing (ReadyA): the kernel waits only before its stores.",
			"  // Nothing this kernel writes, nor the epilogue's operands, is touched\n" +
				"  // before the kernel ahead ends.\n  gc_grid_wait();\n"
	}
	return "// Everything above reads only " + what + ", which no kernel of the program writes.\n" + indent + "gc_grid_wait();", ""
}

// tensor16Rows is how many rows a 16-bit tensor-core kernel computes:
// 8 (MT 8, for products of up to 8 rows, which then load half of A's
// fragments) or 16.
func (c GemmConfig) tensor16Rows() int {
	if c.MT == 8 {
		return 8
	}
	return 16
}

// tensorReduce is the tensor-core kernel's end: the store straight from
// the fragments for one warp and one block, else the warps' partial tiles
// added in shared memory, then (a cluster) the blocks' sums added through
// distributed shared memory, each block storing 1/S of the tile; sums run
// in a fixed order, so results do not depend on timing.
func tensorReduce(c GemmConfig, store string) string {
	const exact = "gc_tc_exact(v, A, lda, B, ldb, K, m, n)"
	if c.Warps == 1 && c.Split == 1 {
		return `  #pragma unroll
  for (int fi = 0; fi < 2; fi++)
    #pragma unroll
    for (int fj = 0; fj < NT; fj++)
      #pragma unroll
      for (int q = 0; q < 4; q++) {
        const int m = m0 + 16 * fi + g + 8 * (q >> 1), n = n0 + 8 * fj + 2 * t + (q & 1);
        const float v = acc4[fi][fj][q];
` + storeAt(exact, store) + `      }
`
	}
	var b strings.Builder
	b.WriteString(`  __shared__ float red[(W + 1) * T]; // the warps' tiles, then their sum
  #pragma unroll
  for (int fi = 0; fi < 2; fi++)
    #pragma unroll
    for (int fj = 0; fj < NT; fj++)
      #pragma unroll
      for (int q = 0; q < 4; q++)
        red[w * T + (16 * fi + g + 8 * (q >> 1)) * BN + 8 * fj + 2 * t + (q & 1)] = acc4[fi][fj][q];
  __syncthreads();
  for (int f = threadIdx.x; f < T; f += W * 32) {
    float v = 0.f;
    #pragma unroll
    for (int s = 0; s < W; s++) v += red[s * T + f];
`)
	if c.Split == 1 {
		b.WriteString("    const int m = m0 + f / BN, n = n0 + f % BN;\n" + storeAt(exact, store) + "  }\n")
		return b.String()
	}
	b.WriteString("    red[W * T + f] = v;\n  }\n")
	b.WriteString(clusterSum("red + W * T", "T", "W * 32", exact, store))
	return b.String()
}
