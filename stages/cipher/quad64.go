package cipher

import "encoding/binary"

// quad64 is a keyed cipher with 8-byte blocks that encrypts four independent
// blocks at once and returns only the first output byte of each, which is all
// 8-bit CFB uses. Running four blocks through the rounds together lets their
// table loads and arithmetic overlap instead of waiting on one another.
type quad64 interface {
	// four returns the first output bytes of encrypting the big-endian
	// blocks x0..x3, the one of x0 in the lowest byte.
	four(x0, x1, x2, x3 uint64) uint32
}

// oct64 is a quad64 that also encrypts eight blocks at once, for ciphers
// whose four-block form leaves the processor idle (RC2's serial 16-bit
// steps): as four, with the first byte of x0 in the lowest byte.
type oct64 interface {
	quad64
	eight(x0, x1, x2, x3, x4, x5, x6, x7 uint64) uint64
}

// tail64 is bulk.tail for a quad64: eight bytes per call if it is an oct64,
// four otherwise, going down so that every register is still ciphertext
// when it is read.
func tail64(q quad64, buf []byte) {
	i := len(buf) // one past the highest position left
	if o, ok := q.(oct64); ok {
		be := binary.BigEndian.Uint64
		for ; i-8 >= 8; i -= 8 {
			p := i - 8
			w := buf[p-8 : p+8]
			k := o.eight(be(w[0:]), be(w[1:]), be(w[2:]), be(w[3:]), be(w[4:]), be(w[5:]), be(w[6:]), be(w[7:]))
			c := buf[p : p+8]
			binary.LittleEndian.PutUint64(c, binary.LittleEndian.Uint64(c)^k)
		}
	}
	for ; i-4 >= 8; i -= 4 {
		p := i - 4
		w := buf[p-8 : p+4]
		k := q.four(binary.BigEndian.Uint64(w[0:]), binary.BigEndian.Uint64(w[1:]),
			binary.BigEndian.Uint64(w[2:]), binary.BigEndian.Uint64(w[3:]))
		c := buf[p : p+4]
		binary.LittleEndian.PutUint32(c, binary.LittleEndian.Uint32(c)^k)
	}
	for ; i > 8; i-- { // at most three left: one block per call
		x := binary.BigEndian.Uint64(buf[i-9:])
		buf[i-1] ^= byte(q.four(x, x, x, x))
	}
}
