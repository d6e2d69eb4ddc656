package cipher

//go:generate go run ./internal/desgen

import (
	"encoding/binary"
	"errors"
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
// mask of all zeros or all ones.

const (
	// desbsChunk is how many positions one set of bit-planes covers: a
	// multiple of every lane count.
	desbsChunk = 4096
	// desbsMaxGroups is the most 64-lane groups one pass runs (AVX2: 4).
	desbsMaxGroups = 4
	// desbsTableBelow: a tail of fewer positions goes to the table engine,
	// faster than one bitsliced pass for a few blocks (a chunk's first
	// eight bytes, whose registers start in the State).
	desbsTableBelow = 32
)

// desbsBulk is DES (stages 1) or EDE triple DES (stages 3), bitsliced.
type desbsBulk struct {
	table  desBulk  // for short tails, and the round keys
	keys   []uint64 // 48 masks per round, 16*stages rounds
	planes [8][desbsChunk/8 + 1]byte
	state  [64*desbsMaxGroups + desbsSpill]uint64 // and the assembly's spill slots
}

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
	d := &desbsBulk{table: newDESTable(key, stages), keys: make([]uint64, 48*16*stages)}
	for r, rk := range d.table.keys[:16*stages] {
		for i := range 8 {
			half, shift := rk.a, 24-8*(i/2)
			if i%2 == 1 {
				half = rk.b
			}
			g := half >> shift & 63
			for j := range 6 {
				if g>>(5-j)&1 != 0 {
					d.keys[48*r+6*i+j] = ^uint64(0)
				}
			}
		}
	}
	return d
}

func (d *desbsBulk) wipe() {
	d.table.wipe()
	clear(d.keys)
	clear(d.state[:])
	for i := range d.planes {
		clear(d.planes[i][:])
	}
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
		d.table.tail(buf)
		return
	}
	groups := desbsGroups()
	// Chunks from the top down: a chunk reads only bytes below its first
	// position, which the chunks above it do not write.
	for p0 := 8 + (n-9)/desbsChunk*desbsChunk; p0 >= 8; p0 -= desbsChunk {
		d.chunk(buf, p0, min(n, p0+desbsChunk), groups)
	}
}

// chunk decrypts positions p0..end-1, 64*groups lanes per pass.
func (d *desbsBulk) chunk(buf []byte, p0, end, groups int) {
	// Plane k byte u bit t: bit k of buf[p0-8+8u+t] (0 past the end).
	var w [8]byte
	for u := range len(d.planes[0]) {
		at := p0 - 8 + 8*u
		if at >= len(buf) {
			for k := range d.planes {
				d.planes[k][u] = 0
			}
			continue
		}
		x := buf[at:]
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
	lanes := 64 * groups
	st := d.state[:64*groups]
	for p := p0; p < end; p += lanes {
		// Lane l's block byte b is buf[p+l-8+b]: bits b.. of the planes
		// from byte (p-p0)/8, p-p0 being a multiple of 8.
		u0 := (p - p0) / 8
		for i, bit := range desbsSlot {
			b, pl := uint(bit/8), &d.planes[7-bit%8]
			for q := range groups {
				u := u0 + 8*q
				st[i*groups+q] = binary.LittleEndian.Uint64(pl[u:])>>b | uint64(pl[u+8])<<(64-b)
			}
		}
		d.rounds(st, groups)
		for q := range groups {
			for m := range 8 {
				var x uint64
				for j, o := range desbsOut {
					x |= (st[int(o)*groups+q] >> (8 * m) & 255) << (8 * (7 - j))
				}
				x = transpose8(x) // byte c: the keystream byte of lane 64q+8m+c
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

// desbsRoundsGo runs the rounds on 64 lanes. After every stage's 16th round
// the halves are not swapped: FP and the next stage's IP cancel, leaving
// them swapped, which the roles of l and r already are.
func desbsRoundsGo(s *[64]uint64, keys []uint64) {
	l, r := (*[32]uint64)(s[0:32]), (*[32]uint64)(s[32:64])
	for i := 0; i < len(keys)/48; i++ {
		desbsRound(l, r, (*[48]uint64)(keys[48*i:]))
		if i%16 != 15 {
			l, r = r, l
		}
	}
}
