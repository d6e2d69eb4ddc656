//go:build !cgo

package cipher

import (
	"errors"
	"strings"
	"testing"
)

// TestWithoutCgo: native engines work, libmcrypt refuses naming itself, and
// the self-test says it was skipped.
func TestWithoutCgo(t *testing.T) {
	type refusal struct {
		engine string
		method int
		name   string
	}
	refusals := []refusal{{EngineLibmcrypt, 14, "rijndael-128"}, {EngineLibmcrypt, 8, "blowfish"}}
	if m, alg, ok := noNativeMethod(); ok {
		refusals = append(refusals, refusal{EngineAuto, m, alg})
	}
	for _, tc := range refusals {
		_, err := New(tc.engine, tc.method, tc.name, []byte("pw"))
		if !errors.Is(err, ErrLibmcrypt) || !strings.Contains(err.Error(), "libmcrypt") ||
			!strings.Contains(err.Error(), "without cgo") || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("New(%s, %s) = %v; want ErrLibmcrypt naming libmcrypt, cgo and the method", tc.engine, tc.name, err)
		}
	}
	for _, m := range natives {
		e, err := New(EngineAuto, m.method, m.algorithm, []byte("pw"))
		if err != nil || e.Kind() != EngineNative {
			t.Fatalf("auto %s = %v, %v; want native", m.algorithm, e, err)
		}
		rep, err := SelfTest(e)
		if err != nil || !rep.Skipped || !strings.Contains(rep.String(), "skipped") || !strings.Contains(rep.String(), "without cgo") {
			t.Errorf("SelfTest = %v, %v; want skipped for lack of cgo", rep, err)
		}
	}
}
