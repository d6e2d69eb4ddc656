package gearman

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"fmt"
	"io"
	"os"
)

// gearmanKeyLen is AES-256's key size: mod_gearman copies the configured
// key up to its first NUL and at most this many bytes, padding with NULs.
const gearmanKeyLen = 32

// readKeyFile reads a key the way mod_gearman's keyfile option does
// (read_keyfile in common/utils.c): the first line, but no more than 32
// bytes of it (fgets into 33 bytes), without trailing white space. A file
// without a key is an error rather than an empty key, which would
// encrypt with 32 NULs.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sink: gearman: key file: %w", err)
	}
	defer f.Close()
	b := make([]byte, gearmanKeyLen)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("sink: gearman: key file %s: %w", path, err)
	}
	b = b[:n]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	}
	// The key is a C string from here on: it ends at a NUL.
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimRight(b, " \t\n\v\f\r") // C's isspace
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: %s", errKeyFile, path)
	}
	return b, nil
}

// gearmanKey is the part of key mod_gearman uses: up to the first NUL, at
// most 32 bytes (mod_gm_aes_init in common/gm_crypt.c).
func gearmanKey(key []byte) []byte {
	if i := bytes.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	return key[:min(len(key), gearmanKeyLen)]
}

// gearmanCipher is AES-256 under key as mod_gearman pads it: NULs up to
// 32 bytes.
func gearmanCipher(key []byte) cipher.Block {
	var k [gearmanKeyLen]byte
	copy(k[:], gearmanKey(key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	return block
}

// gearmanPaddedLen is how many bytes mod_gearman encrypts for an n-byte
// text (mod_gm_encrypt and mod_gm_aes_encrypt): the C string with its NUL,
// NUL-padded to whole blocks under the test `16 % len != 0`, which also
// adds a whole block of NULs when the string and its NUL already fill
// whole blocks, except for exactly one block. Lengths 1, 2, 4 and 8 make
// mod_gearman fail; here they are padded to one block.
func gearmanPaddedLen(n int) int {
	l := n + 1
	switch {
	case l%aes.BlockSize != 0:
		return l + aes.BlockSize - l%aes.BlockSize
	case l > aes.BlockSize:
		return l + aes.BlockSize
	}
	return l
}

// sealJob returns the job body mod_gearman's NEB module reads for the
// result text plain: with a key, base64 of plain encrypted with AES-256-ECB
// under the key as mod_gearman pads it, the text NUL-padded as mod_gearman
// does (transport mode "aes-256+base64"); with a nil or empty key, plain
// in base64 only ("base64 only"), which is what mod_gearman sends with
// encryption off. The base64 is one line with padding, as OpenSSL's
// EVP_EncodeBlock writes it.
func sealJob(key, plain []byte) []byte {
	var block cipher.Block
	if len(key) > 0 {
		block = gearmanCipher(key)
	}
	out, _ := appendSealed(nil, block, bytes.Clone(plain))
	return out
}

// appendSealed appends the job body for text to dst. text is encrypted in
// place, grown by the padding, and returned for reuse.
func appendSealed(dst []byte, block cipher.Block, text []byte) (out, scratch []byte) {
	if block == nil {
		return base64.StdEncoding.AppendEncode(dst, text), text
	}
	n := gearmanPaddedLen(len(text))
	text = append(text, make([]byte, n-len(text))...)
	for i := 0; i < n; i += aes.BlockSize {
		block.Encrypt(text[i:i+aes.BlockSize], text[i:i+aes.BlockSize])
	}
	return base64.StdEncoding.AppendEncode(dst, text), text
}

// Open is sealJob's inverse, as the NEB module decodes a job
// (mod_gm_decrypt in common/utils.c): base64 (line breaks allowed), then
// with a key AES-256-ECB over the whole blocks, the text ending at the
// first NUL.
func Open(key, sealed []byte) ([]byte, error) {
	raw, err := base64.StdEncoding.AppendDecode(nil, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSealed, err)
	}
	if len(key) == 0 {
		return raw, nil
	}
	raw = raw[:len(raw)-len(raw)%aes.BlockSize]
	block := gearmanCipher(key)
	for i := 0; i < len(raw); i += aes.BlockSize {
		block.Decrypt(raw[i:i+aes.BlockSize], raw[i:i+aes.BlockSize])
	}
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	return raw, nil
}
