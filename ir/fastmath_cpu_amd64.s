//go:build !purego

#include "textflag.h"

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET

// func expAVX2(d, a *float32, n int, c *[expRows][8]float32, pre, post float32, recip bool) int
//
// expF32's loop eight lanes at a time, with the same float32 operations in
// the same order (no fused multiply-adds), so every lane gets expF32Go's
// bits. It stops at the first group of eight with an input outside
// [-87, 88] (or NaN) and returns how many values it wrote, a multiple of
// eight; the caller computes that group with expF32Go and calls again.
TEXT ·expAVX2(SB), NOSPLIT, $0-56
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ c+24(FP), R8
	VBROADCASTSS pre+32(FP), Y15
	VBROADCASTSS post+36(FP), Y14
	MOVBLZX recip+40(FP), R9
	VMOVUPS 0(R8), Y13   // log2e
	VMOVUPS 32(R8), Y12  // roundMag
	VMOVUPS 64(R8), Y11  // ln2Hi
	VMOVUPS 96(R8), Y10  // ln2Lo
	VMOVUPS 320(R8), Y9  // 1
	VMOVUPS 352(R8), Y8  // -87
	VMOVUPS 384(R8), Y7  // 88
	XORQ AX, AX

loop:
	LEAQ 8(AX), DX
	CMPQ DX, CX
	JGT  done
	VMOVUPS (SI)(AX*4), Y0
	VMULPS  Y15, Y0, Y0      // x *= pre
	VCMPPS  $0x0d, Y8, Y0, Y1 // x >= -87 (false for NaN)
	VCMPPS  $0x02, Y7, Y0, Y2 // x <= 88
	VANDPS  Y2, Y1, Y1
	VMOVMSKPS Y1, DX
	CMPL    DX, $0xff
	JNE     done

	VMULPS Y13, Y0, Y1 // x·log2e
	VADDPS Y12, Y1, Y1 // t = x·log2e + roundMag
	VPSUBD Y12, Y1, Y2 // k = bits(t) - bits(roundMag)
	VSUBPS Y12, Y1, Y1 // kf = t - roundMag
	VMULPS Y11, Y1, Y3 // kf·ln2Hi
	VSUBPS Y3, Y0, Y3  // r = x - kf·ln2Hi
	VMULPS Y10, Y1, Y1 // kf·ln2Lo
	VSUBPS Y1, Y3, Y3  // r -= kf·ln2Lo
	VMULPS Y3, Y3, Y4  // r2 = r·r

	VMULPS 160(R8), Y3, Y5 // exp3·r
	VADDPS 128(R8), Y5, Y5 // exp2 + exp3·r
	VMULPS 224(R8), Y3, Y6 // exp5·r
	VADDPS 192(R8), Y6, Y6 // exp4 + exp5·r
	VMULPS 288(R8), Y3, Y1 // exp7·r
	VADDPS 256(R8), Y1, Y1 // exp6 + exp7·r
	VMULPS Y1, Y4, Y1      // r2·(exp6 + exp7·r)
	VADDPS Y1, Y6, Y6      // (exp4 + exp5·r) + r2·(…)
	VMULPS Y6, Y4, Y6      // r2·(…)
	VADDPS Y6, Y5, Y5      // p

	VMULPS Y5, Y4, Y5      // r2·p
	VADDPS Y5, Y3, Y5      // r + r2·p
	VADDPS Y9, Y5, Y5      // 1 + (r + r2·p)
	VPADDD 416(R8), Y2, Y2 // k + 127
	VPSLLD $23, Y2, Y2     // 2^k
	VMULPS Y2, Y5, Y5
	VADDPS Y14, Y5, Y5     // + post
	TESTQ  R9, R9
	JZ     store
	VDIVPS Y5, Y9, Y5      // 1/y

store:
	VMOVUPS Y5, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     loop

