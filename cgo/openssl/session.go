//go:build cgo

package openssl

/*
#include <stdlib.h>
#include <string.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include "session.h"

#cgo noescape nsca_op
#cgo nocallback nsca_op

// A session's TLS records go through two memory BIOs, not the socket: Go
// reads and writes the socket itself with raw system calls. A cgo call is
// a system call to Go's scheduler, and one that writes to a loopback
// socket wakes the client, is often preempted by it, and outlasts
// sysmon's tick: the P is then handed to another thread, and sysmon polls
// every 20 µs, wake-ups and context switches for every reply. In memory,
// a call is only the cryptography. The input BIO reports "retry" when
// empty, until Go tells it the socket ended.
static SSL *nsca_ssl_new(SSL_CTX *ctx) {
	SSL *ssl = SSL_new(ctx);
	BIO *rbio, *wbio;
	nsca_sess *s;
	if (ssl == NULL) {
		return NULL;
	}
	s = calloc(1, sizeof *s);
	rbio = BIO_new(BIO_s_mem());
	wbio = BIO_new(BIO_s_mem());
	if (s == NULL || rbio == NULL || wbio == NULL) {
		free(s);
		BIO_free(rbio);
		BIO_free(wbio);
		SSL_free(ssl);
		return NULL;
	}
	BIO_set_mem_eof_return(rbio, -1);
	BIO_set_mem_eof_return(wbio, -1);
	SSL_set_bio(ssl, rbio, wbio);
	SSL_set_app_data(ssl, s);
	SSL_set_accept_state(ssl);
	return ssl;
}

static void nsca_ssl_free(SSL *ssl) {
	free(SSL_get_app_data(ssl));
	SSL_free(ssl);
}

enum { NSCA_HANDSHAKE, NSCA_READ, NSCA_WRITE, NSCA_SHUTDOWN, NSCA_DRAIN };

// The result of one call: bytes moved (or 1 for a finished handshake),
// SSL_get_error's verdict, the ciphertext bytes put in out, and whether
// more ciphertext waits in the output BIO, or in the input (a record or
// decrypted bytes not read yet), or in the input BIO alone (bytes OpenSSL
// did not even look at).
typedef struct {
	int n;
	int code;
	int out;
	int out_left;
	int in_left;
	int bio_left;
} nsca_io;

// The peer closed the connection without close_notify: not an SSL_ERROR_*.
#define NSCA_EOF (-2)

static void nsca_result(SSL *ssl, int rc, nsca_io *r, char *err, int errlen) {
	unsigned long e;
	r->n = rc;
	r->code = SSL_ERROR_NONE;
	if (rc > 0) {
		return;
	}
	r->n = 0;
	r->code = SSL_get_error(ssl, rc);
	if (r->code == SSL_ERROR_SSL || r->code == SSL_ERROR_SYSCALL) {
		e = ERR_get_error();
		if (e != 0) {
			ERR_error_string_n(e, err, errlen);
		} else {
			err[0] = '\0';
		}
		if ((r->code == SSL_ERROR_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
				(r->code == SSL_ERROR_SYSCALL && e == 0)) {
			r->code = NSCA_EOF;
		}
	}
	ERR_clear_error();
}

// One call per buffer: in (ciphertext from the socket) goes into the
// input BIO, eof says the socket ended after it, op runs on buf, and what
// the output BIO holds then is moved to out, as much as fits. in and out
// may be one buffer: in is copied before out is written.
static nsca_io nsca_op(SSL *ssl, int op, const void *in, int inlen, int eof, void *buf, int buflen,
		void *out, int outcap, char *err, int errlen) {
	nsca_io r = { 0, SSL_ERROR_NONE, 0, 0, 0, 0 };
	BIO *rbio = SSL_get_rbio(ssl), *wbio = SSL_get_wbio(ssl);
	if (inlen > 0) {
		BIO_write(rbio, in, inlen);
	}
	if (eof) {
		BIO_set_mem_eof_return(rbio, 0);
	}
	switch (op) {
	case NSCA_HANDSHAKE:
		nsca_result(ssl, SSL_do_handshake(ssl), &r, err, errlen);
		break;
	case NSCA_READ:
		nsca_result(ssl, SSL_read(ssl, buf, buflen), &r, err, errlen);
		break;
	case NSCA_WRITE:
		nsca_result(ssl, SSL_write(ssl, buf, buflen), &r, err, errlen);
		break;
	case NSCA_SHUTDOWN:
		SSL_shutdown(ssl);
		ERR_clear_error();
		break;
	}
	if (outcap > 0 && BIO_ctrl_pending(wbio) > 0) {
		r.out = BIO_read(wbio, out, outcap);
		if (r.out < 0) {
			r.out = 0;
		}
	}
	r.out_left = BIO_ctrl_pending(wbio) > 0;
	r.bio_left = BIO_ctrl_pending(rbio) > 0;
	r.in_left = r.bio_left || SSL_has_pending(ssl);
	return r;
}

// Fills out with the identity, protocol version and cipher, NUL-separated.
static int nsca_describe(SSL *ssl, char *out, int outlen) {
	nsca_sess *s = SSL_get_app_data(ssl);
	const char *c = SSL_get_cipher_name(ssl);
	return snprintf(out, outlen, "%s%c%s%c%s%c%d", s ? s->identity : "", 0, SSL_get_version(ssl), 0, c ? c : "", 0, s ? s->known : 0);
}
*/
import "C"

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/rawsys"
)

