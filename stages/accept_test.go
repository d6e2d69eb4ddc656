package stages

import (
	"testing"

	"nsca_fast/stages/codec"
)

// Every connection gets an IV of its own, also across a refill of the
// buffer they come from.
func TestIVsDiffer(t *testing.T) {
	seen := map[[codec.IVSize]byte]bool{}
	for range 3*ivsPerRefill + 5 {
		var iv [codec.IVSize]byte
		nextIV(&iv)
		if seen[iv] || iv == [codec.IVSize]byte{} {
			t.Fatalf("IV repeated or zero after %d IVs", len(seen))
		}
		seen[iv] = true
	}
}
