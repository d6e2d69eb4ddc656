//go:build !cgo

package conf

import (
	"errors"
	"strings"
	"testing"
)

// TestNGListenWithoutCgo: a pure Go build has no OpenSSL, so it refuses
// nsca_ng_listen at validation, naming the line and the reason.
func TestNGListenWithoutCgo(t *testing.T) {
	c, err := Parse("t.cfg", []byte("command_file=/tmp/x\nidentities_file=/tmp/ids\nnsca_ng_listen=127.0.0.1:5668\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.validateNG()
	if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "t.cfg:3: nsca_ng_listen=127.0.0.1:5668") || !strings.Contains(err.Error(), "without cgo and OpenSSL") {
		t.Fatalf("err %v, want nsca_ng_listen refused at t.cfg:3 for want of cgo", err)
	}
}
