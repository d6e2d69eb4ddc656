package cipher

//go:generate go run ./internal/desgen

import (
	"encoding/binary"
	"errors"
	"sync"
)

// Bitsliced DES for 8-bit CFB decryption. The register of every byte is the
// eight ciphertext bytes before it, all known before anything is decrypted,
// so the blocks of a chunk are independent: lane l of every word is the
// block of one byte, bit i of the block in word i, and each gate of the
// S-box circuits (desbs_gen.go, made by internal/desgen) runs 64 blocks at
// once, or 256 in an AVX2 register (desbs_amd64.s). The input words are
// windows of the stream's eight bit-planes, since lane l+1's block is lane
// l's shifted by one byte; of the output only the first byte of each block
// is needed, eight words. Key bits are the same in every lane: each is a
// mask of all zeros or all ones, kept as 32 bits and broadcast.

const (
	// desbsMaxGroups is the most 64-lane groups one pass runs (AVX2: 4).
	desbsMaxGroups = 4
	// desbsTableBelow: a tail of fewer positions goes to the table engine,
	// faster than one bitsliced pass for a few blocks (a chunk's first
	// eight bytes, whose registers start in the State).
	desbsTableBelow = 32
)

// desbsBulk is DES (stages 1) or EDE triple DES (stages 3), bitsliced.
type desbsBulk struct {
	table         desBulk    // the round keys; the table engine for short tails
	short         *groupBulk // table's group driver
	keys          []int32    // 48 masks (0 or -1) per round, 16*stages rounds
	*desbsScratch            // during tail only
}

// desbsScratch is the working memory of one tail call, pooled: a Key per
// connection then holds only its schedule.
type desbsScratch struct {
	planes [8][desbsPlaneStride]byte
	state  [64*desbsMaxGroups + desbsSpill]uint64 // and the assembly's spill slots
}

var desbsScratchPool = sync.Pool{New: func() any { return new(desbsScratch) }}

// desbsSlot[i] is the block bit (0-based from the top) of word i of the
// state: the words are in IP's order, L being words 0..31 and R 32..63.
// desbsOut[j] is the word holding output bit j after the last round (FP's
// first byte, from the preoutput R16 L16, where R16 ends in words 32..63).
var desbsSlot, desbsOut = func() (slot [64]byte, out [8]byte) {
	for i, b := range desIP {
		slot[i] = b - 1
	}
	for j := range 8 {
		for m, b := range desIP {
			if int(b) == j+1 { // preoutput bit m+1 goes to output bit j+1
				out[j] = byte((m + 32) % 64)
			}
		}
	}
	return slot, out
}()

func newDESBulk(key []byte) (bulk, error) {
	if len(key) != 8 {
		return nil, errors.New("DES key is not 8 bytes")
	}
	return newDESBS(key, 1), nil
}

func newTripleDESBulk(key []byte) (bulk, error) {
	if len(key) != 24 {
		return nil, errors.New("triple DES key is not 24 bytes")
	}
	return newDESBS(key, 3), nil
}

func newDESBS(key []byte, stages int) *desbsBulk {
	d := &desbsBulk{table: newDESTable(key, stages), keys: make([]int32, 48*16*stages)}
	d.short = newGroupBulk(&d.table, 8, 4)
	for r, rk := range d.table.keys[:16*stages] {
		var k uint64 // the 48 key bits, S-box 1's on top
		for i := range 8 {
			half := rk.a
			if i%2 == 1 {
				half = rk.b
			}
			k |= uint64(half>>(24-8*(i/2))&63) << (42 - 6*i)
		}
		m := (*[48]int32)(d.keys[48*r:])
		k <<= 16
		for b := range m { // bit b of the 48 on top, spread down
			m[b] = int32(int64(k) >> 63)
			k <<= 1
		}
	}
	return d
}

func (d *desbsBulk) wipe() {
	d.table.wipe()
	clear(d.keys)
}

// transpose8 transposes the 8x8 bit matrix whose row r is byte r of x
// (bit c of it column c).
func transpose8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00aa00aa00aa00aa
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000cccc0000cccc
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000f0f0f0f0
	return x ^ t ^ t<<28
}

