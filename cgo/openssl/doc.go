// Package openssl is the TLS-PSK server side of the nsca-ng listener,
// through the system's libssl: Go's crypto/tls has no pre-shared key
// suites. It is a thin layer: each operation is one C call per buffer,
// OpenSSL works on memory while Go reads and writes the caller's
// non-blocking socket with raw system calls and reports when it would
// block, and C never keeps a Go pointer (the keys and the records are
// copied into C memory, buffers are only used during the call that is
// given them).
package openssl
