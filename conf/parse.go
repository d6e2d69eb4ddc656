package conf

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"nsca_fast/conf/option"
)

// Load reads and parses the file at path. Besides Parse's warnings it warns
// when the file holds a password and every user may read it. It does not
// call Validate, so that command-line overrides can be applied first.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("conf: cannot read config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("conf: cannot read config file: %w", err)
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && c.Password != "" && fi.Mode().Perm()&0o004 != 0 {
		c.warnf(c.Lines["password"], "password: the file is readable by every user (mode %04o); "+
			"let only root and the daemon's group read it: %s", fi.Mode().Perm(), c.privateMode(path))
	}
	return c, nil
}

// Parse reads a configuration in nsca.cfg syntax from data; file names it in
// messages. It returns the first error, as stock does. Every file stock nsca
// 2.10 runs parses, with stock's meaning; where that meaning is probably not
// what the author meant (a number with junk after it, an inline comment, a
// blank at the end of a path, a second line for one option) Parse says so
// in a warning naming the line and the fix. Two things stock cannot run are
// read as their author meant, with a warning: CRLF line endings (stock keeps
// the carriage return in every value) and a UTF-8 byte order mark (stock
// refuses the first line). It does not call Validate, so that command-line
// overrides can be applied first.
func Parse(file string, data []byte) (*Config, error) {
	c := Default()
	c.File = file
	text, bom := strings.CutPrefix(string(data), "\ufeff")
	if bom {
		c.warnf(1, "the file starts with a UTF-8 byte order mark, which stock nsca takes as part of the "+
			"first line and refuses; nsca_fast ignores it: save the file without one")
	}
	crlf := false
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if l, cr := strings.CutSuffix(line, "\r"); cr {
			line = l
			if !crlf {
				crlf = true
				c.warnf(n, "the file has CRLF (Windows) line endings; nsca_fast ignores the carriage returns, "+
					"where stock nsca keeps one at the end of every value (a password or path then no longer "+
					"matches) and refuses a blank line: convert the file to LF line endings "+
					"(sed -i 's/\\r$//' %s)", file)
			}
		}
		// Only a '#' in the first column starts a comment, as in stock: a
		// '#' anywhere else may be part of a password.
		if line == "" || line[0] == '#' {
			continue
		}
		if err := c.parseLine(n, line); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// parseLine reads line n, which is neither blank nor a comment.
func (c *Config) parseLine(n int, line string) error {
	name, value, found := strings.Cut(line, "=")
	switch {
	case !found:
		return c.lineErr(n, ErrSyntax, `no "=" on this line (expected name=value)`)
	case name == "":
		return c.lineErr(n, ErrSyntax, `no option name before "="`)
	case value == "":
		// Stock says "No variable value specified"; an empty value is
		// never a way to ask for the default.
		return c.lineErr(n, ErrSyntax, show(name)+`: no value after "=" (comment the line out to keep the default)`)
	}
	o := byName[name]
	if o == nil {
		return c.lineErr(n, ErrUnknownOption, unknownReason(name))
	}
	if prev := c.Lines[name]; prev > 0 {
		c.warnf(n, "%s is set again: this line replaces line %d's value (the last one counts, as in stock "+
			"nsca); remove one of the two lines", name, prev)
	}
	if err := c.set(o, n, value); err != nil {
		return c.lineErr(n, ErrBadValue, o.Describe(value, err))
	}
	c.Lines[name] = n
	return nil
}

// set stores value for o, read on line n. A value of one of stock's options
// that does not parse is read as stock reads it, if that is a valid value,
// with a warning; see stockReading.
func (c *Config) set(o *row, n int, value string) error {
	err := o.Kind.Set(c, value)
	if err == nil {
		if !o.Kind.Numeric() {
			c.warnText(o, n, value)
		}
		return nil
	}
	if o.Origin != option.OriginStock {
		if inlineComment(value) >= 0 {
			return fmt.Errorf("%w (only a \"#\" at the start of a line begins a comment)", err)
		}
		return err
	}
	read, why := stockReading(o, value)
	if why == "" {
		return err
	}
	if rerr := o.Kind.Set(c, read); rerr != nil {
		if _, rest, _ := atoi(value); rest == value {
			return err // no digits were read: the value's own problem is the news
		}
		return fmt.Errorf("is read as %s, as stock nsca reads it, which %w", read, rerr)
	}
	c.warnf(n, "%s", why)
	return nil
}

// stockReading is what stock nsca 2.10 makes of value for its option o
// where nsca_fast's own parsing refuses it, and a warning saying so with the
// fix; why is "" when stock would refuse the value too. Stock reads its
// numbers with atoi (strtoul for max_packet_age): leading blanks, a sign,
// digits, and nothing after them counts; it logs an unknown log_facility
// and uses daemon.
func stockReading(o *row, value string) (read, why string) {
	switch {
	case strings.IndexByte(value, 0) >= 0:
		return value, "" // C strings end there: no value of ours means the same
	case o.Name == "log_facility":
		return "daemon", fmt.Sprintf("log_facility=%s is not a syslog facility; stock nsca logs that and "+
			"uses daemon, and so does nsca_fast: use one of %s", show(value), strings.Join(facilities, ", "))
	case !o.Kind.Numeric():
		return value, ""
	}
	number, rest, ok := atoi(value)
	if !ok || strings.Trim(rest, " \t") == "" || o.Name == "decryption_method" && (rest == value || strings.Contains(value, ",")) {
		// Past int's range atoi's result is undefined; a plain number that
		// is refused, stock reads alike. A word read as
		// decryption_method 0 would serve unencrypted clients only: a typo
		// in a method's name must not turn encryption off; and a list of
		// methods is this project's syntax, checked as such.
		return value, ""
	}
	if strings.HasPrefix(strings.TrimLeft(rest, " \t"), "#") {
		return number, fmt.Sprintf("%s=%s: only a \"#\" at the start of a line begins a comment; stock nsca "+
			"reads the number before it, %s, and so does nsca_fast: move the comment to a line of its own",
			o.Name, show(value), number)
	}
	fix := "write " + o.Name + "=" + number
	if isFlag(o) {
		fix += " (1 for yes, 0 for no)"
	}
	return number, fmt.Sprintf("%s=%s is not a number; stock nsca reads only its leading digits (0 when "+
		"there are none), %s, and so does nsca_fast: %s", o.Name, show(value), number, fix)
}

// isFlag says whether o is a yes/no option: stock's flags read every
// number above 0 as 1, so 7 reads back as 1.
func isFlag(o *row) bool {
	d := Default()
	return o.Kind.Set(d, "7") == nil && o.Kind.Text(d) == "1"
}

// atoi splits s as C's atoi reads it: the number (leading blanks skipped,
// an optional sign, the digits; "0" if there are no digits) and the rest,
// which is all of s without digits. ok is false past int's range.
func atoi(s string) (number, rest string, ok bool) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	j := i
	for j < len(t) && t[j] >= '0' && t[j] <= '9' {
		j++
	}
	if j == i {
		return "0", s, true
	}
	n, err := strconv.Atoi(t[:j])
	if err != nil {
		return "", s, false
	}
	return strconv.Itoa(n), t[j:], true
}

