package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate: the committed desbs_gen.go and desbs_amd64.s are
// what desgen makes from today's des.go (else run go generate).
func TestGeneratedUpToDate(t *testing.T) {
	dir := filepath.Join("..", "..")
	files, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what desgen makes: run go generate ./stages/cipher", name)
		}
	}
}
