package cipher

import "encoding/binary"

// A grouped cipher, for 8-bit CFB, encrypts a group of consecutive
// registers at once and keeps only the first output byte of each: running
// independent blocks through the rounds together lets their table loads and
// arithmetic overlap instead of waiting on one another. It has one of two
// forms, windowed or quad64.
type grouped interface {
	// wipe overwrites the key schedule.
	wipe()
}

// windowed is the general form, for any block size bs and group width.
type windowed interface {
	grouped
	// group XORs into w[bs:] the first output bytes of encrypting the
	// registers w[j:j+bs], j = 0, 1, ..., len(w)-bs-1, where len(w) is bs
	// plus the group's width. The later registers overlap the bytes it
	// writes, so it reads them all first.
	group(w []byte)
}

// quad64 is the form for 8-byte blocks four at a time with the blocks in
// registers, for ciphers whose rounds need every register: with the window
// to carry as well, Blowfish runs 5% slower.
type quad64 interface {
	grouped
	// four returns the first output bytes of encrypting the big-endian
	// blocks x0..x3, the one of x0 in the lowest byte.
	four(x0, x1, x2, x3 uint64) uint32
}

// groupBulk is the bulk of a grouped cipher with block size bs and n
// registers a group.
type groupBulk struct {
	g     grouped
	q     quad64   // g if it is one
	w     windowed // g if it is one
	bs, n int
	pad   [16 + 64]byte // a partial group (serpent's 64 after 16 at the most)
}

// newGroupBulk is the bulk of g, a windowed or a quad64 (bs 8, n 4).
func newGroupBulk(g grouped, bs, n int) *groupBulk {
	b := &groupBulk{g: g, bs: bs, n: n}
	b.q, _ = g.(quad64)
	b.w, _ = g.(windowed)
	if (b.q == nil) == (b.w == nil) || b.q != nil && (bs != 8 || n != 4) || bs+n > len(b.pad) {
		panic("cipher: bad group form")
	}
	return b
}

// tail goes down buf a group at a time, so that every register is still
// ciphertext when it is read; the last (lowest) positions, fewer than a
// group, run as a zero-padded copy whose extra positions are dropped.
func (b *groupBulk) tail(buf []byte) {
	bs, n := b.bs, b.n
	hi := b.groups(buf)
	if hi > bs {
		w := b.pad[:bs+n]
		copy(w, buf[:hi])
		clear(w[hi:])
		b.groups(w)
		copy(buf[bs:hi], w[bs:hi])
		clear(w)
	}
}

// groups runs the whole groups of buf from the top down and returns where
// they stop: one past the highest position left.
func (b *groupBulk) groups(buf []byte) int {
	bs, n := b.bs, b.n
	hi := len(buf)
	if q := b.q; q != nil {
		for ; hi-4 >= 8; hi -= 4 {
			w := buf[hi-12 : hi]
			xor4(w[8:], q.four(binary.BigEndian.Uint64(w[0:]), binary.BigEndian.Uint64(w[1:]),
				binary.BigEndian.Uint64(w[2:]), binary.BigEndian.Uint64(w[3:])))
		}
		return hi
	}
	for ; hi-n >= bs; hi -= n {
		b.w.group(buf[hi-n-bs : hi])
	}
	return hi
}

func (b *groupBulk) wipe() { b.g.wipe() }

// xor4 XORs the four bytes of k, the lowest first, into c[0:4].
func xor4(c []byte, k uint32) {
	binary.LittleEndian.PutUint32(c, binary.LittleEndian.Uint32(c)^k)
}

// split4 splits four 8-byte blocks into their big-endian (left, right)
// word pairs.
func split4(x0, x1, x2, x3 uint64) (l0, r0, l1, r1, l2, r2, l3, r3 uint32) {
	return uint32(x0 >> 32), uint32(x0), uint32(x1 >> 32), uint32(x1),
		uint32(x2 >> 32), uint32(x2), uint32(x3 >> 32), uint32(x3)
}

// tops4 is the first bytes of four big-endian words, a's lowest.
func tops4(a, b, c, d uint32) uint32 {
	return a>>24 | b>>24<<8 | c>>24<<16 | d>>24<<24
}
