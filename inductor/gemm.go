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
}

// GemmConfig is a GemmKernel's launch shape.
type GemmConfig struct {
	Warps int // warps per block
	NT    int // columns per warp
	MT    int // rows per block (grid.y is ⌈M/MT⌉)
}

func (c GemmConfig) String() string { return fmt.Sprintf("w%dn%dm%d", c.Warps, c.NT, c.MT) }

// Grid is the launch grid for an M×N output.
func (c GemmConfig) Grid(m, n int) (x, y int) {
	cols := c.Warps * c.NT
	return (n + cols - 1) / cols, (m + c.MT - 1) / c.MT
}

// Threads is the block size.
func (c GemmConfig) Threads() int { return c.Warps * 32 }

// GemmMaxM is the most rows a GemmKernel is meant for: beyond it a tiled
// library GEMM, which reuses each loaded element across many rows, wins.
const GemmMaxM = 64

// ChooseGemmConfig picks the launch shape for an M×N output on a device
// with sms multiprocessors: row tiles of up to 8 rows (the partial sums a
// lane holds are MT·NT registers), and the widest column group that still
// gives every multiprocessor two blocks.
func ChooseGemmConfig(m, n, sms int) GemmConfig {
	c := GemmConfig{Warps: 4, MT: 8}
	for c.MT > 1 && c.MT/2 >= m {
		c.MT /= 2
	}
	for _, nt := range []int{4, 2, 1} {
		c.NT = nt
		if x, y := c.Grid(m, n); x*y >= 2*sms {
			break
		}
	}
	return c
}

// GemmCandidates are the launch shapes an autotuner tries for M rows.
func GemmCandidates(m int) []GemmConfig {
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
	fmt.Fprintf(&b, "// gocompile GEMM kernel: out[m, n] = epilogue(sum over k of A[m, k]·B[k, n]), float32, %d rows × %d columns per warp, %d warps\n", c.MT, c.NT, c.Warps)
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
	if c.Warps < 1 || c.NT < 1 || c.MT < 1 {
		return "", fmt.Errorf("gemm: bad launch shape %v", c)
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
	value := "acc[i][j]"
	if k.Epilogue != nil {
		value = "epilogue(" + strings.Join(loads, ", ") + ")"
	}

	fmt.Fprintf(&b, `
extern "C" __global__ void __launch_bounds__(%[1]d) %[2]s(
    const float* __restrict__ A, long long lda, const float* __restrict__ B, long long ldb,
    int M, int N, int K, int vec, %[3]s* __restrict__ out, long long ldo%[4]s) {
  const int MT = %[5]d, NT = %[6]d;
  const int lane = threadIdx.x & 31;
  const int n0 = (blockIdx.x * %[7]d + (threadIdx.x >> 5)) * NT;
  const int m0 = blockIdx.y * MT;
  if (n0 >= N) return;
  // Rows and columns past the end read the last one: their sums are
  // dropped at the store, and the loop stays free of branches.
  const float* a[MT];
  const float* b[NT];
  #pragma unroll
  for (int i = 0; i < MT; i++) a[i] = A + (long long)min(m0 + i, M - 1) * lda;
  #pragma unroll
  for (int j = 0; j < NT; j++) b[j] = B + (long long)min(n0 + j, N - 1) * ldb;
  float acc[MT][NT];
  #pragma unroll
  for (int i = 0; i < MT; i++)
    #pragma unroll
    for (int j = 0; j < NT; j++) acc[i][j] = 0.f;
  if (vec) { // K, lda, ldb multiples of 4 and A, B 16-byte aligned
    #pragma unroll 2
    for (int k = lane * 4; k < K; k += 128) {
      float4 w[NT];
      #pragma unroll
      for (int j = 0; j < NT; j++) w[j] = __ldg((const float4*)(b[j] + k));
      #pragma unroll
      for (int i = 0; i < MT; i++) {
        const float4 x = __ldg((const float4*)(a[i] + k));
        #pragma unroll
        for (int j = 0; j < NT; j++)
          acc[i][j] = fmaf(x.w, w[j].w, fmaf(x.z, w[j].z, fmaf(x.y, w[j].y, fmaf(x.x, w[j].x, acc[i][j]))));
      }
    }
  } else {
    for (int k = lane; k < K; k += 32) {
      float w[NT];
      #pragma unroll
      for (int j = 0; j < NT; j++) w[j] = __ldg(b[j] + k);
      #pragma unroll
      for (int i = 0; i < MT; i++) {
        const float x = __ldg(a[i] + k);
        #pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j] = fmaf(x, w[j], acc[i][j]);
      }
    }
  }
  // Sum each partial across the warp; every lane ends with every sum.
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
`, c.Threads(), k.Name(), storageC(k.Out), strings.Join(prefixAll(", ", params), ""), c.MT, c.NT, c.Warps,
		storeC(value, outKind, k.Out))
	return b.String(), nil
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}
