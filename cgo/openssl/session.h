#ifndef NSCA_SESSION_H
#define NSCA_SESSION_H

#include <openssl/ssl.h>

// One per session: the identity the client presented, kept here because
// OpenSSL does not record it for a TLS 1.3 session made from the callback.
typedef struct {
	char identity[PSK_MAX_IDENTITY_LEN + 1];
	int known;
} nsca_sess;

#endif
