//go:build !cgo

package mcrypt

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenWithoutCgo(t *testing.T) {
	m, err := Open("rijndael-128")
	if m != nil || !errors.Is(err, ErrCannotOpen) || !strings.Contains(err.Error(), "without cgo") {
		t.Fatalf("Open = %v, %v; want nil and an ErrCannotOpen error mentioning cgo", m, err)
	}
	var z Module
	if err := z.Init(nil, nil); !errors.Is(err, ErrInit) {
		t.Fatalf("Init = %v, want ErrInit", err)
	}
	z.Close()
}
