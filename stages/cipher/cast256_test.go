package cipher

import "testing"

func TestCAST256KnownAnswers(t *testing.T) {
	checkKnownStreams(t, 5, []knownStream{
		// RFC 2612's 256-bit vector, E(0) = 4f6a2038..., with the key's and
		// the output's words byte-swapped as libmcrypt reads them.
		{"9ebb4223 2c5438fa 83acd0be 98c20a94 ce477c8d 46084926 13b5c11c 04b6e67a", "00000000000000000000000000000000", "38"},
		{knownKey, knownIV, "496e38a6d1dcfd3ec07b66d7bdae4b05afd64075cbc1c1aa92941bdb462330a7eb520439e2fcccbfe3b7cbbf8af3c1f2d903621772945373b4b3480a907fdc29"},
	})
}
