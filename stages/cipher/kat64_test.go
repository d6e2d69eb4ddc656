package cipher

import (
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"testing"
)

// TestKnownAnswers64 checks the 8-byte-block native ciphers against
// published vectors (Eric Young's for Blowfish, RFC 2144's for CAST-128, the
// XTEA vectors Go's x/crypto tests with) and, for RC2 with libmcrypt's
// effective key length of 1024 bits, against what libmcrypt's ECB mode
// gives, so that a build without cgo is checked too. four only gives first
// bytes, so each vector runs in every lane among three other blocks.
func TestKnownAnswers64(t *testing.T) {
	for _, v := range []struct {
		name     string
		newBulk  func([]byte) (bulk, error)
		key, in  string
		wantHex  string
		fullWant bool // also check the whole block (Blowfish's encrypt)
	}{
		{"blowfish", newBlowfishBulk, "0000000000000000", "0000000000000000", "4ef997456198dd78", true},
		{"blowfish", newBlowfishBulk, "ffffffffffffffff", "ffffffffffffffff", "51866fd5b85ecb8a", true},
		{"blowfish", newBlowfishBulk, "fedcba9876543210", "0123456789abcdef", "0aceab0fc6a0a28d", true},
		{"blowfish", newBlowfishBulk, "0123456789abcdef", "1111111111111111", "61f9c3802281b096", true},
		{"cast-128", newCAST128Bulk, "0123456712345678234567893456789a", "0123456789abcdef", "238b4fe5847e44b2", false},
		{"xtea", newXTEABulk, "000102030405060708090a0b0c0d0e0f", "4142434445464748", "497df3d072612cb5", false},
		{"xtea", newXTEABulk, "000102030405060708090a0b0c0d0e0f", "4141414141414141", "e78f2d13744341d8", false},
		{"rc2", newRC2Bulk, "0000000000000000", "0000000000000000", "cfa18f47ea73bd79", false},
		{"rc2", newRC2Bulk, "ffffffffffffffff", "ffffffffffffffff", "7259018ec557b357", false},
		{"rc2", newRC2Bulk, "3000000000000000", "1000000000000001", "dcef6310aee47b41", false},
		{"rc2", newRC2Bulk, "88bca90e90875a7f0f79c384627bafb2", "0000000000000000", "db66015b97954a43", false},
		{"rc2", newRC2Bulk, hex.EncodeToString(count(128)), "0000000000000000", "003a18cadabba0f9", false},
		{"rc2", newRC2Bulk, hex.EncodeToString(count(128)), "0123456789abcdef", "6cb357e02ed2e03c", false},
	} {
		key, _ := hex.DecodeString(v.key)
		in, _ := hex.DecodeString(v.in)
		want, _ := hex.DecodeString(v.wantHex)
		b, err := v.newBulk(key)
		if err != nil {
			t.Fatalf("%s key %s: %v", v.name, v.key, err)
		}
		q := b.(quad64)
		x := binary.BigEndian.Uint64(in)
		others := [3]uint64{0x0123456789abcdef, ^x, x ^ 1}
		for lane := range 4 {
			var xs [4]uint64
			for i, j := 0, 0; i < 4; i++ {
				if i == lane {
					xs[i] = x
				} else {
					xs[i] = others[j]
					j++
				}
			}
			if got := byte(q.four(xs[0], xs[1], xs[2], xs[3]) >> (8 * lane)); got != want[0] {
				t.Errorf("%s key %s block %s lane %d: first byte %02x, want %02x", v.name, v.key, v.in, lane, got, want[0])
			}
		}
		if v.fullWant {
			l, r := b.(*blowfishBulk).encrypt(uint32(x>>32), uint32(x))
			if got := uint64(l)<<32 | uint64(r); got != binary.BigEndian.Uint64(want) {
				t.Errorf("%s key %s block %s: %016x, want %s", v.name, v.key, v.in, got, v.wantHex)
			}
		}
		b.wipe()
	}
}

// count returns the bytes 0, 1, ..., n-1.
func count(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestBlowfishPi recomputes Blowfish's initial words from pi: 16 atan(1/5)
// - 4 atan(1/239) (Machin) in fixed point, 64 guard bits.
func TestBlowfishPi(t *testing.T) {
	const guard = 64
	prec := uint(32*len(blowfishInit) + guard)
	pi := new(big.Int).Lsh(arctanInv(5, prec), 4)
	pi.Sub(pi, new(big.Int).Lsh(arctanInv(239, prec), 2))
	pi.Rsh(pi, guard) // 3 and then the fraction's words
	for i := len(blowfishInit) - 1; i >= 0; i-- {
		if w := uint32(pi.Uint64()); w != blowfishInit[i] {
			t.Errorf("word %d is %08x, pi says %08x", i, blowfishInit[i], w)
		}
		pi.Rsh(pi, 32)
	}
	if pi.Int64() != 3 {
		t.Errorf("integer part %v, want 3", pi)
	}
}

// arctanInv is atan(1/x) * 2^prec, by its Taylor series.
func arctanInv(x int64, prec uint) *big.Int {
	term := new(big.Int).Lsh(big.NewInt(1), prec)
	term.Quo(term, big.NewInt(x))
	sum := new(big.Int).Set(term)
	x2 := big.NewInt(x * x)
	var q, n big.Int
	for k := int64(1); term.Sign() != 0; k++ {
		term.Quo(term, x2)
		q.Quo(term, n.SetInt64(2*k+1))
		if k&1 == 1 {
			sum.Sub(sum, &q)
		} else {
			sum.Add(sum, &q)
		}
	}
	return sum
}

// TestRC2Eight: the lane-parallel eight gives each lane what four gives.
func TestRC2Eight(t *testing.T) {
	r := newRand("rc2 eight")
	b, _ := newRC2Bulk(randBytes(r, 128))
	o, ok := b.(oct64)
	if !ok {
		t.Fatal("rc2 has no eight")
	}
	for range 2000 {
		var x [8]uint64
		for i := range x {
			x[i] = r.Uint64()
		}
		want := uint64(o.four(x[0], x[1], x[2], x[3])) | uint64(o.four(x[4], x[5], x[6], x[7]))<<32
		if got := o.eight(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]); got != want {
			t.Fatalf("eight(%x) = %016x, four gives %016x", x, got, want)
		}
	}
}
