// Package mcrypt is a thin cgo binding to libmcrypt, restricted to what the
// NSCA v3 protocol needs: block ciphers in 8-bit CFB mode ("cfb").
//
// It exists so that nsca_fast produces byte-for-byte the same stream as the
// original C NSCA daemon and send_nsca client, which both use libmcrypt, and
// so that reimplementations of the ciphers elsewhere in nsca_fast have a
// reference (and a performance floor) to be measured against.
//
// The binding follows the conventions of crypto/internal/boring: every Go
// method is at most one cgo call, whole buffers are processed per call, and
// Go memory is only lent to C for the duration of a call, never retained.
//
// Built without cgo, the package still compiles but Open always fails, so
// the rest of nsca_fast can offer the methods it implements in pure Go.
package mcrypt
