//go:build !purego

#include "textflag.h"

// func sumF32AVX2(x *float32, n int, s *[16]float64)
//
// Adds x[i+j] into lane s[j] for every whole group of sixteen values
// (i a multiple of 16, i+16 <= n), in float64: sumLanes' order.
TEXT ·sumF32AVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ s+16(FP), DI
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	XORQ AX, AX
	ANDQ $-16, CX
	JZ   done

loop:
	VCVTPS2PD 0(SI)(AX*4), Y4
	VCVTPS2PD 16(SI)(AX*4), Y5
	VCVTPS2PD 32(SI)(AX*4), Y6
	VCVTPS2PD 48(SI)(AX*4), Y7
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3
	ADDQ      $16, AX
	CMPQ      AX, CX
	JLT       loop

done:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func sumF64AVX2(x *float64, n int, s *[16]float64)
TEXT ·sumF64AVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ s+16(FP), DI
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	XORQ AX, AX
	ANDQ $-16, CX
	JZ   done

loop:
	VADDPD 0(SI)(AX*8), Y0, Y0
	VADDPD 32(SI)(AX*8), Y1, Y1
	VADDPD 64(SI)(AX*8), Y2, Y2
	VADDPD 96(SI)(AX*8), Y3, Y3
	ADDQ   $16, AX
	CMPQ   AX, CX
	JLT    loop

done:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func bestF32AVX2(x *float32, n int, greater bool, m *[32]float32) (nan bool)
//
// The greatest (greater) or least value of each of 32 lanes of x (lane j:
// the x[i] with i%32 == j, for i < n&^31, n >= 32), keeping a lane's
// earlier value on ties, and whether any of them is NaN (the lanes are
// then meaningless).
TEXT ·bestF32AVX2(SB), NOSPLIT, $0-33
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVBLZX greater+16(FP), R9
	MOVQ    m+24(FP), DI
	ANDQ    $-32, CX
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VCMPPS  $3, Y0, Y0, Y8 // unordered: NaN
	VCMPPS  $3, Y1, Y1, Y9
	VCMPPS  $3, Y2, Y2, Y10
	VCMPPS  $3, Y3, Y3, Y11
	MOVQ    $32, AX
	TESTQ   R9, R9
	JZ      minloop

maxloop:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS 0(SI)(AX*4), Y4
	VMOVUPS 32(SI)(AX*4), Y5
	VMOVUPS 64(SI)(AX*4), Y6
	VMOVUPS 96(SI)(AX*4), Y7
	VMAXPS  Y0, Y4, Y0 // x > m ? x : m
	VMAXPS  Y1, Y5, Y1
	VMAXPS  Y2, Y6, Y2
	VMAXPS  Y3, Y7, Y3
	VCMPPS  $3, Y4, Y4, Y4
	VCMPPS  $3, Y5, Y5, Y5
	VCMPPS  $3, Y6, Y6, Y6
	VCMPPS  $3, Y7, Y7, Y7
	VORPS   Y4, Y8, Y8
	VORPS   Y5, Y9, Y9
	VORPS   Y6, Y10, Y10
	VORPS   Y7, Y11, Y11
	ADDQ    $32, AX
	JMP     maxloop

minloop:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS 0(SI)(AX*4), Y4
	VMOVUPS 32(SI)(AX*4), Y5
	VMOVUPS 64(SI)(AX*4), Y6
	VMOVUPS 96(SI)(AX*4), Y7
	VMINPS  Y0, Y4, Y0 // x < m ? x : m
	VMINPS  Y1, Y5, Y1
	VMINPS  Y2, Y6, Y2
	VMINPS  Y3, Y7, Y3
	VCMPPS  $3, Y4, Y4, Y4
	VCMPPS  $3, Y5, Y5, Y5
	VCMPPS  $3, Y6, Y6, Y6
	VCMPPS  $3, Y7, Y7, Y7
	VORPS   Y4, Y8, Y8
	VORPS   Y5, Y9, Y9
	VORPS   Y6, Y10, Y10
	VORPS   Y7, Y11, Y11
	ADDQ    $32, AX
	JMP     minloop

