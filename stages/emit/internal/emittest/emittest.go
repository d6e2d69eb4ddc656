// Package emittest holds the test helpers the sink engines' tests share:
// results to write and a small file system to fill. (Package sink's own
// tests keep theirs, since they cannot import a package that imports sink.)
package emittest

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/sink"
)

// Item is one result received at unix time t.
func Item(t int64, host, svc string, rc int16, out string) sink.Item {
	return sink.Item{Time: t, Result: codec.Result{Host: host, Service: svc, ReturnCode: rc, Output: out}}
}

// Items are n results, every fifth a host check, with outputs of at least
// outLen bytes.
func Items(n int, outLen int) []sink.Item {
	its := make([]sink.Item, n)
	for i := range its {
		out := fmt.Sprintf("result %04d ", i)
		if pad := outLen - len(out); pad > 0 {
			out += strings.Repeat(string(rune('a'+i%26)), pad)
		}
		svc := fmt.Sprintf("svc%d", i)
		if i%5 == 4 {
			svc = "" // some host checks
		}
		its[i] = Item(1762153445+int64(i), fmt.Sprintf("host%d", i), svc, int16(i%4), out)
	}
	return its
}

// SmallFS mounts a tmpfs with the given options (size=..., nr_inodes=...)
// on a new directory, for real ENOSPC; it skips the test when it cannot
// (not root, no mount permission in this container).
func SmallFS(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a tmpfs (%s) for a full-disk test: %v", opts, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}
