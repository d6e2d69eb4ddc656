//go:build cgo

package mcrypt

/*
#cgo LDFLAGS: -lmcrypt
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <mcrypt.h>

// Each helper below is the whole body of one Go method, so that a method
// costs exactly one cgo transition whatever it has to do in C.

// Longer than any libmcrypt algorithm name; libmcrypt itself refuses names
// that do not fit its own fixed-size handle name buffer.
#define NSCA_MAX_NAME 128

typedef struct {
	MCRYPT td;
	int key_size;
	int iv_size;
} nsca_open_result;

// name is Go string data: not NUL-terminated, so it is copied first.
static nsca_open_result nsca_open(const char *name, int namelen) {
	nsca_open_result r = { MCRYPT_FAILED, 0, 0 };
	char buf[NSCA_MAX_NAME];
	if (namelen <= 0 || namelen >= NSCA_MAX_NAME) {
		return r;
	}
	memcpy(buf, name, namelen);
	buf[namelen] = '\0';
	r.td = mcrypt_module_open(buf, NULL, "cfb", NULL);
	if (r.td != MCRYPT_FAILED) {
		r.key_size = mcrypt_enc_get_key_size(r.td);
		r.iv_size = mcrypt_enc_get_iv_size(r.td);
	}
	return r;
}

static void nsca_close(MCRYPT td, int initialised) {
	if (initialised) {
		mcrypt_generic_deinit(td);
	}
	mcrypt_module_close(td);
}

// NSCA pads or truncates the password to the largest key size and the IV to
// iv_size with zeros; done here so the padded key only lives in C memory.
#define NSCA_ERR_NOMEM (-1000)

static int nsca_init(MCRYPT td, int initialised,
		const void *pw, int pwlen, int key_size,
		const void *iv, int ivlen, int iv_size) {
	unsigned char *key, *ivbuf;
	int rc;

	if (initialised) {
		mcrypt_generic_deinit(td);
	}
	// +1: calloc(0) may legitimately return NULL.
	key = calloc(1, (size_t)key_size + 1);
	ivbuf = calloc(1, (size_t)iv_size + 1);
	if (key == NULL || ivbuf == NULL) {
		free(key);
		free(ivbuf);
		return NSCA_ERR_NOMEM;
	}
	if (pwlen > key_size) {
		pwlen = key_size;
	}
	if (pwlen > 0) {
		memcpy(key, pw, pwlen);
	}
	if (ivlen > iv_size) {
		ivlen = iv_size;
	}
	if (ivlen > 0) {
		memcpy(ivbuf, iv, ivlen);
	}
	// libmcrypt copies both into its own buffers, so they can go at once.
	rc = mcrypt_generic_init(td, key, key_size, ivbuf);
	memset(key, 0, key_size);
	free(key);
	free(ivbuf);
	return rc;
}

// nsca_crypt runs libmcrypt over buf, decrypting or encrypting. libmcrypt
// takes an int length; Go slices may be longer, so it goes in chunks rather
// than silently truncating. The CFB state carries across chunks.
static void nsca_crypt(MCRYPT td, void *buf, size_t len, int decrypt) {
	unsigned char *p = buf;
	while (len > 0) {
		int n = len > INT_MAX ? INT_MAX : (int)len;
		if (decrypt) {
			mdecrypt_generic(td, p, n);
		} else {
			mcrypt_generic(td, p, n);
		}
		p += n;
		len -= n;
	}
}

// In libmcrypt 2.5.8 "cfb" mode, mcrypt_enc_set_state memcpy's the bytes
// into the CFB shift register (checked by experiment and by the tests), so
// setting it to the iv_size bytes of (IV || ciphertext) that precede buf
// resumes the stream exactly there.
static int nsca_decrypt_from(MCRYPT td, const void *reg, int reglen,
		void *buf, size_t len) {
	int rc = mcrypt_enc_set_state(td, (void *)reg, reglen);
	if (rc != 0) {
		return rc;
	}
	nsca_crypt(td, buf, len, 1);
	return 0;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// moduleMu serialises mcrypt_module_open and mcrypt_module_close: libmcrypt's
// module loader keeps global state and is not documented as thread-safe.
var moduleMu sync.Mutex

// Module is one open libmcrypt instance in 8-bit CFB mode. It carries the
// running CFB state of one stream, so it is not safe for concurrent use;
// give each connection (or each worker) its own Module.
type Module struct {
	td          C.MCRYPT // nil once closed
	algorithm   string
	keySize     int
	ivSize      int
	initialised bool // whether mcrypt_generic_init succeeded and needs a deinit
}

// Open opens algorithm (a libmcrypt name such as "rijndael-128") in "cfb"
// mode, as NSCA does. It fails for algorithms libmcrypt lacks or cannot run
// in cfb mode (stream ciphers such as arcfour, and a few block ciphers).
func Open(algorithm string) (*Module, error) {
	if algorithm == "" || strings.IndexByte(algorithm, 0) >= 0 || len(algorithm) >= C.NSCA_MAX_NAME {
		return nil, fmt.Errorf("%w %q in cfb mode: invalid name", ErrCannotOpen, algorithm)
	}
	moduleMu.Lock()
	r := C.nsca_open((*C.char)(unsafe.Pointer(unsafe.StringData(algorithm))), C.int(len(algorithm)))
	moduleMu.Unlock()
	if r.td == nil {
		return nil, fmt.Errorf("%w %q in cfb mode", ErrCannotOpen, algorithm)
	}
	return &Module{
		td:        r.td,
		algorithm: algorithm,
		keySize:   int(r.key_size),
		ivSize:    int(r.iv_size),
	}, nil
}

// Algorithm returns the name the Module was opened with, for log messages.
func (m *Module) Algorithm() string { return m.algorithm }

// KeySize is the algorithm's largest key size in bytes: NSCA always uses
// it, padding or truncating the password to fit.
func (m *Module) KeySize() int { return m.keySize }

// IVSize is the number of bytes of the server's 128-byte IV that are used,
// and also the length of the CFB shift register that DecryptFrom takes.
func (m *Module) IVSize() int { return m.ivSize }

func (m *Module) mustBeOpen(op string) {
	if m.td == nil {
		panic("mcrypt: " + op + " on closed Module")
	}
}

func (m *Module) mustBeReady(op string) {
	m.mustBeOpen(op)
	if !m.initialised {
		// libmcrypt would dereference NULL state buffers here.
		panic("mcrypt: " + op + " before successful Init")
	}
}

// Init keys the Module the way NSCA does: password truncated or zero-padded
// to KeySize bytes, IV the first IVSize bytes of iv (zero-padded if iv is
// shorter). It may be called again to rekey, e.g. for a new connection,
// which is cheaper than reopening the module.
func (m *Module) Init(password, iv []byte) error {
	return m.InitSized(password, iv, m.keySize)
}

// InitSized is Init with a key of keySize bytes (1..KeySize) instead of
// KeySize: libmcrypt then runs the algorithm's variant for that key length
// (rijndael-128 keyed with 16 bytes is AES-128), which NSCA itself never
// asks for but NSClient++'s aes128 and aes192 are.
func (m *Module) InitSized(password, iv []byte, keySize int) error {
	m.mustBeOpen("Init")
	if keySize < 1 || keySize > m.keySize {
		return fmt.Errorf("%w %s: key size %d, want 1..%d", ErrInit, m.algorithm, keySize, m.keySize)
	}
	initialised := C.int(0)
	if m.initialised {
		initialised = 1
	}
	// Lengths are clamped in Go because C takes ints; only the first
	// KeySize/IVSize bytes are ever read.
	pwlen := min(len(password), keySize)
	ivlen := min(len(iv), m.ivSize)
	rc := C.nsca_init(m.td, initialised,
		unsafe.Pointer(unsafe.SliceData(password)), C.int(pwlen), C.int(keySize),
		unsafe.Pointer(unsafe.SliceData(iv)), C.int(ivlen), C.int(m.ivSize))
	runtime.KeepAlive(password)
	runtime.KeepAlive(iv)
	if rc < 0 {
		// nsca_init has deinitialised any previous key, and a failed
		// mcrypt_generic_init frees its buffers itself but leaves dangling
		// pointers behind, so mcrypt_generic_deinit must not follow it.
		m.initialised = false
		if rc == C.NSCA_ERR_NOMEM {
			return fmt.Errorf("%w %s: out of memory", ErrInit, m.algorithm)
		}
		// mcrypt_strerror ends its messages with a newline, or is NULL.
		msg := strings.TrimSpace(C.GoString(C.mcrypt_strerror(rc)))
		return fmt.Errorf("%w %s: libmcrypt error %d %s", ErrInit, m.algorithm, int(rc), msg)
	}
	m.initialised = true
	return nil
}

// Decrypt decrypts buf in place, continuing the running CFB stream, which is
// how the original NSCA daemon treats consecutive packets on a connection.
func (m *Module) Decrypt(buf []byte) {
	m.mustBeReady("Decrypt")
	if len(buf) == 0 {
		return
	}
	C.nsca_crypt(m.td, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), 1)
	runtime.KeepAlive(buf)
}

// DecryptFrom decrypts buf in place as if the stream had been running, given
// register: the IVSize bytes of (IV || ciphertext) immediately before buf.
// This lets packets of one stream be decrypted out of order or on different
// Modules keyed with the same password. Callers decrypting in place must copy
// the register out of the previous packet before decrypting that packet.
//
// Unlike the other methods, it makes its C call even for an empty buf, so a
// following Decrypt still continues from register.
func (m *Module) DecryptFrom(register, buf []byte) {
	m.mustBeReady("DecryptFrom")
	if len(register) != m.ivSize {
		panic(fmt.Sprintf("mcrypt: DecryptFrom register is %d bytes, %s needs IVSize %d", len(register), m.algorithm, m.ivSize))
	}
	rc := C.nsca_decrypt_from(m.td,
		unsafe.Pointer(unsafe.SliceData(register)), C.int(len(register)),
		unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)))
	runtime.KeepAlive(register)
	runtime.KeepAlive(buf)
	if rc != 0 {
		// Only possible if libmcrypt's cfb mode lost set_state support.
		panic(fmt.Sprintf("mcrypt: mcrypt_enc_set_state failed for %s: %d", m.algorithm, int(rc)))
	}
}

// Encrypt encrypts buf in place, continuing the running CFB stream; the
// daemon never encrypts, but tests and the load generator play the client.
func (m *Module) Encrypt(buf []byte) {
	m.mustBeReady("Encrypt")
	if len(buf) == 0 {
		return
	}
	C.nsca_crypt(m.td, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), 0)
	runtime.KeepAlive(buf)
}

// Close releases the C resources. There is no finalizer, so every Module
// must be closed; Close is idempotent so it can be deferred unconditionally.
func (m *Module) Close() {
	if m.td == nil {
		return
	}
	initialised := C.int(0)
	if m.initialised {
		initialised = 1
	}
	moduleMu.Lock()
	C.nsca_close(m.td, initialised)
	moduleMu.Unlock()
	m.td = nil
	m.initialised = false
}
