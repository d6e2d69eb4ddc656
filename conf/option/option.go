// Package option is the shape of an nsca.cfg option: a row naming it,
// with its default, origin, documentation and kind, the kind saying how
// the option's text fills a field of the struct T that holds it and how
// the field is written back. Package conf's table is made of these rows,
// and so are the remote engines' options, declared beside the engines'
// code and nested into conf's Config with Nest. An engine's check of its
// options as a whole reports an Error naming the option to fix, which conf
// turns into that option's file and line.
package option

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Values of Row.Origin: who introduced an option, so documentation can
// tell an operator which options their old file may hold.
const (
	OriginStock    = "stock"
	OriginNscaFast = "nsca_fast"
	OriginNew      = "new"
)

// Row is one option of nsca.cfg, held in a field of a T.
type Row[T any] struct {
	Name    string
	Default string // in nsca.cfg syntax
	Origin  string
	Doc     string
	Secret  bool // the value never appears in Dump or in messages
	Kind    Kind[T]
}

// Describe turns a value's problem into a message naming the option, and
// the value unless it is secret.
func (r *Row[T]) Describe(value string, problem error) string {
	if r.Secret {
		return r.Name + " " + problem.Error()
	}
	return r.Name + "=" + Show(value) + " " + problem.Error()
}

// Kind is how an option's text becomes a field of a T and back. Messages
// returned by Set and Check are reasons that read after "name=value ".
type Kind[T any] interface {
	Set(t *T, text string) error // parse, validate and store a value
	Check(t *T) error            // validate the value stored in t
	Text(t *T) string            // the stored value in nsca.cfg syntax
	Numeric() bool               // surrounding blanks are not part of the value
}

// Field implements Kind for a field of type V of a T.
type Field[T, V any] struct {
	Ptr    func(*T) *V
	Parse  func(string) (V, error)
	Valid  func(V) error // nil: every parsed value is valid
	Format func(V) string
	Number bool // trim blanks (and a CRLF's '\r') before parsing
}

// Set parses s, validates and stores it.
func (f Field[T, V]) Set(t *T, s string) error {
	if f.Number {
		// Stock's atoi skips leading blanks and stops at trailing junk; we
		// allow only blanks around the number, so "12abc" is an error.
		s = strings.Trim(strings.TrimSuffix(s, "\r"), " \t")
	}
	v, err := f.Parse(s)
	if err != nil {
		return err
	}
	if err := f.validate(v); err != nil {
		return err
	}
	*f.Ptr(t) = v
	return nil
}

// Check validates the value stored in t.
func (f Field[T, V]) Check(t *T) error { return f.validate(*f.Ptr(t)) }

// Text is the value stored in t, in nsca.cfg syntax.
func (f Field[T, V]) Text(t *T) string { return f.Format(*f.Ptr(t)) }

// Numeric says whether blanks around the value are trimmed.
func (f Field[T, V]) Numeric() bool { return f.Number }

func (f Field[T, V]) validate(v V) error {
	if f.Valid == nil {
		return nil
	}
	return f.Valid(v)
}

// Range checks a number in lo..hi; unit (with its leading space) is
// appended to the upper bound in messages, where stock names it too.
func Range(lo, hi int, unit string) func(int) error {
	return func(v int) error {
		switch {
		case v < lo && lo == 0:
			return errors.New("cannot be negative")
		case v < lo:
			return fmt.Errorf("must be at least %d", lo)
		case v > hi:
			return fmt.Errorf("cannot be greater than %d%s", hi, unit)
		}
		return nil
	}
}

// Integer is a decimal option in lo..hi, unit as Range's.
func Integer[T any](ptr func(*T) *int, lo, hi int, unit string) Kind[T] {
	return Field[T, int]{Ptr: ptr, Parse: ParseInt, Valid: Range(lo, hi, unit), Format: strconv.Itoa, Number: true}
}

// Seconds is Integer for a duration option written in whole seconds.
func Seconds[T any](ptr func(*T) *time.Duration, lo, hi int) Kind[T] {
	valid := Range(lo, hi, " seconds")
	parse := func(s string) (time.Duration, error) {
		n, err := ParseInt(s)
		return time.Duration(n) * time.Second, err
	}
	return Field[T, time.Duration]{Ptr: ptr, Parse: parse, Number: true, Format: SecondsText,
		Valid: func(d time.Duration) error { return valid(int(d / time.Second)) }}
}

