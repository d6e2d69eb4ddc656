//go:build cgo

package openssl

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

// glibc keeps what OpenSSL freed in its arenas, one per thread that
// allocated (Go runs the sessions on several), and hands a page back only
// from an arena's top; malloc_trim also releases the free pages inside.
static void nsca_trim(void) {
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}
*/
import "C"

import "sync/atomic"

// trimAfter is how many sessions must have been freed since the last trim
// for Trim to trim. A session leaves about 15 KB in the C heap, so fewer
// leave less than 4 MB behind; and one malloc_trim (0.2 ms on a quiet
// heap, 5 ms after 2,000 sessions) is then shared by that many sessions,
// not paid by each when clients come one at a time.
const trimAfter = 256

// freed counts the sessions freed since the last trim.
var freed atomic.Int64

// Trim gives the memory of freed sessions back to the system once
// trimAfter of them have been freed since the last trim, and reports
// whether it did. Call it when the open sessions drop to zero: OpenSSL's
// per-session allocations (about 15 KB each) stay in glibc's arenas after
// SSL_free, and after a burst of 2,000 sessions kept 30 MB.
func Trim() bool {
	if freed.Load() < trimAfter {
		return false
	}
	n := freed.Swap(0)
	if n < trimAfter {
		// Another Trim took the count first.
		freed.Add(n)
		return false
	}
	C.nsca_trim()
	return true
}
