package cipher

import (
	"encoding/binary"
	"errors"
)

// SAFER+ (libmcrypt's saferplus, method 26), written from Cylink's AES
// submission for 8-bit CFB with NSCA's 32-byte key: 16 rounds, 33 round
// keys. libmcrypt's implementation departs from the submission in its byte
// order, which is what NSCA speaks: it reverses the order of the key's eight
// 4-byte words, and of the block's four, before the cipher sees them (and
// of the block's after), keeping each word's bytes in order.

// saferExp is x -> 45^x mod 257 (256 written as 0), saferLog its inverse.
var saferExp, saferLog = func() (e, l [256]byte) {
	v := 1
	for x := range 256 {
		e[x] = byte(v) // 45^128 = 256 becomes 0
		l[byte(v)] = byte(x)
		v = v * 45 % 257
	}
	return e, l
}()

// saferBulk is SAFER+ keyed with 32 bytes, for four blocks at once: each
// uint64 holds one byte position of four blocks in its four 16-bit lanes.
// Only a lane's low byte matters (the cipher works mod 256); its high byte
// collects carries, which stay inside the lane: a round's PHTs grow a lane
// at most 81-fold from at most 510, and 510*81 + 255 < 65536.
//
// rk[r] are round r's two keys (K_{2r+1}, K_{2r+2}), each byte repeated in
// the four lanes; out is the byte of K_33 that reaches the output's first
// byte.
type saferBulk struct {
	rk  [16][2][16]uint64
	out byte
}

func newSaferBulk(key []byte) (bulk, error) {
	if len(key) != 32 {
		return nil, errors.New("SAFER+ key is not 32 bytes")
	}
	// The key register: the key's bytes, libmcrypt's word order reversed,
	// then their XOR.
	var kr [33]byte
	for i := range 32 {
		kr[i] = key[4*(7-i/4)+i%4]
		kr[32] ^= kr[i]
	}
	var ks [33][16]byte // K_1..K_33
	copy(ks[0][:], kr[:16])
	for i := 1; i < 33; i++ {
		for j := range kr {
			kr[j] = kr[j]<<3 | kr[j]>>5
		}
		for j := range 16 {
			// The bias words: B_{i+1}[j] = 45^(45^(17(i+1)+j+1)) for the
			// first 16 keys after K_1, 45^(17(i+1)+j+1) after (mod 257).
			b := saferExp[byte(17*(i+1)+j+1)]
			if i <= 16 {
				b = saferExp[b]
			}
			ks[i][j] = kr[(i+j)%33] + b
		}
	}
	s := &saferBulk{out: ks[32][12]}
	for r := range 16 {
		for h := range 2 {
			for j := range 16 {
				s.rk[r][h][j] = uint64(ks[2*r+h][j]) * saferLanes
			}
		}
	}
	clear(kr[:])
	ks = [33][16]byte{}
	return newGroupBulk(s, 16, 4), nil
}

func (s *saferBulk) wipe() { *s = saferBulk{} }

// saferLanes has 1 in the low byte of each 16-bit lane.
const saferLanes = 0x0001_0001_0001_0001

// saferSpread puts the four bytes of v, lowest first, into the low bytes of
// the four lanes.
func saferSpread(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000_ffff_0000_ffff
	return (x | x<<8) & 0x00ff_00ff_00ff_00ff
}

// saferLook is t applied to the low byte of each lane of x.
func saferLook(t *[256]byte, x uint64) uint64 {
	return uint64(t[byte(x)]) | uint64(t[byte(x>>16)])<<16 | uint64(t[byte(x>>32)])<<32 | uint64(t[byte(x>>48)])<<48
}

// saferE and saferL are the two kinds of byte in a round's first half:
// exp of x XOR a, plus b; log of x plus a, XOR b.
func saferE(x, a, b uint64) uint64 { return saferLook(&saferExp, x^a) + b }
func saferL(x, a, b uint64) uint64 { return saferLook(&saferLog, x+a) ^ b }

// pht is SAFER+'s 2-point pseudo-Hadamard transform, lane by lane.
func pht(a, b uint64) (uint64, uint64) { return 2*a + b, a + b }

