package cipher

import "fmt"

// Choice is what serves one method with one password, and why.
type Choice struct {
	// Engine decrypts; nil for methods 0 and 1, which need no cipher.
	Engine Engine
	// Asked is the decryption_engine the choice was made for.
	Asked string
	// Why says why Engine serves: the self-test's account, or why it is
	// not the engine asked for; empty for methods 0 and 1.
	Why string
	// Warn marks a Why the operator should hear of as a warning: the
	// self-test could not run, or another engine serves than the one asked.
	Warn bool
}

// Kind is what serves: EngineNative or EngineLibmcrypt, "" for methods 0
// and 1.
func (c Choice) Kind() string {
	if c.Engine == nil {
		return ""
	}
	return c.Engine.Kind()
}

// CallsC says whether every Decrypt is a cgo call: libmcrypt serves.
func (c Choice) CallsC() bool { return c.Kind() == EngineLibmcrypt }

// Report is the choice as the start-up line says it, for example "native
// (decryption_engine=auto): self-test passed: ...", or "nsca_fast itself"
// for methods 0 and 1.
func (c Choice) Report() string {
	if c.Engine == nil {
		return "nsca_fast itself"
	}
	return fmt.Sprintf("%s (decryption_engine=%s): %s", c.Kind(), c.Asked, c.Why)
}

// Choose returns the engine that serves NSCA method number method
// (algorithm is its libmcrypt name, or this project's for its own methods)
// with password, as decryption_engine=engine asks ("" is DefaultEngine):
//
//   - libmcrypt: libmcrypt, as stock; in a build without libmcrypt the
//     native engine where there is one, since that build exists to serve
//     those methods.
//   - native: the native engine once SelfTest has proved it against
//     libmcrypt; an error for a method without one or a failed self-test.
//   - auto: the native engine where there is one and its self-test passes,
//     libmcrypt otherwise.
//
// This project's own methods (OwnMethods) are always native. Methods 0 and
// 1 need no engine: the Choice's Engine is nil. Choose keeps nothing; it
// costs a key schedule and, for a native engine, a self-test of a few
// milliseconds, so the caller calls it once for each method and password it
// serves and keeps the Choice for as long as it serves them.
func Choose(method int, algorithm string, password []byte, engine string) (Choice, error) {
	if engine == "" {
		engine = DefaultEngine
	}
	c := Choice{Asked: engine}
	if !IsEngine(engine) {
		return c, errUnknownEngine(engine)
	}
	if method == 0 || method == 1 {
		return c, nil
	}
	spec, native := nativeFor(method)
	switch {
	case native && spec.own():
		return c.proven(method, algorithm, password, "nsca_fast's own method, always native: ")
	case engine == EngineNative:
		return c.proven(method, algorithm, password, "")
	case engine == EngineAuto && native:
		n, err := c.proven(method, algorithm, password, "")
		if err == nil {
			return n, nil
		}
		l, lerr := c.libmcrypt(method, algorithm, password, "the native engine failed its self-test, so libmcrypt serves: "+err.Error())
		if lerr != nil {
			return c, fmt.Errorf("%w; and libmcrypt cannot serve either: %w", err, lerr)
		}
		l.Warn = true
		return l, nil
	case engine == EngineLibmcrypt && native && !haveCgo:
		n, err := c.proven(method, algorithm, password, "")
		n.Why += "; decryption_engine=libmcrypt, but this nsca_fast was built without libmcrypt, so the native engine serves"
		n.Warn = true
		return n, err
	case engine == EngineAuto:
		return c.libmcrypt(method, algorithm, password, "no native engine for "+algorithm)
	}
	return c.libmcrypt(method, algorithm, password, "as stock")
}

// proven is c served by the native engine of method, once SelfTest has
// passed or said why it could not compare; why prefixes the test's account.
func (c Choice) proven(method int, algorithm string, password []byte, why string) (Choice, error) {
	e, err := newNative(method, algorithm, password)
	if err != nil {
		return c, err
	}
	rep, err := SelfTest(e)
	if err != nil {
		return c, err
	}
	c.Engine, c.Why = e, why+rep.String()
	// A skip for want of libmcrypt is news; one for a cipher libmcrypt has
	// no equal of is how that method always starts.
	c.Warn = rep.Skipped && e.(*nativeEngine).spec.ref != ""
	return c, nil
}

// libmcrypt is c served by libmcrypt.
func (c Choice) libmcrypt(method int, algorithm string, password []byte, why string) (Choice, error) {
	e, err := newLibmcrypt(method, algorithm, password)
	if err != nil {
		return c, err
	}
	c.Engine, c.Why = e, why
	return c, nil
}