// scratchSize holds a whole TLS record and its header: one socket read
// takes every record a client sent in one go.
const scratchSize = 16<<10 + 512

// scratchBuf is what one operation needs besides the session: the buffer
// ciphertext passes through on its way between the socket and OpenSSL's
// BIOs (which copy it), and the C call's result. A session holds none
// between calls, so idle sessions cost no buffer, and a call allocates
// nothing.
type scratchBuf struct {
	b   [scratchSize]byte
	io  C.nsca_io
	err [errLen]C.char
}

var scratch = sync.Pool{New: func() any { return new(scratchBuf) }}

// Session is the TLS server side of one connection on a non-blocking
// socket, which stays the caller's to poll and close.
type Session struct {
	// ssl is made with the first bytes the client sends: a wake-up for a
	// new connection then makes no C call (the first one after the
	// process idled also wakes the runtime's sysmon thread), and a
	// connection that sends nothing costs no OpenSSL session.
	ctx *C.SSL_CTX
	ssl *C.SSL
	fd  int
	// starved: OpenSSL's last handshake step or read wanted input and had
	// none left; a call before more input comes would only say so again.
	starved bool
	calls   int // C calls made on the session, for tests
	// pend is ciphertext the socket did not take yet; outLeft says the
	// output BIO holds more behind it.
	pend    []byte
	outLeft bool
	eof     bool // the socket read ended: OpenSSL is told once
	eofSent bool
}

// NewSession starts the server side of a handshake on fd; the OpenSSL
// session is made once the client's first bytes come, and Handshake
// reports an error then if it cannot be.
func (c *Context) NewSession(fd int) (*Session, error) {
	return &Session{ctx: c.ctx, fd: fd, starved: true}, nil
}

// Want says what a call that could not finish waits for.
type Want int

// What a call waits for.
const (
	// Done: the call finished.
	Done Want = iota
	// WantRead: call again once the socket is readable. With bytes read,
	// it says the socket had no more and nothing is left in the session:
	// reading before the next readable event would find nothing.
	WantRead
	// WantWrite: call again once the socket is writable.
	WantWrite
)

// Handshake advances the handshake; Done with no error: it is complete.
func (s *Session) Handshake() (Want, error) {
	_, w, err := s.do(C.NSCA_HANDSHAKE, nil, "handshake")
	return w, err
}

// Read decrypts what the socket has into buf.
func (s *Session) Read(buf []byte) (int, Want, error) {
	if len(buf) == 0 {
		return 0, Done, nil
	}
	return s.do(C.NSCA_READ, buf, "read")
}

// Write encrypts buf and sends it; what the socket does not take at once
// waits for Flush, and Write says WantWrite with all of buf taken.
func (s *Session) Write(buf []byte) (int, Want, error) {
	if len(buf) == 0 {
		return 0, Done, nil
	}
	return s.do(C.NSCA_WRITE, buf, "write")
}

// Shutdown sends close_notify, without waiting for the peer's; what the
// socket does not take at once is left to Flush. Before the client sent
// anything there is no session to close.
func (s *Session) Shutdown() {
	if s.ssl != nil {
		s.do(C.NSCA_SHUTDOWN, nil, "shutdown")
	}
}

