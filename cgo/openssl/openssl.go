//go:build cgo

package openssl

/*
#cgo LDFLAGS: -lssl -lcrypto
#include <stdlib.h>
#include <string.h>
#include <openssl/ssl.h>
#include <openssl/err.h>

// The identities' keys live in C memory, sorted by nothing: a handshake
// scans them once, which costs nothing beside the handshake itself.
typedef struct {
	char *identity;
	unsigned char *key;
	unsigned int keylen;
} nsca_psk;

typedef struct {
	nsca_psk *keys;
	int n;
	int fallback; // index of the "*" key, or -1
} nsca_keys;

#include "session.h"

static int keys_index = -1;

static unsigned int nsca_psk_cb(SSL *ssl, const char *identity, unsigned char *psk, unsigned int max) {
	nsca_keys *k = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), keys_index);
	nsca_sess *s = SSL_get_app_data(ssl);
	int i, found = -1;
	if (k == NULL || s == NULL || identity == NULL) {
		return 0;
	}
	strncpy(s->identity, identity, PSK_MAX_IDENTITY_LEN);
	s->identity[PSK_MAX_IDENTITY_LEN] = '\0';
	for (i = 0; i < k->n; i++) {
		if (strcmp(k->keys[i].identity, identity) == 0) {
			found = i;
			break;
		}
	}
	if (found < 0) {
		found = k->fallback;
	}
	if (found < 0 || k->keys[found].keylen > max) {
		return 0;
	}
	s->known = 1;
	memcpy(psk, k->keys[found].key, k->keys[found].keylen);
	return k->keys[found].keylen;
}

static void nsca_keys_free(nsca_keys *k) {
	int i;
	if (k == NULL) {
		return;
	}
	for (i = 0; i < k->n; i++) {
		free(k->keys[i].identity);
		if (k->keys[i].key != NULL) {
			OPENSSL_cleanse(k->keys[i].key, k->keys[i].keylen);
		}
		free(k->keys[i].key);
	}
	free(k->keys);
	free(k);
}

// packed is n records of: identity length (4 bytes, native), identity,
// key length (4 bytes), key; it is copied and not kept.
static SSL_CTX *nsca_ctx_new(const char *packed, int plen, int n, const char *ciphers, int cipherslen, char *err, int errlen) {
	SSL_CTX *ctx;
	nsca_keys *k;
	char cbuf[1024];
	int i, off = 0;

	if (keys_index < 0) {
		keys_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	}
	ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL) {
		ERR_error_string_n(ERR_get_error(), err, errlen);
		return NULL;
	}
	if (cipherslen <= 0 || cipherslen >= (int)sizeof cbuf) {
		snprintf(err, errlen, "cipher list of %d bytes", cipherslen);
		SSL_CTX_free(ctx);
		return NULL;
	}
	memcpy(cbuf, ciphers, cipherslen);
	cbuf[cipherslen] = '\0';
	if (SSL_CTX_set_cipher_list(ctx, cbuf) != 1) {
		ERR_error_string_n(ERR_get_error(), err, errlen);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
	// One TLS 1.3 session ticket, though no client resumes: it is the
	// server's only message after the client's Finished. Without it the
	// server is silent there, the client's first request (MOIN), written
	// right behind its Finished, waits under Nagle for an ACK that the
	// server delays (40 ms on Linux): 44 ms more per session (issue 34).
	// SSL_OP_NO_TICKET makes it a stateful ticket, a session ID that no
	// cache keeps, so nothing is encrypted for it; and it stops TLS 1.2's
	// tickets, whose CCS and Finished come last and carry the ACK anyway.
	SSL_CTX_set_num_tickets(ctx, 1);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	k = calloc(1, sizeof *k);
	if (k == NULL || (n > 0 && (k->keys = calloc(n, sizeof *k->keys)) == NULL)) {
		free(k);
		snprintf(err, errlen, "out of memory");
		SSL_CTX_free(ctx);
		return NULL;
	}
	k->fallback = -1;
	for (i = 0; i < n; i++) {
		unsigned int il, kl;
		memcpy(&il, packed + off, 4);
		off += 4;
		k->keys[i].identity = calloc(1, il + 1);
		if (k->keys[i].identity != NULL) {
			memcpy(k->keys[i].identity, packed + off, il);
		}
		off += il;
		memcpy(&kl, packed + off, 4);
		off += 4;
		k->keys[i].key = malloc(kl + 1);
		if (k->keys[i].key != NULL) {
			memcpy(k->keys[i].key, packed + off, kl);
		}
		k->keys[i].keylen = kl;
		off += kl;
		k->n = i + 1;
		if (k->keys[i].identity == NULL || k->keys[i].key == NULL) {
			nsca_keys_free(k);
			snprintf(err, errlen, "out of memory");
			SSL_CTX_free(ctx);
			return NULL;
		}
		if (strcmp(k->keys[i].identity, "*") == 0) {
			k->fallback = i;
		}
	}
	SSL_CTX_set_ex_data(ctx, keys_index, k);
	SSL_CTX_set_psk_server_callback(ctx, nsca_psk_cb);
	return ctx;
}

static void nsca_ctx_free(SSL_CTX *ctx) {
	nsca_keys_free(SSL_CTX_get_ex_data(ctx, keys_index));
	SSL_CTX_free(ctx);
}

*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"
)

// errLen is the size of the buffer a failing call explains itself in.
const errLen = 256

// Context is a TLS-PSK server configuration with the identities' keys.
type Context struct{ ctx *C.SSL_CTX }

// Key is one identity's pre-shared key; Identity "*" serves every client
// whose identity has no key of its own.
type Key struct {
	Identity string
	PSK      []byte
}

// NewContext makes a server context offering ciphers (an OpenSSL cipher
// list for TLS 1.2 and older; TLS 1.3 offers its own suites) with keys.
func NewContext(keys []Key, ciphers string) (*Context, error) {
	var packed bytes.Buffer
	for _, k := range keys {
		binary.Write(&packed, binary.NativeEndian, uint32(len(k.Identity)))
		packed.WriteString(k.Identity)
		binary.Write(&packed, binary.NativeEndian, uint32(len(k.PSK)))
		packed.Write(k.PSK)
	}
	p := packed.Bytes()
	p = append(p, 0) // never an empty slice: its data pointer is passed
	var err [errLen]C.char
	ctx := C.nsca_ctx_new((*C.char)(unsafe.Pointer(&p[0])), C.int(len(p)), C.int(len(keys)),
		(*C.char)(unsafe.Pointer(unsafe.StringData(ciphers+"\x00"))), C.int(len(ciphers)), &err[0], errLen)
	runtime.KeepAlive(p)
	clear(p)
	if ctx == nil {
		return nil, fmt.Errorf("%w: %s", ErrContext, C.GoString(&err[0]))
	}
	return &Context{ctx: ctx}, nil
}

// Close frees the context; its sessions must have been freed first.
func (c *Context) Close() {
	if c.ctx != nil {
		C.nsca_ctx_free(c.ctx)
		c.ctx = nil
	}
}

// Available reports whether this build can serve TLS-PSK.
func Available() error { return nil }
