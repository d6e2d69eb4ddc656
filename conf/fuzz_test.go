package conf

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// fuzzFile is the file name the fuzzer passes, to check it reaches messages.
const fuzzFile = "fuzz.cfg"

// FuzzParse feeds arbitrary bytes to Parse. The seeds are the checked-in
// corpus under testdata/fuzz/FuzzParse plus the two shipped configurations.
// Beyond "never panics", it checks that every message names its source and
// that Parse and Validate agree on what a valid value is.
func FuzzParse(f *testing.F) {
	sample, err := os.ReadFile("nsca.cfg")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add(embedded)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(fuzzFile, data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "conf: ") || !strings.Contains(msg, fuzzFile) {
				t.Fatalf("error %q lacks the conf: prefix or the file name", msg)
			}
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnknownOption) && !errors.Is(err, ErrBadValue) {
				t.Fatalf("error %q wraps no parse sentinel", msg)
			}
			if c != nil {
				t.Fatalf("a Config came back with error %q", msg)
			}
			return
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		for name, line := range c.Lines {
			if byName[name] == nil || line < 1 || line > lines {
				t.Fatalf("Lines[%q] = %d in a %d-line file", name, line, lines)
			}
		}
		for _, w := range c.Warnings {
			if !strings.HasPrefix(w, "conf: "+fuzzFile+":") {
				t.Fatalf("warning %q lacks conf: file:line", w)
			}
		}
		dump := c.Dump()
		if len(dump) != len(options) {
			t.Fatalf("Dump has %d lines for %d options", len(dump), len(options))
		}
		for _, l := range dump {
			if v, ok := strings.CutPrefix(l, "password="); ok && v != "********" && v != "(empty)" {
				t.Fatalf("Dump shows the password: %q", l)
			}
		}
		// Every value passed its option's check while parsing, so Validate
		// can only object to combinations, or to a path the daemon could
		// not use on this machine (a command_file that is a directory, a
		// missing check_result_path), named with its line.
		if err := c.Validate(); err != nil {
			if !(errors.Is(err, ErrConflict) || errors.Is(err, ErrBadValue)) || !strings.HasPrefix(err.Error(), "conf: "+fuzzFile) {
				t.Fatalf("Validate after a clean parse: %v", err)
			}
		}
		if _, err := c.AllowedPrefixes(); err != nil {
			t.Fatalf("allowed_hosts parsed but AllowedPrefixes fails: %v", err)
		}
		if m := c.Method(); !m.Usable {
			t.Fatalf("decryption_method parsed to unusable %+v", m)
		}
	})
}
