//go:build !amd64 || purego

package cipher

// useAESNI is false off amd64: crypto/aes serves AES there.
var useAESNI = false

func cfb8TailAESNI(rk *byte, rounds int, buf *byte, n int) {
	panic("cipher: AES-NI path without AES-NI")
}