// inlineComment is where a comment seems to start in value: at a '#' after
// a blank, which stock takes as part of the value. -1 if there is none.
func inlineComment(value string) int {
	for i := 1; i < len(value); i++ {
		if value[i] == '#' && (value[i-1] == ' ' || value[i-1] == '\t') {
			return i
		}
	}
	return -1
}

// warnText warns about a text value that stock and nsca_fast take verbatim
// but whose author probably meant something else: an inline comment, or
// a blank at its end.
func (c *Config) warnText(o *row, n int, value string) {
	what, takes, keeps := o.Name+"="+show(value), "stock nsca takes", "stock nsca keeps"
	fix := "remove it unless it is meant"
	if o.Secret {
		// The value is not shown, and a client's password is read alike.
		what, takes, keeps = o.Name, "stock nsca and send_nsca take", "stock nsca and send_nsca keep"
		fix = "a client whose password lacks it is refused; " + fix
	}
	switch {
	case inlineComment(value) >= 0:
		c.warnf(n, "%s: only a \"#\" at the start of a line begins a comment; %s the text from the "+
			"blank before \"#\" on as part of the value, and so does nsca_fast: move the comment to a line "+
			"of its own", what, takes)
	case strings.HasSuffix(value, " ") || strings.HasSuffix(value, "\t"):
		c.warnf(n, "%s ends in a blank (space or tab), which %s as part of the value, and so does "+
			"nsca_fast: %s", what, keeps, fix)
	}
}

// lineErr formats a parse error in the one shape all of them share.
func (c *Config) lineErr(line int, sentinel error, reason string) error {
	return fmt.Errorf("conf: %s:%d: %s: %w", c.File, line, reason, sentinel)
}

// warnf records a warning about a line of the file.
func (c *Config) warnf(line int, format string, args ...any) {
	where := c.File
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	c.Warnings = append(c.Warnings, "conf: "+where+": "+fmt.Sprintf(format, args...))
}

// unknownReason explains an unknown name, pointing out the mistake that
// makes a known name unrecognisable: blanks around "=" (stock does not
// allow them either).
func unknownReason(name string) string {
	if t := strings.TrimSpace(name); t != name && byName[t] != nil {
		return fmt.Sprintf("option %s (blanks around \"=\" are not allowed; write %s=value)", show(name), t)
	}
	return "option " + show(name)
}
