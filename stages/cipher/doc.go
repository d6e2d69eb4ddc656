// Package cipher owns the decryption of NSCA's libmcrypt methods (2..26):
// 8-bit CFB over a block cipher keyed with the password truncated or
// zero-padded to the algorithm's key size, the register starting as the first
// block-size bytes of the 128-byte IV and running on across the packets of a
// connection.
//
// It offers one interface, [Engine], served by two implementations:
//
//   - "libmcrypt": the reference, libmcrypt through nsca_fast/cgo/mcrypt, one
//     cgo call per buffer. Without cgo it cannot be built into a working
//     engine and says so, naming libmcrypt.
//   - "native": pure Go (plus AES-NI, AVX2 and AVX-512 assembly on amd64)
//     for the methods in the table natives, one row per method. 8-bit CFB
//     decryption needs no chaining, since the register before every byte is
//     the block-size bytes of IV||ciphertext before it, so a whole chunk's
//     block encryptions are independent and computed in one pass, never one
//     library call per byte: AES eight blocks at a time, DES and triple DES
//     bitsliced, 64 or 256 blocks at a time (desbs.go), the table ciphers
//     several blocks interleaved.
//
// Beyond libmcrypt's methods the table holds this project's own
// ([OwnMethods]): ciphers NSClient++ encrypts with that stock has no
// method number for, AES with 16- and 24-byte keys and GOST 28147-89 with
// Crypto++'s S-boxes, always served natively.
//
// [Choose] is the one call that picks what serves a method with a password,
// as decryption_engine asks, proving a native engine first, and says why in
// one line; the caller keeps its [Choice].
//
// An [Engine] makes [Key]s: a Key holds the key schedule (made per connection
// in decryption_mode 0, per decrypt goroutine in mode 1). A [State] is the
// per-connection CFB register, a plain value to embed in the connection, so
// that [Key.Decrypt] decrypts one chunk in place and leaves the State ready
// for the next chunk, without allocating.
//
// [SelfTest], run by Choose, proves that a native engine decrypts exactly
// what libmcrypt encrypts, the way send_nsca encrypts it.
//
// The package does not know nsca.cfg: the caller passes the method number,
// its libmcrypt name and the password, and decides what to log.
package cipher
