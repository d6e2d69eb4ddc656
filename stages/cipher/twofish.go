package cipher

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// Twofish, written from Schneier et al., "Twofish: A 128-Bit Block Cipher"
// (1998), for NSCA's 256-bit key, which libmcrypt's twofish takes in the
// paper's byte order (its known-answer vectors match). The key-dependent
// S-boxes and the MDS matrix are folded into four 256-entry tables per key.
// In 8-bit CFB only byte 0 of the output is used: that is output word 0,
// R16[2] = R15[0], which the 16th round does not touch, so 15 rounds do.

// twofishQT are the 4-bit permutations t0..t3 that build q0 and q1.
var twofishQT = [2][4][16]byte{
	{
		{0x8, 0x1, 0x7, 0xD, 0x6, 0xF, 0x3, 0x2, 0x0, 0xB, 0x5, 0x9, 0xE, 0xC, 0xA, 0x4},
		{0xE, 0xC, 0xB, 0x8, 0x1, 0x2, 0x3, 0x5, 0xF, 0x4, 0xA, 0x6, 0x7, 0x0, 0x9, 0xD},
		{0xB, 0xA, 0x5, 0xE, 0x6, 0xD, 0x9, 0x0, 0xC, 0x8, 0xF, 0x3, 0x2, 0x4, 0x7, 0x1},
		{0xD, 0x7, 0xF, 0x4, 0x1, 0x2, 0x6, 0xE, 0x9, 0xB, 0x3, 0x0, 0x8, 0x5, 0xC, 0xA},
	},
	{
		{0x2, 0x8, 0xB, 0xD, 0xF, 0x7, 0x6, 0xE, 0x3, 0x1, 0x9, 0x4, 0x0, 0xA, 0xC, 0x5},
		{0x1, 0xE, 0x2, 0xB, 0x4, 0xC, 0x3, 0x7, 0x6, 0xD, 0xA, 0x5, 0xF, 0x9, 0x0, 0x8},
		{0x4, 0xC, 0x7, 0x5, 0x1, 0x6, 0x9, 0xA, 0x0, 0xE, 0xD, 0x8, 0x2, 0xB, 0x3, 0xF},
		{0xB, 0x9, 0x5, 0x1, 0xC, 0x3, 0xD, 0xE, 0x6, 0x4, 0x7, 0xF, 0x2, 0x0, 0x8, 0xA},
	},
}

var (
	// twofishQ are the fixed byte permutations q0 and q1.
	twofishQ = makeTwofishQ()
	// twofishOrder[j] are the q-boxes byte j of h passes through for a
	// 256-bit key, first to last.
	twofishOrder = [4][5]byte{{1, 1, 0, 0, 1}, {0, 1, 1, 0, 0}, {0, 0, 0, 1, 1}, {1, 0, 1, 1, 0}}
	// twofishMDS is the MDS matrix over GF(2^8) modulo x^8+x^6+x^5+x^3+1.
	twofishMDS = [4][4]byte{
		{0x01, 0xEF, 0x5B, 0x5B},
		{0x5B, 0xEF, 0xEF, 0x01},
		{0xEF, 0x5B, 0x01, 0xEF},
		{0xEF, 0x01, 0xEF, 0x5B},
	}
	// twofishRS is the Reed-Solomon matrix over GF(2^8) modulo
	// x^8+x^6+x^3+x^2+1 that derives the S-box key from the key.
	twofishRS = [4][8]byte{
		{0x01, 0xA4, 0x55, 0x87, 0x5A, 0x58, 0xDB, 0x9E},
		{0xA4, 0x56, 0x82, 0xF3, 0x1E, 0xC6, 0x68, 0xE5},
		{0x02, 0xA1, 0xFC, 0xC1, 0x47, 0xAE, 0x3D, 0x19},
		{0xA4, 0x55, 0x87, 0x5A, 0x58, 0xDB, 0x9E, 0x03},
	}
)

func makeTwofishQ() (q [2][256]byte) {
	ror4 := func(x byte) byte { return (x>>1 | x<<3) & 15 }
	for n := range 2 {
		t := &twofishQT[n]
		for x := range 256 {
			a, b := byte(x>>4), byte(x&15)
			a, b = a^b, a^ror4(b)^(a<<3)&15
			a, b = t[0][a], t[1][b]
			a, b = a^b, a^ror4(b)^(a<<3)&15
			a, b = t[2][a], t[3][b]
			q[n][x] = b<<4 | a
		}
	}
	return q
}

