package cipher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// withoutNative is a stock method with no row in natives, or skips t.
func withoutNative(t testing.TB) (int, string) {
	m, name, ok := noNativeMethod()
	if !ok {
		t.Skip("every stock method has a native engine")
	}
	return m, name
}

// TestChooseEveryRow: every row of natives is chosen natively under auto,
// with the self-test's account in the report, and this project's own
// methods whatever decryption_engine says; under libmcrypt, stock's methods
// are served by libmcrypt, or natively with a warning in a build without it.
func TestChooseEveryRow(t *testing.T) {
	for _, s := range natives {
		for _, engine := range []string{"", EngineAuto, EngineNative, EngineLibmcrypt} {
			c, err := Choose(s.method, s.algorithm, []byte("choose"), engine)
			if err != nil {
				t.Fatalf("Choose(%s, %q): %v", s.algorithm, engine, err)
			}
			asked := engine
			if asked == "" {
				asked = DefaultEngine
			}
			wantKind := EngineNative
			if asked == EngineLibmcrypt && !s.own() && haveCgo {
				wantKind = EngineLibmcrypt
			}
			if c.Kind() != wantKind || c.Asked != asked || c.CallsC() != (wantKind == EngineLibmcrypt) {
				t.Errorf("Choose(%s, %q) = %s asked %s, want %s", s.algorithm, engine, c.Kind(), c.Asked, wantKind)
			}
			rep := c.Report()
			if !strings.HasPrefix(rep, wantKind+" (decryption_engine="+asked+"): ") {
				t.Errorf("Choose(%s, %q).Report() = %q", s.algorithm, engine, rep)
			}
			switch {
			case wantKind == EngineLibmcrypt:
				if c.Why != "as stock" || c.Warn {
					t.Errorf("Choose(%s, libmcrypt): why %q warn %v", s.algorithm, c.Why, c.Warn)
				}
			case haveCgo && s.ref != "":
				if !strings.Contains(c.Why, "self-test passed") || c.Warn {
					t.Errorf("Choose(%s, %q): why %q warn %v; want the self-test passed", s.algorithm, engine, c.Why, c.Warn)
				}
			default:
				if !strings.Contains(c.Why, "self-test skipped") || c.Warn != (s.ref != "") {
					t.Errorf("Choose(%s, %q): why %q warn %v; want the self-test skipped", s.algorithm, engine, c.Why, c.Warn)
				}
			}
			if s.own() && !strings.HasPrefix(c.Why, "nsca_fast's own method, always native") {
				t.Errorf("Choose(%s, %q): why %q does not say it is our own method", s.algorithm, engine, c.Why)
			}
			if !haveCgo && asked == EngineLibmcrypt && !s.own() && !strings.Contains(c.Why, "built without libmcrypt") {
				t.Errorf("Choose(%s, libmcrypt) without cgo: why %q does not say libmcrypt is missing", s.algorithm, c.Why)
			}
		}
	}
}

// TestChooseNoCipher: methods 0 and 1 need no engine; an unknown engine is
// refused for any method.
func TestChooseNoCipher(t *testing.T) {
	for _, m := range []int{0, 1} {
		c, err := Choose(m, "", []byte("pw"), "")
		if err != nil || c.Engine != nil || c.CallsC() || c.Report() != "nsca_fast itself" {
			t.Errorf("Choose(%d) = %+v, %v; want no engine", m, c, err)
		}
	}
	for _, m := range []int{1, 14} {
		if _, err := Choose(m, "rijndael-128", nil, "fast"); !errors.Is(err, ErrEngine) || !strings.Contains(err.Error(), `"fast"`) {
			t.Errorf("Choose(%d, fast) = %v, want ErrEngine naming it", m, err)
		}
	}
}

// TestChooseWithoutNative: auto serves a method without a native engine by
// libmcrypt, saying why (or refuses naming libmcrypt in a build without
// it); native refuses it.
func TestChooseWithoutNative(t *testing.T) {
	n, name := withoutNative(t)
	c, err := Choose(n, name, []byte("pw"), EngineAuto)
	if haveCgo {
		if err != nil || c.Kind() != EngineLibmcrypt || c.Why != "no native engine for "+name || c.Warn {
			t.Errorf("Choose(%s, auto) = %+v, %v; want libmcrypt, no native engine", name, c, err)
		}
	} else if !errors.Is(err, ErrLibmcrypt) || !strings.Contains(err.Error(), name) {
		t.Errorf("Choose(%s, auto) without cgo = %v; want ErrLibmcrypt naming it", name, err)
	}
	if _, err := Choose(n, name, []byte("pw"), EngineNative); !errors.Is(err, ErrNoNative) || !strings.Contains(err.Error(), name) {
		t.Errorf("Choose(%s, native) = %v; want ErrNoNative naming it", name, err)
	}
}

// TestChooseFailedSelfTest: a native engine that decrypts wrongly is
// refused under native and for this project's own methods, and replaced by
// libmcrypt under auto, with a warning that says why.
func TestChooseFailedSelfTest(t *testing.T) {
	if !haveCgo {
		t.Skip("without libmcrypt there is nothing to compare with")
	}
	defer func() { selfTestKeyHook = nil }()
	selfTestKeyHook = func(k Key) Key { return &flipKey{Key: k} }
	for _, s := range referenced() {
		if s.own() {
			if _, err := Choose(s.method, s.algorithm, []byte("pw"), EngineAuto); !errors.Is(err, ErrSelfTest) {
				t.Errorf("Choose(%s) with a wrong engine = %v; want ErrSelfTest", s.algorithm, err)
			}
			continue
		}
		if _, err := Choose(s.method, s.algorithm, []byte("pw"), EngineNative); !errors.Is(err, ErrSelfTest) {
			t.Errorf("Choose(%s, native) with a wrong engine = %v; want ErrSelfTest", s.algorithm, err)
		}
		c, err := Choose(s.method, s.algorithm, []byte("pw"), EngineAuto)
		if err != nil || c.Kind() != EngineLibmcrypt || !c.Warn ||
			!strings.HasPrefix(c.Why, "the native engine failed its self-test, so libmcrypt serves: cipher: self-test failed") {
			t.Errorf("Choose(%s, auto) with a wrong engine = %+v, %v; want libmcrypt with a warning", s.algorithm, c, err)
		}
	}
}

// flipKey is a wrong engine: it flips a bit of every chunk's first byte.
type flipKey struct{ Key }

func (f *flipKey) Decrypt(s *State, buf []byte) {
	f.Key.Decrypt(s, buf)
	if len(buf) > 0 {
		buf[0] ^= 1
	}
}

// BenchmarkChoose is the price of one Choose under auto (a self-test for a
// native engine), paid once per method and password a daemon serves.
func BenchmarkChoose(b *testing.B) {
	for _, s := range natives {
		b.Run(fmt.Sprintf("%d-%s", s.method, s.algorithm), func(b *testing.B) {
			for b.Loop() {
				if _, err := Choose(s.method, s.algorithm, []byte("bench-password"), EngineAuto); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
