//go:build amd64 && !purego

#include "textflag.h"

// func cfb8TailAESNI(rk *byte, rounds int, buf *byte, n int)
//
// For i from n-1 down to 16: buf[i] ^= AES(rk, buf[i-16:i])[0]. Eight
// positions per pass, all eight registers loaded before any byte of the
// pass is written; a lower pass never reads a byte a higher pass wrote.
TEXT ·cfb8TailAESNI(SB), NOSPLIT, $0-32
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), CX
	MOVQ buf+16(FP), SI
	MOVQ n+24(FP), DX // DX: one past the highest position left
	DECQ CX // middle rounds
loop8:
	MOVQ DX, BX
	SUBQ $24, BX // register of position DX-8 starts at buf[DX-24]
	JL   tail1
	LEAQ (SI)(BX*1), DI
	MOVUPS (AX), X15
	MOVUPS 0(DI), X0
	MOVUPS 1(DI), X1
	MOVUPS 2(DI), X2
	MOVUPS 3(DI), X3
	MOVUPS 4(DI), X4
	MOVUPS 5(DI), X5
	MOVUPS 6(DI), X6
	MOVUPS 7(DI), X7
	PXOR X15, X0
	PXOR X15, X1
	PXOR X15, X2
	PXOR X15, X3
	PXOR X15, X4
	PXOR X15, X5
	PXOR X15, X6
	PXOR X15, X7
	LEAQ 16(AX), R8
	MOVQ CX, R9
round8:
	MOVUPS (R8), X15
	AESENC X15, X0
	AESENC X15, X1
	AESENC X15, X2
	AESENC X15, X3
	AESENC X15, X4
	AESENC X15, X5
	AESENC X15, X6
	AESENC X15, X7
	ADDQ $16, R8
	DECQ R9
	JNZ  round8
	MOVUPS (R8), X15
	AESENCLAST X15, X0
	AESENCLAST X15, X1
	AESENCLAST X15, X2
	AESENCLAST X15, X3
	AESENCLAST X15, X4
	AESENCLAST X15, X5
	AESENCLAST X15, X6
	AESENCLAST X15, X7
	MOVQ X0, R10
	XORB R10B, 16(DI)
	MOVQ X1, R10
	XORB R10B, 17(DI)
	MOVQ X2, R10
	XORB R10B, 18(DI)
	MOVQ X3, R10
	XORB R10B, 19(DI)
	MOVQ X4, R10
	XORB R10B, 20(DI)
	MOVQ X5, R10
	XORB R10B, 21(DI)
	MOVQ X6, R10
	XORB R10B, 22(DI)
	MOVQ X7, R10
	XORB R10B, 23(DI)
	SUBQ $8, DX
	JMP  loop8
tail1:
	CMPQ DX, $16
	JLE  done
	LEAQ -17(SI)(DX*1), DI // register of position DX-1
	MOVUPS (AX), X15
	MOVUPS (DI), X0
	PXOR X15, X0
	LEAQ 16(AX), R8
	MOVQ CX, R9
round1:
	MOVUPS (R8), X15
	AESENC X15, X0
	ADDQ $16, R8
	DECQ R9
	JNZ  round1
	MOVUPS (R8), X15
	AESENCLAST X15, X0
	MOVQ X0, R10
	XORB R10B, 16(DI)
	DECQ DX
	JMP  tail1
done:
	RET