// twofishGFMul multiplies in GF(2^8) modulo x^8 + the low bits poly,
// without branches (it sees key bytes).
func twofishGFMul(a, b, poly byte) byte {
	var p byte
	for range 8 {
		p ^= a & -(b & 1)
		a = a<<1 ^ poly&-(a>>7)
		b >>= 1
	}
	return p
}

// twofishMDSTab[j][y] is the MDS matrix's column j times y, as a
// little-endian word: the key schedule looks it up 1024 times per key.
var twofishMDSTab = makeTwofishMDSTab()

func makeTwofishMDSTab() (m [4][256]uint32) {
	for j := range 4 {
		for y := range 256 {
			for i := range 4 {
				m[j][y] |= uint32(twofishGFMul(twofishMDS[i][j], byte(y), 0x69)) << (8 * i)
			}
		}
	}
	return m
}

// twofishChain is byte j of h before the MDS: x through the q-boxes, XORed
// with byte j of the list words l[3], l[2], l[1], l[0] in between.
func twofishChain(j int, x byte, l *[4]uint32) byte {
	o := &twofishOrder[j]
	for i := range 4 {
		x = twofishQ[o[i]][x] ^ byte(l[3-i]>>(8*j))
	}
	return twofishQ[o[4]][x]
}

// twofishH is the function h of the paper for a 256-bit key.
func twofishH(x uint32, l *[4]uint32) uint32 {
	var z uint32
	for j := range 4 {
		z ^= twofishMDSTab[j][twofishChain(j, byte(x>>(8*j)), l)]
	}
	return z
}

// twofishBulk is a keyed Twofish: s are the fully keyed S-box-and-MDS
// tables, so that g(x) = s[0][x0]^s[1][x1]^s[2][x2]^s[3][x3]; k the 40
// whitening and round subkeys.
type twofishBulk struct {
	s [4][256]uint32
	k [40]uint32
}

func newTwofishBulk(key []byte) (bulk, error) {
	if len(key) != 32 {
		return nil, errors.New("twofish key is not 32 bytes")
	}
	t := &twofishBulk{}
	var me, mo, sk [4]uint32
	for i := range 4 {
		me[i] = binary.LittleEndian.Uint32(key[8*i:])
		mo[i] = binary.LittleEndian.Uint32(key[8*i+4:])
		// S is used in reverse: the list of g is (S3, S2, S1, S0).
		for r := range 4 {
			var s byte
			for c := range 8 {
				s ^= twofishGFMul(twofishRS[r][c], key[8*i+c], 0x4D)
			}
			sk[3-i] |= uint32(s) << (8 * r)
		}
	}
	const rho = 0x01010101
	for i := range uint32(20) {
		a := twofishH(2*i*rho, &me)
		b := bits.RotateLeft32(twofishH((2*i+1)*rho, &mo), 8)
		t.k[2*i] = a + b
		t.k[2*i+1] = bits.RotateLeft32(a+2*b, 9)
	}
	// twofishChain for all 256 bytes, its loop unrolled.
	for j := range 4 {
		o := &twofishOrder[j]
		q0, q1, q2, q3, q4 := &twofishQ[o[0]], &twofishQ[o[1]], &twofishQ[o[2]], &twofishQ[o[3]], &twofishQ[o[4]]
		l3, l2, l1, l0 := byte(sk[3]>>(8*j)), byte(sk[2]>>(8*j)), byte(sk[1]>>(8*j)), byte(sk[0]>>(8*j))
		m, s := &twofishMDSTab[j], &t.s[j]
		for x := range 256 {
			s[x] = m[q4[q3[q2[q1[q0[x]^l3]^l2]^l1]^l0]]
		}
	}
	clear(me[:])
	clear(mo[:])
	clear(sk[:])
	return t, nil
}

func (t *twofishBulk) wipe() { *t = twofishBulk{} }

