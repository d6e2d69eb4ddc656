package cipher

import "testing"

func TestSerpentKnownAnswers(t *testing.T) {
	checkKnownStreams(t, 20, []knownStream{
		// NESSIE's 256-bit set 1 vector 0: E(0) = a223aa12... under 80 00 ...
		{"80000000000000000000000000000000 00000000000000000000000000000000", "00000000000000000000000000000000", "a2"},
		{knownKey, knownIV, "d27b416218b0e0ffad7d0d6b4626d6abc9c2f86433bd197b4438af343d3289c432b46186f182dd85bbdda1466f030f6f802a8fcb15fc1754ee74807a0943c2e1"},
	})
}