// group encrypts the four registers w[0:16], ..., w[3:19].
func (s *saferBulk) group(w []byte) {
	w = w[:20]
	// The cipher's byte j is the block's byte 4(3 - j/4) + j%4 (the words
	// in reverse order); the four blocks' bytes there are consecutive.
	x0 := saferSpread(binary.LittleEndian.Uint32(w[12:]))
	x1 := saferSpread(binary.LittleEndian.Uint32(w[13:]))
	x2 := saferSpread(binary.LittleEndian.Uint32(w[14:]))
	x3 := saferSpread(binary.LittleEndian.Uint32(w[15:]))
	x4 := saferSpread(binary.LittleEndian.Uint32(w[8:]))
	x5 := saferSpread(binary.LittleEndian.Uint32(w[9:]))
	x6 := saferSpread(binary.LittleEndian.Uint32(w[10:]))
	x7 := saferSpread(binary.LittleEndian.Uint32(w[11:]))
	x8 := saferSpread(binary.LittleEndian.Uint32(w[4:]))
	x9 := saferSpread(binary.LittleEndian.Uint32(w[5:]))
	x10 := saferSpread(binary.LittleEndian.Uint32(w[6:]))
	x11 := saferSpread(binary.LittleEndian.Uint32(w[7:]))
	x12 := saferSpread(binary.LittleEndian.Uint32(w[0:]))
	x13 := saferSpread(binary.LittleEndian.Uint32(w[1:]))
	x14 := saferSpread(binary.LittleEndian.Uint32(w[2:]))
	x15 := saferSpread(binary.LittleEndian.Uint32(w[3:]))
	for r := range s.rk {
		a, b := &s.rk[r][0], &s.rk[r][1]
		x0 = saferE(x0, a[0], b[0])
		x1 = saferL(x1, a[1], b[1])
		x2 = saferL(x2, a[2], b[2])
		x3 = saferE(x3, a[3], b[3])
		x4 = saferE(x4, a[4], b[4])
		x5 = saferL(x5, a[5], b[5])
		x6 = saferL(x6, a[6], b[6])
		x7 = saferE(x7, a[7], b[7])
		x8 = saferE(x8, a[8], b[8])
		x9 = saferL(x9, a[9], b[9])
		x10 = saferL(x10, a[10], b[10])
		x11 = saferE(x11, a[11], b[11])
		x12 = saferE(x12, a[12], b[12])
		x13 = saferL(x13, a[13], b[13])
		x14 = saferL(x14, a[14], b[14])
		x15 = saferE(x15, a[15], b[15])
		// Four layers of PHTs on neighbouring bytes with the Armenian
		// shuffle between them, (x8, x11, x12, x15, x2, x1, x6, x5, x10,
		// x9, x14, x13, x0, x7, x4, x3), done by renaming: each layer pairs
		// the bytes the shuffles have brought next to each other.
		x0, x1 = pht(x0, x1)
		x2, x3 = pht(x2, x3)
		x4, x5 = pht(x4, x5)
		x6, x7 = pht(x6, x7)
		x8, x9 = pht(x8, x9)
		x10, x11 = pht(x10, x11)
		x12, x13 = pht(x12, x13)
		x14, x15 = pht(x14, x15)

		x8, x11 = pht(x8, x11)
		x12, x15 = pht(x12, x15)
		x2, x1 = pht(x2, x1)
		x6, x5 = pht(x6, x5)
		x10, x9 = pht(x10, x9)
		x14, x13 = pht(x14, x13)
		x0, x7 = pht(x0, x7)
		x4, x3 = pht(x4, x3)

		x10, x13 = pht(x10, x13)
		x0, x3 = pht(x0, x3)
		x12, x11 = pht(x12, x11)
		x6, x1 = pht(x6, x1)
		x14, x9 = pht(x14, x9)
		x4, x7 = pht(x4, x7)
		x8, x5 = pht(x8, x5)
		x2, x15 = pht(x2, x15)

		x14, x7 = pht(x14, x7)
		x8, x15 = pht(x8, x15)
		x0, x13 = pht(x0, x13)
		x6, x11 = pht(x6, x11)
		x4, x9 = pht(x4, x9)
		x2, x5 = pht(x2, x5)
		x10, x1 = pht(x10, x1)
		x12, x3 = pht(x12, x3)

		// Back in position order (x6 and x9 are already).
		x0, x1, x2, x3, x4, x5, x7, x8, x10, x11, x12, x13, x14, x15 =
			x14, x7, x8, x15, x0, x13, x11, x4, x2, x5, x10, x1, x12, x3
	}
	// The output's first byte is the cipher's byte 12, which takes its
	// key byte by XOR.
	xor4(w[16:], uint32(lowBytes4(x12))^uint32(s.out)*0x01010101)
}