// Pending says that ciphertext waits for room in the socket.
func (s *Session) Pending() bool { return len(s.pend) > 0 || s.outLeft }

// Flush sends what waits for room in the socket: WantWrite while some
// still does.
func (s *Session) Flush() (Want, error) {
	sc := scratch.Get().(*scratchBuf)
	defer scratch.Put(sc)
	return s.flush(sc)
}

// do runs op on buf, with the socket read whenever OpenSSL needs more
// input, and sends what it wrote behind what waits already.
func (s *Session) do(op C.int, buf []byte, what string) (int, Want, error) {
	sc := scratch.Get().(*scratchBuf)
	defer scratch.Put(sc)
	in, drained := 0, false
	reads := op == C.NSCA_READ || op == C.NSCA_HANDSHAKE
	for {
		eof := s.eof && !s.eofSent
		if in > 0 || eof || s.eofSent || !(reads && s.starved) {
			if n, want, done, err := s.step(op, sc.b[:in], eof, buf, drained, what, sc); done {
				return n, want, err
			}
		}
		var err error
		if in, drained, err = s.fill(sc); err != nil {
			return 0, Done, fmt.Errorf("%w: %s: %w", ErrTLS, what, err)
		}
		if in == 0 && !s.eof {
			return 0, WantRead, nil
		}
		if in == 0 && s.ssl == nil {
			// Closed before it sent a byte: no handshake began.
			return 0, Done, fmt.Errorf("%w: %s: %w", ErrTLS, what, ErrEOF)
		}
	}
}

// step is one C call of do, with in (ciphertext read) and eof for OpenSSL,
// and sends what it wrote; done says do returns what it returns, and not
// that OpenSSL wants input (drained: the socket was read to its end).
func (s *Session) step(op C.int, in []byte, eof bool, buf []byte, drained bool, what string, sc *scratchBuf) (n int, want Want, done bool, err error) {
	if s.ssl == nil {
		if s.ssl = C.nsca_ssl_new(s.ctx); s.ssl == nil {
			return 0, Done, true, fmt.Errorf("%w on descriptor %d", ErrSession, s.fd)
		}
	}
	s.call(op, in, eof, buf, sc)
	s.eofSent = s.eofSent || eof
	if op == C.NSCA_READ || op == C.NSCA_HANDSHAKE {
		// A partial record counts as pending (SSL_has_pending), but
		// OpenSSL can do nothing with it before more comes.
		s.starved = sc.io.code == C.SSL_ERROR_WANT_READ && sc.io.bio_left == 0
	}
	if err := s.send(sc.b[:sc.io.out], sc.io.out_left != 0, sc); err != nil {
		return 0, Done, true, fmt.Errorf("%w: %s: %w", ErrTLS, what, err)
	}
	n, want, err = outcome(sc, what)
	switch {
	case err != nil:
		return n, want, true, err
	case s.Pending() && (want != Done || op == C.NSCA_WRITE):
		// Called again, or Flush, once the socket takes the rest.
		return n, WantWrite, true, nil
	case op == C.NSCA_READ && drained && sc.io.in_left == 0:
		return n, WantRead, true, nil
	case want != WantRead || drained:
		return n, want, true, nil
	}
	return 0, WantRead, false, nil
}

// fill reads the socket into sc; drained says it has nothing more now,
// and then with edge-triggered polling new input brings an event. A
// connection reset reads as its end, as OpenSSL took it on the socket.
func (s *Session) fill(sc *scratchBuf) (n int, drained bool, err error) {
	for {
		n, err = rawsys.Read(s.fd, sc.b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, true, nil
		case err == unix.ECONNRESET || err == nil && n == 0:
			s.eof = true
			return 0, true, nil
		case err != nil:
			return 0, true, err
		}
		return n, n < len(sc.b), nil
	}
}

// call is the one C call of an operation; its result is in sc, and
// the ciphertext it wrote at the start of sc.b.
func (s *Session) call(op C.int, in []byte, eof bool, buf []byte, sc *scratchBuf) {
	var inp, bufp unsafe.Pointer
	if len(in) > 0 {
		inp = unsafe.Pointer(&in[0])
	}
	if len(buf) > 0 {
		bufp = unsafe.Pointer(&buf[0])
	}
	e := C.int(0)
	if eof {
		e = 1
	}
	// Taken apart from the call: cgo would box the whole array of an
	// &array[0] argument for its pointer check, 17 KB copied per call.
	outp, errp := unsafe.Pointer(&sc.b[0]), &sc.err[0]
	s.calls++
	sc.io = C.nsca_op(s.ssl, op, inp, C.int(len(in)), e, bufp, C.int(len(buf)), outp, scratchSize, errp, errLen)
	runtime.KeepAlive(in)
	runtime.KeepAlive(buf)
	runtime.KeepAlive(sc)
}

