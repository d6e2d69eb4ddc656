// Package tests holds black-box tests of the nsca daemon: they build the
// real binary, start it on loopback with configurations written to temporary
// directories, feed it with the real send_nsca (Debian's nsca-client) and
// read what arrives in real command files, FIFOs and spool directories.
//
// Run them with `go test ./tests/`. They need /usr/sbin/send_nsca; the
// comparison with the stock daemon runs only where /usr/sbin/nsca exists.
// Set NSCA_BIN to test an already built binary instead of building one.
package tests
