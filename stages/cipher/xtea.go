package cipher

import (
	"encoding/binary"
	"errors"
)

// XTEA (Needham and Wheeler, 1997) as libmcrypt's "xtea" runs it: 32 cycles,
// the 16-byte key and each block read as big-endian words (checked against
// libmcrypt by the tests and by SelfTest).

const xteaDelta = 0x9e3779b9

// xteaBulk holds the 64 half-cycle subkeys sum+key[...]: the sum runs the
// same for every block, so each half-cycle adds one constant.
type xteaBulk struct {
	rk [64]uint32
}

func newXTEABulk(key []byte) (bulk, error) {
	if len(key) != 16 {
		return nil, errors.New("xtea key is not 16 bytes")
	}
	var k [4]uint32
	for i := range k {
		k[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	x := &xteaBulk{}
	var sum uint32
	for c := range 32 {
		x.rk[2*c] = sum + k[sum&3]
		sum += xteaDelta
		x.rk[2*c+1] = sum + k[sum>>11&3]
	}
	return x, nil
}

func (x *xteaBulk) wipe()           { clear(x.rk[:]) }
func (x *xteaBulk) tail(buf []byte) { tail64(x, buf) }

func xteaMix(v uint32) uint32 { return (v<<4 ^ v>>5) + v }

// four runs the cycles on four blocks; the first output byte is the top of
// v0, so the last half-cycle, which only changes v1, is left out.
func (x *xteaBulk) four(b0, b1, b2, b3 uint64) uint32 {
	a0, c0 := uint32(b0>>32), uint32(b0)
	a1, c1 := uint32(b1>>32), uint32(b1)
	a2, c2 := uint32(b2>>32), uint32(b2)
	a3, c3 := uint32(b3>>32), uint32(b3)
	rk := &x.rk
	for r := 0; r < 62; r += 2 {
		k := rk[r]
		a0 += xteaMix(c0) ^ k
		a1 += xteaMix(c1) ^ k
		a2 += xteaMix(c2) ^ k
		a3 += xteaMix(c3) ^ k
		k = rk[r+1]
		c0 += xteaMix(a0) ^ k
		c1 += xteaMix(a1) ^ k
		c2 += xteaMix(a2) ^ k
		c3 += xteaMix(a3) ^ k
	}
	k := rk[62]
	a0 += xteaMix(c0) ^ k
	a1 += xteaMix(c1) ^ k
	a2 += xteaMix(c2) ^ k
	a3 += xteaMix(c3) ^ k
	return a0>>24 | a1>>24<<8 | a2>>24<<16 | a3>>24<<24
}