done:
	MOVQ AX, ret+48(FP)
	VZEROUPPER
	RET

// COEF(q, dst): coefficient q of each lane's segment (Y3: the segment,
// Y4: segment >= 8, Y5: segment == 16) from erfCols' row q at R8: three
// groups of eight segments, the last the sixteenth repeated.
#define COEF(q, dst) \
	VPERMPS   (q*96)(R8), Y3, dst; \
	VPERMPS   (q*96+32)(R8), Y3, Y6; \
	VBLENDVPS Y4, Y6, dst, dst; \
	VBLENDVPS Y5, (q*96+64)(R8), dst, dst

// func erfAVX2(d, a *float32, n int, tab *[9][24]float32, c *[erfRows][8]float32, pre, post float32, recip bool) int
//
// erfF32's loop eight lanes at a time, with the same float32 operations in
// the same order; it writes n&^7 values and returns how many.
TEXT ·erfAVX2(SB), NOSPLIT, $0-64
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), R8
	MOVQ c+32(FP), R10
	VBROADCASTSS pre+40(FP), Y15
	VBROADCASTSS post+44(FP), Y14
	MOVBLZX recip+48(FP), R9
	ANDQ $-8, CX
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE  done
	VMOVUPS (SI)(AX*4), Y0
	VMULPS  Y15, Y0, Y0      // x *= pre
	VANDPS  0(R10), Y0, Y1   // ab: |x|
	VANDPS  32(R10), Y0, Y2  // the sign bit
	VORPS   64(R10), Y2, Y2  // sign: ±1
	VPSUBD  96(R10), Y1, Y3  // ab - bits(1/4)
	VPSRAD  $21, Y3, Y3
	VPADDD  128(R10), Y3, Y3 // + 1
	VPXOR   Y6, Y6, Y6
	VPMAXSD Y6, Y3, Y3       // 0 below 1/4
	VPMINSD 160(R10), Y3, Y3 // the last segment for everything above
	VPCMPGTD 192(R10), Y3, Y4 // segment > 7
	VPCMPEQD 160(R10), Y3, Y5 // segment == 16

	COEF(0, Y7)
	VSUBPS Y7, Y1, Y7 // u = ax - c0
	VMULPS Y7, Y7, Y8 // u2
	COEF(3, Y9)
	COEF(4, Y10)
	VMULPS Y7, Y10, Y10
	VADDPS Y10, Y9, Y9  // c3 + c4·u
	COEF(5, Y10)
	COEF(6, Y11)
	VMULPS Y7, Y11, Y11
	VADDPS Y11, Y10, Y10 // c5 + c6·u
	COEF(7, Y11)
	VMULPS Y11, Y8, Y11
	VADDPS Y11, Y10, Y10 // (c5 + c6·u) + u2·c7
	VMULPS Y10, Y8, Y10
	VADDPS Y10, Y9, Y9   // hi
	COEF(2, Y10)
	VMULPS Y7, Y10, Y10  // c2·u
	VMULPS Y9, Y8, Y9    // u2·hi
	VADDPS Y9, Y10, Y10  // c2·u + u2·hi
	COEF(8, Y11)
	VMULPS Y7, Y11, Y11  // c8·u
	VADDPS Y10, Y11, Y10
	COEF(1, Y11)
	VADDPS Y10, Y11, Y10 // p
	VCMPPS    $0x0d, 224(R10), Y1, Y11 // ax >= erfOne
	VBLENDVPS Y11, 256(R10), Y10, Y10  // p = 1 there
	VMULPS Y2, Y10, Y10  // p·sign
	VADDPS Y14, Y10, Y10 // + post
	TESTQ  R9, R9
	JZ     store
	VMOVUPS 256(R10), Y12
	VDIVPS  Y10, Y12, Y10 // 1/y

store:
	VMOVUPS Y10, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     loop

done:
	MOVQ AX, ret+56(FP)
	VZEROUPPER
	RET