// send writes ciphertext to the socket and keeps what it does not take;
// more says the output BIO holds more behind it.
func (s *Session) send(b []byte, more bool, sc *scratchBuf) error {
	s.outLeft = s.outLeft || more
	if len(s.pend) > 0 {
		s.pend = append(s.pend, b...)
		return nil
	}
	if stashed, err := s.writeOrKeep(b); stashed || err != nil {
		return err
	}
	if s.outLeft {
		_, err := s.flush(sc)
		return err
	}
	return nil
}

// flush sends what waits, the output BIO's rest through sc.
func (s *Session) flush(sc *scratchBuf) (Want, error) {
	for len(s.pend) > 0 {
		n, err := rawsys.Write(s.fd, s.pend)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return WantWrite, nil
		case err != nil:
			return Done, fmt.Errorf("%w: write: %w", ErrTLS, err)
		}
		s.pend = s.pend[n:]
	}
	s.pend = nil
	for s.outLeft {
		s.call(C.NSCA_DRAIN, nil, false, nil, sc)
		s.outLeft = sc.io.out_left != 0
		stashed, err := s.writeOrKeep(sc.b[:sc.io.out])
		switch {
		case err != nil:
			return Done, fmt.Errorf("%w: write: %w", ErrTLS, err)
		case stashed:
			return WantWrite, nil
		}
	}
	return Done, nil
}

// writeOrKeep writes b to the socket; what a full socket does not take is
// copied to pend, and kept reports that. b may be scratch space.
func (s *Session) writeOrKeep(b []byte) (kept bool, err error) {
	for len(b) > 0 {
		n, err := rawsys.Write(s.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			s.pend = append([]byte(nil), b...)
			return true, nil
		case err != nil:
			return false, err
		}
		b = b[n:]
	}
	return false, nil
}

// outcome is what the C call in sc says to the caller.
func outcome(sc *scratchBuf, what string) (int, Want, error) {
	switch sc.io.code {
	case C.SSL_ERROR_NONE:
		return int(sc.io.n), Done, nil
	case C.SSL_ERROR_WANT_READ:
		return 0, WantRead, nil
	case C.SSL_ERROR_WANT_WRITE:
		return 0, WantWrite, nil
	case C.SSL_ERROR_ZERO_RETURN:
		return 0, Done, ErrClosed
	case C.NSCA_EOF:
		return 0, Done, fmt.Errorf("%w: %s: %w", ErrTLS, what, ErrEOF)
	}
	why := C.GoString(&sc.err[0])
	if why == "" {
		why = "connection ended"
	}
	return 0, Done, fmt.Errorf("%w: %s: %s", ErrTLS, what, why)
}

// Info describes a session once its handshake has begun.
type Info struct {
	// Identity is what the client presented; Known says a key (its own or
	// "*") was found for it.
	Identity string
	Known    bool
	// Version and Cipher are as OpenSSL names them ("TLSv1.3").
	Version, Cipher string
}

// Info reports the session's identity, protocol version and cipher.
func (s *Session) Info() Info {
	if s.ssl == nil {
		return Info{}
	}
	var out [512]C.char
	n := C.nsca_describe(s.ssl, &out[0], C.int(len(out)))
	b := C.GoBytes(unsafe.Pointer(&out[0]), C.int(min(int(n), len(out)-1)))
	f := bytes.SplitN(b, []byte{0}, 4)
	for len(f) < 4 {
		f = append(f, nil)
	}
	known, _ := strconv.Atoi(string(f[3]))
	return Info{Identity: string(f[0]), Version: string(f[1]), Cipher: string(f[2]), Known: known == 1}
}

// Free releases the session; the socket stays open. Trim gives the
// memory back to the system.
func (s *Session) Free() {
	if s.ssl != nil {
		C.nsca_ssl_free(s.ssl)
		s.ssl = nil
		freed.Add(1)
	}
}
