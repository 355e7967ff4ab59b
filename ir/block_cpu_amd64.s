//go:build !purego

#include "textflag.h"

// func binF32AVX2(op int, d, a, b *float32, n int)
//
// d[i] = a[i] op b[i] for i < n&^7, op 0 add, 1 subtract, 2 multiply,
// 3 divide: the IEEE operations floatLoop's do, eight at a time.
TEXT ·binF32AVX2(SB), NOSPLIT, $0-40
	MOVQ op+0(FP), R8
	MOVQ d+8(FP), DI
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ n+32(FP), CX
	ANDQ $-8, CX
	XORQ AX, AX
	CMPQ R8, $1
	JEQ  sub
	CMPQ R8, $2
	JEQ  mul
	CMPQ R8, $3
	JEQ  div

add:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     add

sub:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     sub

mul:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (SI)(AX*4), Y0
	VMULPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     mul

div:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (SI)(AX*4), Y0
	VDIVPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     div

done:
	VZEROUPPER
	RET
