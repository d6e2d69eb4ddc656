//go:build cgo

package cipher

import "testing"

// TestDESBitsliceMatchesLibmcrypt: both bitsliced paths decrypt what
// libmcrypt encrypts as send_nsca does, DES and triple DES, passwords of
// 0..200 bytes, streams of 720- and 4304-byte packets, both decryption_modes.
func TestDESBitsliceMatchesLibmcrypt(t *testing.T) {
	withDESPaths(t, func(t *testing.T) {
		for _, m := range desMethods {
			t.Run(m.alg, func(t *testing.T) {
				r := newRand("desbs libmcrypt " + m.alg)
				for trial := range 6 {
					pwlen := []int{0, m.keySize, m.keySize + 1, 200, r.IntN(201), r.IntN(201)}[trial]
					password := randBytes(r, pwlen)
					e, err := New(EngineNative, m.method, m.alg, password)
					if err != nil {
						t.Fatal(err)
					}
					checkAgainstLibmcrypt(t, r, e, password, []int{bigPacket, smallPacket, bigPacket, smallPacket})
				}
			})
		}
	})
}
