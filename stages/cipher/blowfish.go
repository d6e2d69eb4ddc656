package cipher

import (
	"errors"
	"math/big"
	"sync"
)

// Blowfish (Schneier, 1993) as libmcrypt's "blowfish" runs it: the textbook
// cipher with big-endian block words, keyed with all 56 bytes NSCA hands it
// (checked against libmcrypt by the tests and by SelfTest; libmcrypt's
// "blowfish-compat", which NSCA does not use, is the one that swaps bytes).

// blowfishPi is the initial P-array and S-boxes: the first 18+4*256 32-bit
// words of the fractional part of pi. They are computed once, when the first
// Blowfish key is made (some milliseconds), rather than kept as a table.
var blowfishPi = sync.OnceValue(func() *[18 + 4*256]uint32 {
	var out [18 + 4*256]uint32
	const guard = 64 // far more than the error of the truncated sums below
	prec := uint(32*len(out) + guard)
	// Machin: pi = 16 atan(1/5) - 4 atan(1/239), in fixed point.
	pi := new(big.Int).Lsh(arctanInv(5, prec), 4)
	pi.Sub(pi, new(big.Int).Lsh(arctanInv(239, prec), 2))
	pi.Rsh(pi, guard)
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = uint32(pi.Uint64())
		pi.Rsh(pi, 32)
	}
	return &out
})

// arctanInv is atan(1/x) * 2^prec, by its Taylor series.
func arctanInv(x int64, prec uint) *big.Int {
	term := new(big.Int).Lsh(big.NewInt(1), prec)
	term.Quo(term, big.NewInt(x))
	sum := new(big.Int).Set(term)
	x2 := big.NewInt(x * x)
	var t, n big.Int
	for k := int64(1); term.Sign() != 0; k++ {
		term.Quo(term, x2)
		t.Quo(term, n.SetInt64(2*k+1))
		if k&1 == 1 {
			sum.Sub(sum, &t)
		} else {
			sum.Add(sum, &t)
		}
	}
	return sum
}

type blowfishBulk struct {
	p [18]uint32
	s [4][256]uint32
}

func newBlowfishBulk(key []byte) (bulk, error) {
	if len(key) == 0 || len(key) > 56 {
		return nil, errors.New("blowfish key is not 1 to 56 bytes")
	}
	b := &blowfishBulk{}
	init := blowfishPi()
	copy(b.p[:], init[:18])
	for i := range b.s {
		copy(b.s[i][:], init[18+256*i:])
	}
	j := 0
	for i := range b.p {
		var w uint32
		for range 4 {
			w = w<<8 | uint32(key[j])
			if j++; j == len(key) {
				j = 0
			}
		}
		b.p[i] ^= w
	}
	var l, r uint32
	for i := 0; i < len(b.p); i += 2 {
		l, r = b.encrypt(l, r)
		b.p[i], b.p[i+1] = l, r
	}
	for i := range b.s {
		for j := 0; j < 256; j += 2 {
			l, r = b.encrypt(l, r)
			b.s[i][j], b.s[i][j+1] = l, r
		}
	}
	return b, nil
}

func (b *blowfishBulk) wipe() {
	clear(b.p[:])
	clear(b.s[:])
}

func (b *blowfishBulk) tail(buf []byte) { tail64(b, buf) }

func (b *blowfishBulk) f(x uint32) uint32 {
	s := &b.s
	return (s[0][byte(x>>24)] + s[1][byte(x>>16)] ^ s[2][byte(x>>8)]) + s[3][byte(x)]
}

// encrypt is the whole cipher on one block, for the key schedule: sixteen
// rounds written as eight pairs, so the halves never swap.
func (b *blowfishBulk) encrypt(l, r uint32) (uint32, uint32) {
	for i := 0; i < 16; i += 2 {
		l ^= b.p[i]
		r ^= b.f(l)
		r ^= b.p[i+1]
		l ^= b.f(r)
	}
	return r ^ b.p[17], l ^ b.p[16]
}

// four is encrypt on four blocks, returning the first bytes: those come from
// the right half, so the last round's function, which only changes the left
// half, is left out.
func (b *blowfishBulk) four(x0, x1, x2, x3 uint64) uint32 {
	l0, r0 := uint32(x0>>32), uint32(x0)
	l1, r1 := uint32(x1>>32), uint32(x1)
	l2, r2 := uint32(x2>>32), uint32(x2)
	l3, r3 := uint32(x3>>32), uint32(x3)
	p := &b.p
	for i := 0; i < 16; i += 2 {
		k := p[i]
		l0 ^= k
		l1 ^= k
		l2 ^= k
		l3 ^= k
		k = p[i+1]
		r0 ^= b.f(l0) ^ k
		r1 ^= b.f(l1) ^ k
		r2 ^= b.f(l2) ^ k
		r3 ^= b.f(l3) ^ k
		if i == 14 {
			break
		}
		l0 ^= b.f(r0)
		l1 ^= b.f(r1)
		l2 ^= b.f(r2)
		l3 ^= b.f(r3)
	}
	k := p[17]
	return (r0^k)>>24 | (r1^k)>>24<<8 | (r2^k)>>24<<16 | (r3^k)>>24<<24
}
