//go:build !purego

#include "textflag.h"

// func bf16ToF32AVX2(d *float32, s *uint16, n int)
//
// d[i] = BF16ToF32(s[i]) for i < n&^7: the bits moved to the top half.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	ANDQ $-8, CX
	XORQ AX, AX

wloop:
	CMPQ      AX, CX
	JGE       wdone
	VPMOVZXWD (SI)(AX*2), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	JMP       wloop

wdone:
	VZEROUPPER
	RET

// func f32ToBF16AVX2(d *uint16, s *float32, n int, c *[3][8]uint32)
//
// d[i] = F32ToBF16(s[i]) for i < n&^15: rounded to nearest even by
// adding 0x7fff and the kept part's lowest bit, NaN made quiet (| 0x40).
// c holds 1, 0x7fff and 0x40 in eight lanes each.
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), R8
	VMOVDQU 0(R8), Y13  // 1
	VMOVDQU 32(R8), Y14 // 0x7fff
	VMOVDQU 64(R8), Y15 // 0x40
	ANDQ $-16, CX
	XORQ AX, AX

nloop:
	CMPQ    AX, CX
	JGE     ndone
	VMOVDQU (SI)(AX*4), Y0
	VMOVDQU 32(SI)(AX*4), Y1
	VPSRLD  $16, Y0, Y2   // the top half
	VPSRLD  $16, Y1, Y3
	VPAND   Y13, Y2, Y4   // its lowest bit
	VPAND   Y13, Y3, Y5
	VPADDD  Y14, Y0, Y6
	VPADDD  Y14, Y1, Y7
	VPADDD  Y4, Y6, Y6
	VPADDD  Y5, Y7, Y7
	VPSRLD  $16, Y6, Y6   // rounded
	VPSRLD  $16, Y7, Y7
	VPOR    Y15, Y2, Y2   // NaN: quiet
	VPOR    Y15, Y3, Y3
	VCMPPS  $3, Y0, Y0, Y8 // unordered: NaN
	VCMPPS  $3, Y1, Y1, Y9
	VBLENDVPS Y8, Y2, Y6, Y6
	VBLENDVPS Y9, Y3, Y7, Y7
	VPACKUSDW Y7, Y6, Y6  // 16 words, 128-bit lanes interleaved
	VPERMQ  $0xd8, Y6, Y6 // in order
	VMOVDQU Y6, (DI)(AX*2)
	ADDQ    $16, AX
	JMP     nloop

ndone:
	VZEROUPPER
	RET

// func f16ToF32F16C(d *float32, s *uint16, n int)
//
// d[i] = F16ToF32(s[i]) for i < n&^7 (exact).
TEXT ·f16ToF32F16C(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	ANDQ $-8, CX
	XORQ AX, AX

hloop:
	CMPQ      AX, CX
	JGE       hdone
	VCVTPH2PS (SI)(AX*2), Y0
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	JMP       hloop

hdone:
	VZEROUPPER
	RET

// func f32ToF16F16C(d *uint16, s *float32, n int)
//
// d[i] = F32ToF16(s[i]) for i < n&^7, rounding to nearest even.
TEXT ·f32ToF16F16C(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	ANDQ $-8, CX
	XORQ AX, AX

gloop:
	CMPQ      AX, CX
	JGE       gdone
	VMOVUPS   (SI)(AX*4), Y0
	VCVTPS2PH $0, Y0, (DI)(AX*2)
	ADDQ      $8, AX
	JMP       gloop

gdone:
	VZEROUPPER
	RET
