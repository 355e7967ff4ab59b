//go:build !purego

#include "textflag.h"

// VV: Y0 = a[i] op b[i]; VS: a[i] op s; SV: s op b[i] (s in Y1).
#define VV(name, OP) \
name: \
	CMPQ    AX, CX; \
	JGE     done; \
	VMOVUPS (SI)(AX*4), Y0; \
	OP      (DX)(AX*4), Y0, Y0; \
	VMOVUPS Y0, (DI)(AX*4); \
	ADDQ    $8, AX; \
	JMP     name

#define VS(name, OP) \
name: \
	CMPQ    AX, CX; \
	JGE     done; \
	VMOVUPS (SI)(AX*4), Y0; \
	OP      Y1, Y0, Y0; \
	VMOVUPS Y0, (DI)(AX*4); \
	ADDQ    $8, AX; \
	JMP     name

#define SV(name, OP) \
name: \
	CMPQ    AX, CX; \
	JGE     done; \
	OP      (DX)(AX*4), Y1, Y0; \
	VMOVUPS Y0, (DI)(AX*4); \
	ADDQ    $8, AX; \
	JMP     name

// func binF32AVX2(op int, d, a, b *float32, n int)
//
// d[i] = a[i] op b[i] for i < n&^7: op%4 is 0 add, 1 subtract, 2
// multiply, 3 divide; op/4 is 0 for two vectors, 1 when b is one value
// (b[0] for every i), 2 when a is. These are the IEEE operations
// floatLoop's do, eight at a time.
TEXT ·binF32AVX2(SB), NOSPLIT, $0-40
	MOVQ op+0(FP), R8
	MOVQ d+8(FP), DI
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ n+32(FP), CX
	ANDQ $-8, CX
	XORQ AX, AX
	CMPQ R8, $4
	JLT  vv
	CMPQ R8, $8
	JLT  vs
	VBROADCASTSS (SI), Y1
	CMPQ R8, $9
	JEQ  svsub
	CMPQ R8, $10
	JEQ  svmul
	CMPQ R8, $11
	JEQ  svdiv
	JMP  svadd

vs:
	VBROADCASTSS (DX), Y1
	CMPQ R8, $5
	JEQ  vssub
	CMPQ R8, $6
	JEQ  vsmul
	CMPQ R8, $7
	JEQ  vsdiv
	JMP  vsadd

vv:
	CMPQ R8, $1
	JEQ  vvsub
	CMPQ R8, $2
	JEQ  vvmul
	CMPQ R8, $3
	JEQ  vvdiv

VV(vvadd, VADDPS)
VV(vvsub, VSUBPS)
VV(vvmul, VMULPS)
VV(vvdiv, VDIVPS)
VS(vsadd, VADDPS)
VS(vssub, VSUBPS)
VS(vsmul, VMULPS)
VS(vsdiv, VDIVPS)
SV(svadd, VADDPS)
SV(svsub, VSUBPS)
SV(svmul, VMULPS)
SV(svdiv, VDIVPS)

done:
	VZEROUPPER
	RET
