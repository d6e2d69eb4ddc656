package dialect

import (
	"errors"
	"fmt"
	"strings"
)

// Dialect is the escaping one monitoring core undoes when it reads plugin
// output from the command file or a spool file (command_file_dialect).
type Dialect uint8

// The dialects, by the core that reads what we write.
const (
	// Nagios is stock nsca's escaping, undone by Nagios Core 4.1 and later.
	Nagios Dialect = iota
	// Icinga2 is what Icinga 2's command pipe (and its check_result_path
	// reader, up to 2.13) undoes.
	Icinga2
	// Naemon is what Naemon's command pipe and check_result_path reader undo.
	Naemon
)

// ErrUnknown is returned by Parse for a name that is not a dialect.
var ErrUnknown = errors.New("dialect: unknown command_file_dialect")

var names = [...]string{Nagios: "nagios", Icinga2: "icinga2", Naemon: "naemon"}

// Names returns the dialects' names in their configuration spelling, the
// default first. The slice is fresh.
func Names() []string {
	return append([]string(nil), names[:]...)
}

// Parse returns the dialect named s ("nagios", "icinga2" or "naemon",
// exactly as written). Any other value yields an error wrapping ErrUnknown
// that lists the valid names.
func Parse(s string) (Dialect, error) {
	for i, n := range names {
		if s == n {
			return Dialect(i), nil
		}
	}
	return Nagios, fmt.Errorf("%w %q (valid: %s)", ErrUnknown, s, strings.Join(names[:], ", "))
}

// String returns the dialect's configuration name.
func (d Dialect) String() string {
	if int(d) < len(names) {
		return names[d]
	}
	return fmt.Sprintf("dialect(%d)", uint8(d))
}

// AppendCommand appends output, escaped for the core's command pipe, to b:
// the last field of PROCESS_HOST_CHECK_RESULT (hostCheck) or
// PROCESS_SERVICE_CHECK_RESULT. lossy reports that the core cannot store
// this output exactly and a substitute form was written (see the package
// documentation). An unknown dialect escapes as Nagios.
func (d Dialect) AppendCommand(b []byte, output string, hostCheck bool) (out []byte, lossy bool) {
	switch d {
	case Icinga2:
		if hostCheck {
			return appendVerbatim(b, output)
		}
		return appendNewlines(b, output, false)
	case Naemon:
		if output == "" {
			// Naemon rejects a command whose last argument is empty; it
			// strips the space from the stored output again.
			return append(b, ' '), false
		}
		return appendVerbatim(b, output)
	default:
		return appendStock(b, output), false
	}
}

// AppendSpool appends output, escaped for the core's check_result_path
// reader, to b: the value of the output= line of a spool file. lossy is as
// for AppendCommand. An unknown dialect escapes as Nagios.
func (d Dialect) AppendSpool(b []byte, output string) (out []byte, lossy bool) {
	switch d {
	case Icinga2:
		return appendNewlines(b, output, false)
	case Naemon:
		return appendNewlines(b, output, true)
	default:
		// Nagios's line reader drops a carriage return after a final
		// backslash; stock's bytes are kept, the loss is reported.
		return appendStock(b, output), strings.HasSuffix(output, "\\\r")
	}
}

// appendStock is stock nsca's escaping: `\` to `\\`, newline to `\n`.
func appendStock(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}

// Unescape undoes stock's escaping (`\\` and `\n`) as the core does when
// it reads the command file; any other backslash stays. It reads what the
// stock dialect wrote (a dump file being replayed) and what nsca-ng clients
// send, which is escaped the same way.
func Unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// appendVerbatim writes s for a reader that undoes nothing: a newline,
// which would end the line, becomes the two characters `\n` (lossy).
func appendVerbatim(b []byte, s string) ([]byte, bool) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return append(b, s...), false
	}
	for ; i >= 0; i = strings.IndexByte(s, '\n') {
		b = append(b, s[:i]...)
		b = append(b, '\\', 'n')
		s = s[i+1:]
	}
	return append(b, s...), true
}

// appendNewlines writes s for a reader that turns `\n` into a newline and
// leaves everything else alone: newline becomes `\n`, a backslash before
// `n` becomes `/` (lossy). lineJoin is for a reader that joins a line
// ending in `\` with the next and turns a final `\\` into `\` (Naemon's
// spool reader): a final backslash is doubled, and a carriage return after
// a final backslash, which that reader always loses, is dropped (lossy).
func appendNewlines(b []byte, s string, lineJoin bool) ([]byte, bool) {
	lossy := false
	if lineJoin && strings.HasSuffix(s, "\\\r") {
		s = s[:len(s)-1]
		lossy = true
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			b = append(b, '\\', 'n')
		case '\\':
			if i+1 < len(s) && s[i+1] == 'n' {
				b = append(b, '/')
				lossy = true
			} else {
				b = append(b, '\\')
			}
		default:
			b = append(b, c)
		}
	}
	if lineJoin && strings.HasSuffix(s, "\\") {
		b = append(b, '\\')
	}
	return b, lossy
}