func (d *desbsBulk) tail(buf []byte) {
	n := len(buf)
	if n-8 < desbsTableBelow {
		d.short.tail(buf)
		return
	}
	groups := desbsGroups()
	d.desbsScratch = desbsScratchPool.Get().(*desbsScratch)
	defer func() {
		clear(d.state[:]) // keystream
		desbsScratchPool.Put(d.desbsScratch)
		d.desbsScratch = nil
	}()
	// Chunks from the top down: a chunk reads only bytes below its first
	// position, which the chunks above it do not write.
	for p0 := 8 + (n-9)/desbsChunk*desbsChunk; p0 >= 8; p0 -= desbsChunk {
		d.chunk(buf, p0, min(n, p0+desbsChunk), groups)
	}
}

// chunk decrypts positions p0..end-1, 64*groups lanes per pass.
func (d *desbsBulk) chunk(buf []byte, p0, end, groups int) {
	lanes := 64 * groups
	d.fillPlanes(buf[p0-8:], (end-p0+lanes-1)/lanes*lanes+8)
	st := d.state[:64*groups]
	for p := p0; p < end; p += lanes {
		d.encrypt(st, groups, (p-p0)/8)
		for q := range groups {
			ks := desbsKeystream(st, groups, q)
			for m, x := range ks {
				at := p + 64*q + 8*m
				if at+8 <= end {
					binary.LittleEndian.PutUint64(buf[at:], binary.LittleEndian.Uint64(buf[at:])^x)
					continue
				}
				for c := 0; at+c < end; c++ {
					buf[at+c] ^= byte(x >> (8 * c))
				}
			}
		}
	}
}

// planesGo sets bit t of plane k to bit k of src[t], for t < n (a multiple
// of 8), zero past the end of src.
func (d *desbsBulk) planesGo(src []byte, n int) {
	var w [8]byte
	for u := range n / 8 {
		x := w[:0]
		if 8*u < len(src) {
			x = src[8*u:]
		}
		if len(x) < 8 {
			w = [8]byte{}
			copy(w[:], x)
			x = w[:]
		}
		y := transpose8(binary.LittleEndian.Uint64(x))
		for k := range d.planes {
			d.planes[k][u] = byte(y >> (8 * k))
		}
	}
}

// loadGo sets the state's 64-lane words from the planes from byte u0 on:
// lane l's block byte b is stream byte 8*u0+l+b, so word i (block bit bit)
// is plane 7-bit%8 from bit 8*u0+bit/8 on.
func (d *desbsBulk) loadGo(st *[64]uint64, u0 int) {
	for i, bit := range desbsSlot {
		b, pl := uint(bit/8), d.planes[7-bit%8][u0:]
		st[i] = binary.LittleEndian.Uint64(pl)>>b | uint64(pl[8])<<(64-b)
	}
}

// desbsKeystream is the keystream of lanes 64q..64q+63 after the rounds,
// eight bytes per uint64: the output bits' words (byte m of word j is bit
// j from the top of lanes 64q+8m..) transposed by bytes and then each
// 8x8 block by bits.
func desbsKeystream(st []uint64, groups, q int) (r [8]uint64) {
	for i := range r { // row i: output bit 7-i, so the top bit ends on top
		r[i] = st[int(desbsOut[7-i])*groups+q]
	}
	for _, s := range [3]struct {
		d    int
		sh   uint
		mask uint64
	}{{4, 32, 0x00000000ffffffff}, {2, 16, 0x0000ffff0000ffff}, {1, 8, 0x00ff00ff00ff00ff}} {
		for i := range 8 {
			if i&s.d != 0 {
				continue
			}
			a, b := r[i], r[i+s.d]
			r[i] = a&s.mask | b<<s.sh&^s.mask
			r[i+s.d] = a>>s.sh&s.mask | b&^s.mask
		}
	}
	for m := range r {
		r[m] = transpose8(r[m])
	}
	return r
}

// desbsRoundsGo runs the rounds on 64 lanes. After every stage's 16th round
// the halves are not swapped: FP and the next stage's IP cancel, leaving
// them swapped, which the roles of l and r already are. The last round
// computes only the bits of l that desbsOut reads.
func desbsRoundsGo(s *[64]uint64, keys []int32) {
	l, r := (*[32]uint64)(s[0:32]), (*[32]uint64)(s[32:64])
	n := len(keys) / 48
	for i := 0; i < n-1; i++ {
		desbsRound(l, r, (*[48]int32)(keys[48*i:]))
		if i%16 != 15 {
			l, r = r, l
		}
	}
	desbsLastRound(l, r, (*[48]int32)(keys[48*(n-1):]))
}