done:
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	VORPS     Y9, Y8, Y8
	VORPS     Y11, Y10, Y10
	VORPS     Y10, Y8, Y8
	VMOVMSKPS Y8, AX
	TESTL     AX, AX
	SETNE     nan+32(FP)
	VZEROUPPER
	RET

// func addWidenedF32AVX2(l *float64, x *float32, n int)
//
// l[j] += float64(x[j]) for j < n&^7.
TEXT ·addWidenedF32AVX2(SB), NOSPLIT, $0-24
	MOVQ l+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	ANDQ $-8, CX
	XORQ AX, AX

loop:
	CMPQ      AX, CX
	JGE       done
	VCVTPS2PD 0(SI)(AX*4), Y0
	VCVTPS2PD 16(SI)(AX*4), Y1
	VADDPD    0(DI)(AX*8), Y0, Y0
	VADDPD    32(DI)(AX*8), Y1, Y1
	VMOVUPD   Y0, 0(DI)(AX*8)
	VMOVUPD   Y1, 32(DI)(AX*8)
	ADDQ      $8, AX
	JMP       loop

done:
	VZEROUPPER
	RET

// BLOCKSTART clears the sixteen lanes Y0..Y3 and the index AX.
#define BLOCKSTART \
	VXORPD Y0, Y0, Y0; \
	VXORPD Y1, Y1, Y1; \
	VXORPD Y2, Y2, Y2; \
	VXORPD Y3, Y3, Y3; \
	XORQ   AX, AX

// BLOCKEND combines the lanes as sumWith combines them ((0+8) ... then
// (0+4) ... then (0+2)+(1+3)) and adds the block's sum to X8.
#define BLOCKEND \
	VADDPD       Y2, Y0, Y0; \
	VADDPD       Y3, Y1, Y1; \
	VADDPD       Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPD       X1, X0, X0; \
	VUNPCKHPD    X0, X0, X1; \
	VADDSD       X1, X0, X0; \
	VADDSD       X0, X8, X8

// func sumBlocksF32AVX2(x *float32, blocks, size int, acc float64) float64
//
// acc plus the sums of blocks whole blocks of size values (a multiple of
// 16), each summed as sumFloat sums it, added in order: the sum
// FoldRange's blocks give, a call for many blocks.
TEXT ·sumBlocksF32AVX2(SB), NOSPLIT, $0-40
	MOVQ   x+0(FP), SI
	MOVQ   blocks+8(FP), CX
	MOVQ   size+16(FP), DX
	VMOVSD acc+24(FP), X8

f32block:
	TESTQ CX, CX
	JZ    f32done
	BLOCKSTART

f32lanes:
	VCVTPS2PD 0(SI)(AX*4), Y4
	VCVTPS2PD 16(SI)(AX*4), Y5
	VCVTPS2PD 32(SI)(AX*4), Y6
	VCVTPS2PD 48(SI)(AX*4), Y7
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3
	ADDQ      $16, AX
	CMPQ      AX, DX
	JLT       f32lanes
	BLOCKEND
	LEAQ (SI)(DX*4), SI
	DECQ CX
	JMP  f32block

f32done:
	VMOVSD X8, ret+32(FP)
	VZEROUPPER
	RET

// func sumBlocksF64AVX2(x *float64, blocks, size int, acc float64) float64
TEXT ·sumBlocksF64AVX2(SB), NOSPLIT, $0-40
	MOVQ   x+0(FP), SI
	MOVQ   blocks+8(FP), CX
	MOVQ   size+16(FP), DX
	VMOVSD acc+24(FP), X8

f64block:
	TESTQ CX, CX
	JZ    f64done
	BLOCKSTART

f64lanes:
	VADDPD 0(SI)(AX*8), Y0, Y0
	VADDPD 32(SI)(AX*8), Y1, Y1
	VADDPD 64(SI)(AX*8), Y2, Y2
	VADDPD 96(SI)(AX*8), Y3, Y3
	ADDQ   $16, AX
	CMPQ   AX, DX
	JLT    f64lanes
	BLOCKEND
	LEAQ (SI)(DX*8), SI
	DECQ CX
	JMP  f64block

f64done:
	VMOVSD X8, ret+32(FP)
	VZEROUPPER
	RET
