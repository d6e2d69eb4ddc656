package cipher

import "encoding/binary"

// grouped is a keyed cipher that, for 8-bit CFB, encrypts a group of
// consecutive registers at once and keeps only the first output byte of
// each: running independent blocks through the rounds together lets their
// table loads and arithmetic overlap instead of waiting on one another.
type grouped interface {
	// group XORs into w[bs:] the first output bytes of encrypting the
	// registers w[j:j+bs], j = 0, 1, ..., len(w)-bs-1, where bs is the
	// block size and len(w) is bs plus the group's width. The later
	// registers overlap the bytes it writes, so it reads them all first.
	group(w []byte)
	// wipe overwrites the key schedule.
	wipe()
}

// groupBulk is the bulk of a grouped cipher with block size bs and n
// registers a group.
type groupBulk struct {
	g     grouped
	bs, n int
	pad   [16 + 64]byte // a partial group (serpent's 64 after 16 at the most)
}

func newGroupBulk(g grouped, bs, n int) *groupBulk {
	if bs+n > len(groupBulk{}.pad) {
		panic("cipher: group window too large")
	}
	return &groupBulk{g: g, bs: bs, n: n}
}

// tail goes down buf a group at a time, so that every register is still
// ciphertext when it is read; the last (lowest) positions, fewer than a
// group, run as a zero-padded copy whose extra positions are dropped.
func (b *groupBulk) tail(buf []byte) {
	bs, n := b.bs, b.n
	hi := len(buf) // one past the highest position left
	for ; hi-n >= bs; hi -= n {
		b.g.group(buf[hi-n-bs : hi])
	}
	if hi > bs {
		w := b.pad[:bs+n]
		copy(w, buf[:hi])
		clear(w[hi:])
		b.g.group(w)
		copy(buf[bs:hi], w[bs:hi])
		clear(w)
	}
}

func (b *groupBulk) wipe() { b.g.wipe() }

// xor4 XORs the four bytes of k, the lowest first, into c[0:4].
func xor4(c []byte, k uint32) {
	binary.LittleEndian.PutUint32(c, binary.LittleEndian.Uint32(c)^k)
}
