package cipher

import (
	"encoding/binary"
	"errors"
)

// Rijndael with 192- and 256-bit blocks (libmcrypt's rijndael-192 and
// rijndael-256, methods 15 and 16), written from the Rijndael proposal
// (Daemen and Rijmen, 1999) for 8-bit CFB. NSCA always keys them with 32
// bytes, so both run 14 rounds. Only the first byte of each block's output
// is used: the last round needs one S-box lookup, the round before it one
// column, the one before that the four columns that column reads.

// rjT are the round tables: rjT[r][x] is the MixColumns column of the S-box
// output of x standing in row r, row 0 in the low byte.
var rjT = func() (t [4][256]uint32) {
	for x := range 256 {
		s := sbox[x]
		col := uint32(gfMul(s, 2)) | uint32(s)<<8 | uint32(s)<<16 | uint32(gfMul(s, 3))<<24
		for r := range 4 {
			t[r][x] = col<<(8*r) | col>>(32-8*r)
		}
	}
	return t
}()

// rjCol is one output column of a round: a, b, c, d are the input columns
// that rows 0..3 are taken from after ShiftRows, k the round key word.
func rjCol(a, b, c, d, k uint32) uint32 {
	return rjT[0][a&0xff] ^ rjT[1][b>>8&0xff] ^ rjT[2][c>>16&0xff] ^ rjT[3][d>>24] ^ k
}

// rjLast is the first byte of the last round's output, from row 0 of
// column 0 before it and the last round key's first word.
func rjLast(x, k uint32) byte { return sbox[x&0xff] ^ byte(k) }

const rjRounds = 14 // max(Nk, Nb) + 6 with NSCA's 32-byte key

// rijndaelBulk is Rijndael with a nb-word block (6 or 8) and a 32-byte key.
type rijndaelBulk struct {
	rk [rjRounds + 1][8]uint32 // rk[i][:nb] is round i's key
	nb int
}

func newRijndaelBulk(nb int) func(key []byte) (bulk, error) {
	return func(key []byte) (bulk, error) {
		if len(key) != 32 {
			return nil, errors.New("rijndael key is not 32 bytes")
		}
		r := &rijndaelBulk{nb: nb}
		var b [4 * 8 * (rjRounds + 1)]byte
		rijndaelExpand(key, b[:4*nb*(rjRounds+1)])
		for i := range nb * (rjRounds + 1) {
			r.rk[i/nb][i%nb] = binary.LittleEndian.Uint32(b[4*i:])
		}
		clear(b[:])
		return r, nil
	}
}

func (r *rijndaelBulk) wipe() { r.rk = [rjRounds + 1][8]uint32{} }

func (r *rijndaelBulk) tail(buf []byte) {
	bs := 4 * r.nb
	for i := len(buf) - 1; i >= bs; i-- {
		if r.nb == 6 {
			buf[i] ^= r.first6(buf[i-bs : i])
		} else {
			buf[i] ^= r.first8(buf[i-bs : i])
		}
	}
}

// first6 is the first byte of the 192-bit block in encrypted: ShiftRows
// takes rows 1, 2, 3 from 1, 2, 3 columns on.
func (r *rijndaelBulk) first6(in []byte) byte {
	in = in[:24]
	rk := &r.rk
	s0 := binary.LittleEndian.Uint32(in[0:]) ^ rk[0][0]
	s1 := binary.LittleEndian.Uint32(in[4:]) ^ rk[0][1]
	s2 := binary.LittleEndian.Uint32(in[8:]) ^ rk[0][2]
	s3 := binary.LittleEndian.Uint32(in[12:]) ^ rk[0][3]
	s4 := binary.LittleEndian.Uint32(in[16:]) ^ rk[0][4]
	s5 := binary.LittleEndian.Uint32(in[20:]) ^ rk[0][5]
	for i := 1; i <= rjRounds-3; i++ {
		k := &rk[i]
		t0 := rjCol(s0, s1, s2, s3, k[0])
		t1 := rjCol(s1, s2, s3, s4, k[1])
		t2 := rjCol(s2, s3, s4, s5, k[2])
		t3 := rjCol(s3, s4, s5, s0, k[3])
		t4 := rjCol(s4, s5, s0, s1, k[4])
		t5 := rjCol(s5, s0, s1, s2, k[5])
		s0, s1, s2, s3, s4, s5 = t0, t1, t2, t3, t4, t5
	}
	// Round Nr-2: the columns 0..3 that round Nr-1's column 0 reads.
	k := &rk[rjRounds-2]
	t0 := rjCol(s0, s1, s2, s3, k[0])
	t1 := rjCol(s1, s2, s3, s4, k[1])
	t2 := rjCol(s2, s3, s4, s5, k[2])
	t3 := rjCol(s3, s4, s5, s0, k[3])
	x := rjCol(t0, t1, t2, t3, rk[rjRounds-1][0])
	return rjLast(x, rk[rjRounds][0])
}

// first8 is the first byte of the 256-bit block in encrypted: ShiftRows
// takes rows 1, 2, 3 from 1, 3, 4 columns on.
func (r *rijndaelBulk) first8(in []byte) byte {
	in = in[:32]
	rk := &r.rk
	s0 := binary.LittleEndian.Uint32(in[0:]) ^ rk[0][0]
	s1 := binary.LittleEndian.Uint32(in[4:]) ^ rk[0][1]
	s2 := binary.LittleEndian.Uint32(in[8:]) ^ rk[0][2]
	s3 := binary.LittleEndian.Uint32(in[12:]) ^ rk[0][3]
	s4 := binary.LittleEndian.Uint32(in[16:]) ^ rk[0][4]
	s5 := binary.LittleEndian.Uint32(in[20:]) ^ rk[0][5]
	s6 := binary.LittleEndian.Uint32(in[24:]) ^ rk[0][6]
	s7 := binary.LittleEndian.Uint32(in[28:]) ^ rk[0][7]
	for i := 1; i <= rjRounds-3; i++ {
		k := &rk[i]
		t0 := rjCol(s0, s1, s3, s4, k[0])
		t1 := rjCol(s1, s2, s4, s5, k[1])
		t2 := rjCol(s2, s3, s5, s6, k[2])
		t3 := rjCol(s3, s4, s6, s7, k[3])
		t4 := rjCol(s4, s5, s7, s0, k[4])
		t5 := rjCol(s5, s6, s0, s1, k[5])
		t6 := rjCol(s6, s7, s1, s2, k[6])
		t7 := rjCol(s7, s0, s2, s3, k[7])
		s0, s1, s2, s3, s4, s5, s6, s7 = t0, t1, t2, t3, t4, t5, t6, t7
	}
	// Round Nr-2: the columns 0, 1, 3, 4 that round Nr-1's column 0 reads.
	k := &rk[rjRounds-2]
	t0 := rjCol(s0, s1, s3, s4, k[0])
	t1 := rjCol(s1, s2, s4, s5, k[1])
	t3 := rjCol(s3, s4, s6, s7, k[3])
	t4 := rjCol(s4, s5, s7, s0, k[4])
	x := rjCol(t0, t1, t3, t4, rk[rjRounds-1][0])
	return rjLast(x, rk[rjRounds][0])
}
