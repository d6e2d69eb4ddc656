package cipher

import "errors"

// Sentinel errors; every error this package returns wraps one of them with %w.
var (
	// ErrEngine: the decryption engine named is not libmcrypt, native or auto.
	ErrEngine = errors.New("cipher: unknown decryption engine")
	// ErrMethod: the method number, name or key size cannot be served at all.
	ErrMethod = errors.New("cipher: unsupported method")
	// ErrNoNative: the native engine was asked for a method it does not implement.
	ErrNoNative = errors.New("cipher: no native engine for this method")
	// ErrLibmcrypt: libmcrypt cannot serve the method, or is not built in (no cgo).
	ErrLibmcrypt = errors.New("cipher: libmcrypt unavailable")
	// ErrSelfTest: the native engine decrypted differently from libmcrypt.
	ErrSelfTest = errors.New("cipher: self-test failed")
)
