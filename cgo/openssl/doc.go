// Package openssl is the TLS-PSK server side of the nsca-ng listener,
// through the system's libssl: Go's crypto/tls has no pre-shared key
// suites. It is a thin layer: each method is one C call, OpenSSL works on
// the caller's non-blocking socket and reports when it would block, and C
// never keeps a Go pointer (the keys are copied into C memory, buffers are
// only used during the call that is given them).
package openssl
