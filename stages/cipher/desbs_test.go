package cipher

import (
	"bytes"
	"testing"
)

var desbsPathNames = []string{desbsPortable: "portable", desbsAVX2: "avx2", desbsAVX512: "avx512"}

// withDESPaths runs f with every bitsliced DES path this CPU runs.
func withDESPaths(t *testing.T, f func(t *testing.T)) {
	saved := desbsPath
	defer func() { desbsPath = saved }()
	for p := desbsBest; p >= desbsPortable; p-- {
		desbsPath = p
		t.Run(desbsPathNames[p], f)
	}
}

// desMethods are the two methods the bitsliced engine serves.
var desMethods = []struct {
	method  int
	alg     string
	keySize int
}{{2, "des", 8}, {3, "tripledes", 24}}

var desbsSboxes = [8]func(a1, a2, a3, a4, a5, a6 uint64) (o1, o2, o3, o4 uint64){
	desbsS1, desbsS2, desbsS3, desbsS4, desbsS5, desbsS6, desbsS7, desbsS8,
}

// TestDESSboxCircuits: every S-box circuit gives the FIPS 46-3 table's
// output for all 64 inputs, one input per lane.
func TestDESSboxCircuits(t *testing.T) {
	var in [6]uint64
	for x := range 64 {
		for j := range 6 {
			in[j] |= uint64(x>>(5-j)&1) << x
		}
	}
	for i, s := range desbsSboxes {
		o1, o2, o3, o4 := s(in[0], in[1], in[2], in[3], in[4], in[5])
		for x := range 64 {
			row := x>>4&2 | x&1
			want := desS[i][row*16+x>>1&15]
			got := byte(o1>>x&1<<3 | o2>>x&1<<2 | o3>>x&1<<1 | o4>>x&1)
			if got != want {
				t.Fatalf("S%d(%06b) = %d, want %d", i+1, x, got, want)
			}
		}
	}
}

func TestTranspose8(t *testing.T) {
	r := newRand("transpose")
	for range 100 {
		x := r.Uint64()
		y := transpose8(x)
		for row := range 8 {
			for c := range 8 {
				if x>>(8*row+c)&1 != y>>(8*c+row)&1 {
					t.Fatalf("transpose8(%#x) = %#x: bit %d,%d", x, y, row, c)
				}
			}
		}
	}
}

// TestDESBitsliceAgainstStdlib: both paths decrypt what crypto/des
// encrypts in textbook 8-bit CFB, for DES and triple DES, packets of 720
// and 4304 bytes, several per connection, odd splits, and buffers of every
// length around the table/bitslice and chunk boundaries.
func TestDESBitsliceAgainstStdlib(t *testing.T) {
	withDESPaths(t, func(t *testing.T) {
		for _, m := range desMethods {
			t.Run(m.alg, func(t *testing.T) {
				r := newRand("desbs " + m.alg)
				var sizes []int
				for n := 1; n < 80; n++ {
					sizes = append(sizes, n)
				}
				sizes = append(sizes, 255, 256, 257, 263, 264, 265, 511, 520, desbsChunk+7, desbsChunk+8, desbsChunk+9, 2*desbsChunk+8)
				for trial := range 24 {
					sizes = append(sizes, []int{smallPacket, bigPacket}[trial%2]*(1+r.IntN(4)))
				}
				for _, size := range sizes {
					password := randBytes(r, r.IntN(40))
					iv := randBytes(r, 128)
					e, err := New(EngineNative, m.method, m.alg, password)
					if err != nil {
						t.Fatal(err)
					}
					plain := randBytes(r, size)
					ct := refCFB8(refBlock(t, m.alg, m.keySize, password), iv, plain, false)
					k, _ := e.NewKey()
					// whole, then split
					var s State
					s.Start(e, iv)
					got := bytes.Clone(ct)
					k.Decrypt(&s, got)
					if !bytes.Equal(got, plain) {
						t.Fatalf("%d bytes in one piece: differs from textbook CFB8", size)
					}
					if got := decryptSplit(r, e, k, iv, ct); !bytes.Equal(got, plain) {
						t.Fatalf("%d bytes split: differs from textbook CFB8", size)
					}
					k.Close()
				}
			})
		}
	})
}