// in loads block b (16 bytes) with the input whitening.
func (t *twofishBulk) in(b []byte) (a, c, d, e uint32) {
	_ = b[15]
	return binary.LittleEndian.Uint32(b) ^ t.k[0], binary.LittleEndian.Uint32(b[4:]) ^ t.k[1],
		binary.LittleEndian.Uint32(b[8:]) ^ t.k[2], binary.LittleEndian.Uint32(b[12:]) ^ t.k[3]
}

// one returns byte 0 of the encryption of block b.
func (t *twofishBulk) one(b []byte) byte {
	s0, s1, s2, s3 := &t.s[0], &t.s[1], &t.s[2], &t.s[3]
	g := func(x uint32) uint32 { return s0[byte(x)] ^ s1[byte(x>>8)] ^ s2[byte(x>>16)] ^ s3[x>>24] }
	r0, r1, r2, r3 := t.in(b)
	k := t.k[8:]
	for range 7 {
		x, y := g(r0), g(bits.RotateLeft32(r1, 8))
		r2 = bits.RotateLeft32(r2^(x+y+k[0]), -1)
		r3 = bits.RotateLeft32(r3, 1) ^ (x + 2*y + k[1])
		x, y = g(r2), g(bits.RotateLeft32(r3, 8))
		r0 = bits.RotateLeft32(r0^(x+y+k[2]), -1)
		r1 = bits.RotateLeft32(r1, 1) ^ (x + 2*y + k[3])
		k = k[4:]
	}
	x, y := g(r0), g(bits.RotateLeft32(r1, 8))
	return byte(bits.RotateLeft32(r2^(x+y+k[0]), -1) ^ t.k[4])
}

// two is one for the two blocks at b[0:16] and b[1:17], their rounds
// interleaved so that the table loads overlap. (Four blocks need more
// registers than amd64 has, and run no faster.)
func (t *twofishBulk) two(b []byte) (byte, byte) {
	s0, s1, s2, s3 := &t.s[0], &t.s[1], &t.s[2], &t.s[3]
	g := func(x uint32) uint32 { return s0[byte(x)] ^ s1[byte(x>>8)] ^ s2[byte(x>>16)] ^ s3[x>>24] }
	// g8 is g of x rotated left by 8.
	g8 := func(x uint32) uint32 { return s0[x>>24] ^ s1[byte(x)] ^ s2[byte(x>>8)] ^ s3[byte(x>>16)] }
	_ = b[16]
	a0, a1, a2, a3 := t.in(b[0:16])
	b0, b1, b2, b3 := t.in(b[1:17])
	for r := 0; r < 7; r++ {
		k := (*[4]uint32)(t.k[8+4*r:])
		xa, ya := g(a0), g8(a1)
		xb, yb := g(b0), g8(b1)
		a2 = bits.RotateLeft32(a2^(xa+ya+k[0]), -1)
		a3 = bits.RotateLeft32(a3, 1) ^ (xa + 2*ya + k[1])
		b2 = bits.RotateLeft32(b2^(xb+yb+k[0]), -1)
		b3 = bits.RotateLeft32(b3, 1) ^ (xb + 2*yb + k[1])
		xa, ya = g(a2), g8(a3)
		xb, yb = g(b2), g8(b3)
		a0 = bits.RotateLeft32(a0^(xa+ya+k[2]), -1)
		a1 = bits.RotateLeft32(a1, 1) ^ (xa + 2*ya + k[3])
		b0 = bits.RotateLeft32(b0^(xb+yb+k[2]), -1)
		b1 = bits.RotateLeft32(b1, 1) ^ (xb + 2*yb + k[3])
	}
	k0, k4 := t.k[36], t.k[4]
	ra := a2 ^ (g(a0) + g8(a1) + k0)
	rb := b2 ^ (g(b0) + g8(b1) + k0)
	return byte(bits.RotateLeft32(ra, -1) ^ k4), byte(bits.RotateLeft32(rb, -1) ^ k4)
}

func (t *twofishBulk) tail(buf []byte) {
	i := len(buf) // one past the highest position left
	for ; i-2 >= 16; i -= 2 {
		p := i - 2
		k0, k1 := t.two(buf[p-16 : p+1])
		buf[p] ^= k0
		buf[p+1] ^= k1
	}
	if i > 16 {
		buf[i-1] ^= t.one(buf[i-17 : i-1])
	}
}
