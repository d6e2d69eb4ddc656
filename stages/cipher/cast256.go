package cipher

import (
	"encoding/binary"
)

// CAST-256, written from RFC 2612 for NSCA's 256-bit key. libmcrypt's
// cast-256 reads the key and the block as little-endian words where the RFC
// reads them big-endian (checked against the RFC's vectors and libmcrypt's
// output), so this does too. In 8-bit CFB only byte 0 of the output is
// used, the low byte of A, final after the second step of the last
// quad-round: its last two steps are skipped.

// cast256Key is the schedule of one quad-round: km[j] and kr[j] are Km_j(i)
// and Kr_j(i) of the RFC.
type cast256Key struct {
	km [4]uint32
	kr [4]uint8
}

// cast256Bulk is a keyed CAST-256.
type cast256Bulk struct {
	q [12]cast256Key
}

func newCAST256Bulk(key []byte) (bulk, error) {
	var k [8]uint32
	if err := keyWords("cast-256", key, k[:], binary.LittleEndian); err != nil {
		return nil, err
	}
	c := &cast256Bulk{}
	cm, cr := uint32(0x5A827999), uint8(19) // 2^30 sqrt(2); the RFC's Cr
	var tm [8]uint32
	var tr [8]uint8
	s := &castS
	// w is the forward octave W(i) of the RFC with the masking and rotation
	// keys Tm_j(i), Tr_j(i), generated in the order the RFC generates them.
	w := func() {
		for j := range 8 {
			tm[j], tr[j] = cm, cr
			cm += 0x6ED9EBA1 // 2^30 sqrt(3)
			cr = (cr + 17) & 31
		}
		k[6] ^= castF1(s, k[7], tm[0], tr[0])
		k[5] ^= castF2(s, k[6], tm[1], tr[1])
		k[4] ^= castF3(s, k[5], tm[2], tr[2])
		k[3] ^= castF1(s, k[4], tm[3], tr[3])
		k[2] ^= castF2(s, k[3], tm[4], tr[4])
		k[1] ^= castF3(s, k[2], tm[5], tr[5])
		k[0] ^= castF1(s, k[1], tm[6], tr[6])
		k[7] ^= castF2(s, k[0], tm[7], tr[7])
	}
	for i := range c.q {
		w()
		w()
		c.q[i] = cast256Key{
			km: [4]uint32{k[7], k[5], k[3], k[1]},
			kr: [4]uint8{uint8(k[0] & 31), uint8(k[2] & 31), uint8(k[4] & 31), uint8(k[6] & 31)},
		}
	}
	clear(k[:])
	return newGroupBulk(c, 16, 2), nil
}

func (c *cast256Bulk) wipe() { *c = cast256Bulk{} }

func cast256Load(b []byte) (uint32, uint32, uint32, uint32) {
	_ = b[15]
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]),
		binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
}

// cast256Q is the RFC's forward quad-round Q(q) on the block (a, b, c, d).
func cast256Q(s *[4][256]uint32, q *cast256Key, a, b, c, d uint32) (uint32, uint32, uint32, uint32) {
	c ^= castF1(s, d, q.km[0], q.kr[0])
	b ^= castF2(s, c, q.km[1], q.kr[1])
	a ^= castF3(s, b, q.km[2], q.kr[2])
	d ^= castF1(s, a, q.km[3], q.kr[3])
	return a, b, c, d
}

// cast256QBar is the RFC's reverse quad-round QBAR(q).
func cast256QBar(s *[4][256]uint32, q *cast256Key, a, b, c, d uint32) (uint32, uint32, uint32, uint32) {
	d ^= castF1(s, a, q.km[3], q.kr[3])
	a ^= castF3(s, b, q.km[2], q.kr[2])
	b ^= castF2(s, c, q.km[1], q.kr[1])
	c ^= castF1(s, d, q.km[0], q.kr[0])
	return a, b, c, d
}

// group encrypts the two registers w[0:16] and w[1:17] together, so that
// their table loads overlap. (Four blocks need more registers than amd64
// has, and run no faster.) The quad-rounds are calls, not inlined, and run
// as fast as the two blocks' steps written out interleaved.
func (c *cast256Bulk) group(w []byte) {
	s := &castS
	w = w[:18]
	a0, a1, a2, a3 := cast256Load(w[0:16])
	b0, b1, b2, b3 := cast256Load(w[1:17])
	for i := range 6 {
		a0, a1, a2, a3 = cast256Q(s, &c.q[i], a0, a1, a2, a3)
		b0, b1, b2, b3 = cast256Q(s, &c.q[i], b0, b1, b2, b3)
	}
	for i := 6; i < 11; i++ {
		a0, a1, a2, a3 = cast256QBar(s, &c.q[i], a0, a1, a2, a3)
		b0, b1, b2, b3 = cast256QBar(s, &c.q[i], b0, b1, b2, b3)
	}
	// The last QBAR's first two steps: they make A.
	q := &c.q[11]
	a3 ^= castF1(s, a0, q.km[3], q.kr[3])
	b3 ^= castF1(s, b0, q.km[3], q.kr[3])
	a0 ^= castF3(s, a1, q.km[2], q.kr[2])
	b0 ^= castF3(s, b1, q.km[2], q.kr[2])
	w[16] ^= byte(a0)
	w[17] ^= byte(b0)
}