// COEF3(q, dst): coefficient q of each lane's segment (Y3: the segment,
// Y4: segment > 7, Y5: segment > 15) from tanhCols' row q at R8: three
// groups of eight segments.
#define COEF3(q, dst) \
	VPERMPS   (q*96)(R8), Y3, dst; \
	VPERMPS   (q*96+32)(R8), Y3, Y6; \
	VBLENDVPS Y4, Y6, dst, dst; \
	VPERMPS   (q*96+64)(R8), Y3, Y6; \
	VBLENDVPS Y5, Y6, dst, dst

// func tanhAVX2(d, a *float32, n int, tab *[8][24]float32, c *[tanhRows][8]float32, pre, post float32, recip bool) int
//
// tanhF32's loop eight lanes at a time, with the same float32 operations
// in the same order; it writes n&^7 values and returns how many.
TEXT ·tanhAVX2(SB), NOSPLIT, $0-64
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), R8
	MOVQ c+32(FP), R10
	VBROADCASTSS pre+40(FP), Y15
	VBROADCASTSS post+44(FP), Y14
	MOVBLZX recip+48(FP), R9
	ANDQ $-8, CX
	XORQ AX, AX

tloop:
	CMPQ AX, CX
	JGE  tdone
	VMOVUPS (SI)(AX*4), Y0
	VMULPS  Y15, Y0, Y0      // x *= pre
	VANDPS  0(R10), Y0, Y1   // ab: |x|
	VANDPS  32(R10), Y0, Y2  // the sign bit
	VORPS   64(R10), Y2, Y2  // sign: ±1
	VPSUBD  96(R10), Y1, Y3  // ab - bits(1/4)
	VPSRAD  $21, Y3, Y3
	VPADDD  128(R10), Y3, Y3 // + 1
	VPXOR   Y6, Y6, Y6
	VPMAXSD Y6, Y3, Y3       // 0 below 1/4
	VPMINSD 160(R10), Y3, Y3 // the last segment for everything above
	VPCMPGTD 192(R10), Y3, Y4 // segment > 7
	VPCMPGTD 288(R10), Y3, Y5 // segment > 15

	COEF3(0, Y7)
	VSUBPS Y7, Y1, Y7 // u = ax - c0
	VMULPS Y7, Y7, Y8 // u2
	COEF3(3, Y9)
	COEF3(4, Y10)
	VMULPS Y7, Y10, Y10
	VADDPS Y10, Y9, Y9  // c3 + c4·u
	COEF3(5, Y10)
	COEF3(6, Y11)
	VMULPS Y7, Y11, Y11
	VADDPS Y11, Y10, Y10 // c5 + c6·u
	COEF3(7, Y11)
	VMULPS Y11, Y8, Y11
	VADDPS Y11, Y10, Y10 // (c5 + c6·u) + u2·c7
	VMULPS Y10, Y8, Y10
	VADDPS Y10, Y9, Y9   // hi
	COEF3(2, Y10)
	VMULPS Y7, Y10, Y10  // c2·u
	VMULPS Y9, Y8, Y9    // u2·hi
	VADDPS Y9, Y10, Y10  // c2·u + u2·hi
	COEF3(1, Y11)
	VADDPS Y10, Y11, Y10 // p
	VCMPPS    $0x0d, 224(R10), Y1, Y11 // ax >= tanhOne
	VBLENDVPS Y11, 256(R10), Y10, Y10  // p = 1 there
	VMULPS Y2, Y10, Y10  // p·sign
	VADDPS Y14, Y10, Y10 // + post
	TESTQ  R9, R9
	JZ     tstore
	VMOVUPS 256(R10), Y12
	VDIVPS  Y10, Y12, Y10 // 1/y

tstore:
	VMOVUPS Y10, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     tloop

tdone:
	MOVQ AX, ret+56(FP)
	VZEROUPPER
	RET
