package conf

import (
	"errors"
	"testing"
)

// TestNGListenNeedsIdentities: nsca-ng clients authenticate as identities,
// so nsca_ng_listen without identities_file is refused.
func TestNGListenNeedsIdentities(t *testing.T) {
	c, err := Parse("t.cfg", []byte("command_file=/tmp/x\nnsca_ng_listen=127.0.0.1:5668\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validateNG(); err == nil || (!errors.Is(err, ErrConflict) && !errors.Is(err, ErrBadValue)) {
		t.Fatalf("err %v, want a refusal", err)
	}
}
