//go:build amd64 && !purego

package cipher

import "golang.org/x/sys/cpu"

// useAESNI selects the AES-NI engine; tests turn it off to cover the fallback.
var useAESNI = cpu.X86.HasAES && cpu.X86.HasSSE2

// cfb8TailAESNI is aesniBulk.tail in assembly: for i from n-1 down to 16,
// buf[i] ^= AES(rk, buf[i-16:i])[0], eight registers per pass.
//
//go:noescape
func cfb8TailAESNI(rk *byte, rounds int, buf *byte, n int)
