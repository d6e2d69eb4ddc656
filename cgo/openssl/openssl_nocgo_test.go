//go:build !cgo

package openssl

import (
	"errors"
	"testing"
)

func TestWithoutCgo(t *testing.T) {
	if _, err := NewContext(nil, "PSK"); !errors.Is(err, ErrContext) {
		t.Fatalf("err %v, want ErrContext", err)
	}
	if Available() == nil {
		t.Fatal("Available without cgo: nil")
	}
}