// SecondsText is d in whole seconds, as nsca.cfg writes it.
func SecondsText(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// Boolean is a stock-style flag: a decimal number, true when above zero.
func Boolean[T any](ptr func(*T) *bool) Kind[T] {
	parse := func(s string) (bool, error) {
		n, err := ParseInt(s)
		if err != nil {
			return false, fmt.Errorf("%v: write 1 for yes, 0 for no", err)
		}
		return n > 0, nil
	}
	return Field[T, bool]{Ptr: ptr, Parse: parse, Format: formatBool, Number: true}
}

// YesNo is a flag written as 1/0 or, as mod_gearman writes it, yes/no or
// on/off.
func YesNo[T any](ptr func(*T) *bool) Kind[T] {
	parse := func(s string) (bool, error) {
		switch strings.ToLower(s) {
		case "yes", "on", "true":
			return true, nil
		case "no", "off", "false":
			return false, nil
		}
		n, err := ParseInt(s)
		if err != nil {
			return false, fmt.Errorf("%v: write 1 (yes) or 0 (no)", err)
		}
		return n > 0, nil
	}
	return Field[T, bool]{Ptr: ptr, Parse: parse, Format: formatBool, Number: true}
}

func formatBool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Text is a string option taken verbatim; valid (optional) adds checks to
// the NUL check every string gets, since no path or secret can hold a NUL.
func Text[T any](ptr func(*T) *string, valid func(string) error) Kind[T] {
	all := func(s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return errors.New("contains a NUL byte")
		}
		if valid != nil {
			return valid(s)
		}
		return nil
	}
	verbatim := func(s string) (string, error) { return s, nil }
	format := func(s string) string { return s }
	return Field[T, string]{Ptr: ptr, Parse: verbatim, Valid: all, Format: format}
}

// Optional is check for an option whose empty value turns something off:
// "" passes, anything else must pass check.
func Optional(check func(string) error) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		return check(s)
	}
}

// Nest makes rows of a T, a part of a P found by get, rows of the P: the
// remote engines' options are a struct each inside conf's Config.
func Nest[P, T any](get func(*P) *T, rows []Row[T]) []Row[P] {
	out := make([]Row[P], len(rows))
	for i, r := range rows {
		out[i] = Row[P]{Name: r.Name, Default: r.Default, Origin: r.Origin, Doc: r.Doc, Secret: r.Secret,
			Kind: nested[P, T]{get: get, kind: r.Kind}}
	}
	return out
}

// nested is a Kind of a T seen as a Kind of the P that holds the T.
type nested[P, T any] struct {
	get  func(*P) *T
	kind Kind[T]
}

func (n nested[P, T]) Set(p *P, s string) error { return n.kind.Set(n.get(p), s) }
func (n nested[P, T]) Check(p *P) error         { return n.kind.Check(n.get(p)) }
func (n nested[P, T]) Text(p *P) string         { return n.kind.Text(n.get(p)) }
func (n nested[P, T]) Numeric() bool            { return n.kind.Numeric() }

// ParseInt reads a decimal number, with messages that read after
// "name=value ".
func ParseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, errors.New("is out of range for a number")
	case err != nil:
		return 0, errors.New("is not a decimal integer")
	}
	return n, nil
}

// Show returns s as it appears in messages and Dump: bare when that is
// unambiguous, Go-quoted when it is empty, has surrounding blanks, starts
// with a quote, or holds control characters or invalid UTF-8.
func Show(s string) string {
	if s == "" || strings.TrimSpace(s) != s || s[0] == '"' || !utf8.ValidString(s) ||
		strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// Error is a remote engine's settings that cannot work, naming the
// nsca.cfg option to fix, so that package conf reports it with that
// option's file and line. Conflict says the option is wrong only together
// with others (Reason is then the whole message, in nsca.cfg's terms);
// otherwise its value is bad, for Reason. Kind is the engine's sentinel.
type Error struct {
	Option   string
	Conflict bool
	Reason   string
	Kind     error
}

func (e *Error) Error() string {
	if e.Reason == "" {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Reason
}

// Unwrap makes the error its Kind for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }
