package dialect_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/sink"
)

// corpus is plugin output as printed: Windows paths, `\n` inside paths,
// multi-line output, backslashes before quotes and pipes, perfdata with
// quoted labels, and the edges of each core's reader.
var corpus = []string{
	"",
	"OK",
	`C:\ - 42%`,
	`C:\new\temp`,
	`D:\data\nightly\n.log is 3 GB`,
	"line1\nline2\nline3",
	"CRIT C:\\ - 99% used\nline2 with \\\\ two backslashes|'C:\\ used'=99%;80;90",
	`say \"hi\" and \'bye\'`,
	`a \| b|perf=1`,
	`pipe\|`,
	`OK|'C:\ used'=42%;80;90 'D:\ free'=10GB;;;0;100`,
	"OK - disk\n'C:\\ used'=42%|'C:\\ used'=42%\n'E:\\new'=1",
	`C:\`,
	`ends in two \\`,
	"backslash before newline \\\nnext",
	`\\n two backslashes then n`,
	`\n`,
	`\`,
	"\n",
	"\n\n",
	"semi;colons;in;output",
	"tab\tand carriage\rreturn",
	"ends in carriage return\r",
	"ends in backslash and carriage return \\\r",
	"UTF-8: Größe 42 % – ✓",
	`\x41 \t \0 not escapes`,
}

// Readers: each core's handling of the output field, modelled from the
// cores' sources (see the package documentation).

// nagiosRead undoes `\\` and `\n` from left to right (Nagios 4.1+,
// command pipe and spool files).
func nagiosRead(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == 'n') {
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte('\\')
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newlineRead turns every `\n` into a newline, left to right, and nothing
// else (Icinga 2's service results and spool files, Naemon's spool files).
func newlineRead(s string) string { return strings.ReplaceAll(s, `\n`, "\n") }

// lineJoin is the spool readers' line continuation (Nagios 4 and Naemon)
// applied to the single line "output=" + v + "\n" followed by the record's
// empty line: a line ending in `\\` loses one backslash; a line ending in
// one `\` loses it and is joined with the next line, stripped of leading
// blanks. A carriage return before the newline is looked behind. It
// returns the value up to its first newline.
func lineJoin(v string) string {
	lines := []string{v + "\n", "\n"}
	buf := ""
	for k := 0; k < len(lines); k++ {
		l := lines[k]
		if buf != "" {
			l = strings.TrimLeft(l, " \t")
		}
		buf += l
		end := len(buf) - 2 // before "\n"
		if len(buf) >= 2 && buf[len(buf)-2] == '\r' {
			end = len(buf) - 3
		}
		if end >= 1 && buf[end-1] == '\\' && buf[end] == '\\' {
			buf = buf[:end] + "\n"
			break
		}
		if end > 0 && buf[end] == '\\' {
			buf = buf[:end]
			continue
		}
		break
	}
	if i := strings.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i]
	}
	return buf
}

type path struct {
	name  string
	write func(string) ([]byte, bool)
	read  func(string) string
	// norm, when set, is the core's own processing that applies to every
	// source alike; stored and printed text are compared after it.
	norm func(string) string
}

func paths() []path {
	cmd := func(d dialect.Dialect, host bool) func(string) ([]byte, bool) {
		return func(s string) ([]byte, bool) { return d.AppendCommand(nil, s, host) }
	}
	spool := func(d dialect.Dialect) func(string) ([]byte, bool) {
		return func(s string) ([]byte, bool) { return d.AppendSpool(nil, s) }
	}
	identity := func(s string) string { return s }
	// Naemon's pipe keeps the last argument as it is but rejects an empty
	// one; it strips blanks around the first line of every result.
	naemonPipe := func(s string) string {
		if s == "" {
			return "\x00rejected"
		}
		return s
	}
	naemonStrip := func(s string) string { return strings.Trim(s, " \t\r\n") }
	return []path{
		{"nagios/command/service", cmd(dialect.Nagios, false), nagiosRead, nil},
		{"nagios/command/host", cmd(dialect.Nagios, true), nagiosRead, nil},
		{"nagios/spool", spool(dialect.Nagios), func(s string) string { return nagiosRead(lineJoin(s)) }, nil},
		{"icinga2/command/service", cmd(dialect.Icinga2, false), newlineRead, nil},
		{"icinga2/command/host", cmd(dialect.Icinga2, true), identity, nil},
		{"icinga2/spool", spool(dialect.Icinga2), newlineRead, nil},
		{"naemon/command/service", cmd(dialect.Naemon, false), naemonPipe, naemonStrip},
		{"naemon/command/host", cmd(dialect.Naemon, true), naemonPipe, naemonStrip},
		{"naemon/spool", spool(dialect.Naemon), func(s string) string { return newlineRead(lineJoin(s)) }, nil},
	}
}

// checkPath asserts, for one output, that the written form is one line
// and that the core stores exactly the output unless lossy is reported.
func checkPath(t *testing.T, p path, s string) {
	t.Helper()
	w, lossy := p.write(s)
	if bytes.IndexByte(w, '\n') >= 0 {
		t.Errorf("%s: %q written as %q, which holds a newline", p.name, s, w)
	}
	got := p.read(string(w))
	if p.norm != nil {
		got, s = p.norm(got), p.norm(s)
	}
	if !lossy && got != s {
		t.Errorf("%s: %q written as %q is stored as %q, but not reported lossy", p.name, s, w, got)
	}
	if lossy && got == s {
		t.Errorf("%s: %q written as %q is stored exactly, but reported lossy", p.name, s, w)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, p := range paths() {
		for _, s := range corpus {
			checkPath(t, p, s)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range corpus {
		f.Add(s)
	}
	ps := paths()
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // a packet's output field ends at its first NUL
		}
		for _, p := range ps {
			checkPath(t, p, s)
		}
	})
}

// TestForms pins the written bytes, lossy flags and stored text of the
// cases the package documentation names.
func TestForms(t *testing.T) {
	type form struct {
		write string
		lossy bool
	}
	cases := []struct {
		in                                     string
		nagios, i2svc, i2host, i2spool, naeCmd form
		naeSpool                               form
	}{
		{in: `C:\ - 42%`,
			nagios: form{`C:\\ - 42%`, false}, i2svc: form{`C:\ - 42%`, false}, i2host: form{`C:\ - 42%`, false},
			i2spool: form{`C:\ - 42%`, false}, naeCmd: form{`C:\ - 42%`, false}, naeSpool: form{`C:\ - 42%`, false}},
		{in: `C:\new\temp`,
			nagios: form{`C:\\new\\temp`, false}, i2svc: form{`C:/new\temp`, true}, i2host: form{`C:\new\temp`, false},
			i2spool: form{`C:/new\temp`, true}, naeCmd: form{`C:\new\temp`, false}, naeSpool: form{`C:/new\temp`, true}},
		{in: "a\nb",
			nagios: form{`a\nb`, false}, i2svc: form{`a\nb`, false}, i2host: form{`a\nb`, true},
			i2spool: form{`a\nb`, false}, naeCmd: form{`a\nb`, true}, naeSpool: form{`a\nb`, false}},
		{in: "x\\\ny",
			nagios: form{`x\\\ny`, false}, i2svc: form{`x\\ny`, false}, i2host: form{`x\\ny`, true},
			i2spool: form{`x\\ny`, false}, naeCmd: form{`x\\ny`, true}, naeSpool: form{`x\\ny`, false}},
		{in: `two \\ back`,
			nagios: form{`two \\\\ back`, false}, i2svc: form{`two \\ back`, false}, i2host: form{`two \\ back`, false},
			i2spool: form{`two \\ back`, false}, naeCmd: form{`two \\ back`, false}, naeSpool: form{`two \\ back`, false}},
		{in: `say \"hi\" \| x`,
			nagios: form{`say \\"hi\\" \\| x`, false}, i2svc: form{`say \"hi\" \| x`, false}, i2host: form{`say \"hi\" \| x`, false},
			i2spool: form{`say \"hi\" \| x`, false}, naeCmd: form{`say \"hi\" \| x`, false}, naeSpool: form{`say \"hi\" \| x`, false}},
		{in: `C:\`,
			nagios: form{`C:\\`, false}, i2svc: form{`C:\`, false}, i2host: form{`C:\`, false},
			i2spool: form{`C:\`, false}, naeCmd: form{`C:\`, false}, naeSpool: form{`C:\\`, false}},
		{in: "",
			nagios: form{"", false}, i2svc: form{"", false}, i2host: form{"", false},
			i2spool: form{"", false}, naeCmd: form{" ", false}, naeSpool: form{"", false}},
		{in: "end \\\r",
			nagios: form{"end \\\\\r", false}, i2svc: form{"end \\\r", false}, i2host: form{"end \\\r", false},
			i2spool: form{"end \\\r", false}, naeCmd: form{"end \\\r", false}, naeSpool: form{`end \\`, true}},
	}
	for _, c := range cases {
		check := func(name string, w []byte, lossy bool, want form) {
			t.Helper()
			if string(w) != want.write || lossy != want.lossy {
				t.Errorf("%s(%q) = %q, lossy %v; want %q, lossy %v", name, c.in, w, lossy, want.write, want.lossy)
			}
		}
		w, l := dialect.Nagios.AppendCommand(nil, c.in, false)
		check("nagios command", w, l, c.nagios)
		w, l = dialect.Nagios.AppendSpool(nil, c.in)
		// Nagios's spool reader loses a carriage return after a final
		// backslash; the bytes stay stock's.
		check("nagios spool", w, l, form{c.nagios.write, strings.HasSuffix(c.in, "\\\r")})
		w, l = dialect.Icinga2.AppendCommand(nil, c.in, false)
		check("icinga2 service command", w, l, c.i2svc)
		w, l = dialect.Icinga2.AppendCommand(nil, c.in, true)
		check("icinga2 host command", w, l, c.i2host)
		w, l = dialect.Icinga2.AppendSpool(nil, c.in)
		check("icinga2 spool", w, l, c.i2spool)
		for _, host := range []bool{false, true} {
			w, l = dialect.Naemon.AppendCommand(nil, c.in, host)
			check("naemon command", w, l, c.naeCmd)
		}
		w, l = dialect.Naemon.AppendSpool(nil, c.in)
		check("naemon spool", w, l, c.naeSpool)
	}
}

// TestNaemonReference checks the behaviour clients-and-cores.md names for
// Naemon: the command pipe passes output through unchanged (so `\n` stays
// two characters and backslashes stay single), and spool files get `\n`
// turned into newlines with `\\` left alone.
func TestNaemonReference(t *testing.T) {
	in := "C:\\ - 42% used\nline2 with \\\\ two backslashes|'C:\\ used'=42%"
	w, lossy := dialect.Naemon.AppendCommand(nil, in, false)
	if want := `C:\ - 42% used\nline2 with \\ two backslashes|'C:\ used'=42%`; string(w) != want || !lossy {
		t.Errorf("naemon command: %q, lossy %v; want %q, lossy", w, lossy, want)
	}
	w, lossy = dialect.Naemon.AppendSpool(nil, in)
	if want := `C:\ - 42% used\nline2 with \\ two backslashes|'C:\ used'=42%`; string(w) != want || lossy {
		t.Errorf("naemon spool: %q, lossy %v; want %q, not lossy", w, lossy, want)
	}
	if got := newlineRead(lineJoin(string(w))); got != in {
		t.Errorf("naemon spool stores %q, want %q", got, in)
	}
	// A literal `\n` in the output survives the pipe, not the spool reader.
	w, lossy = dialect.Naemon.AppendCommand(nil, `C:\new`, false)
	if string(w) != `C:\new` || lossy {
		t.Errorf("naemon command: %q, lossy %v", w, lossy)
	}
}

// TestNagiosIsStock proves the nagios dialect writes exactly what the sink
// writes today, in the command file and in spool files.
func TestNagiosIsStock(t *testing.T) {
	for _, s := range corpus {
		for _, svc := range []string{"svc", ""} {
			it := sink.Item{Result: codec.Result{Host: "h", Service: svc, ReturnCode: 2, Output: s}, Time: 1700000000}
			prefix := "[1700000000] PROCESS_SERVICE_CHECK_RESULT;h;svc;2;"
			if svc == "" {
				prefix = "[1700000000] PROCESS_HOST_CHECK_RESULT;h;2;"
			}
			out, lossy := dialect.Nagios.AppendCommand([]byte(prefix), s, svc == "")
			want := sink.AppendCommand(nil, it)
			if got := append(out, '\n'); !bytes.Equal(got, want) || lossy {
				t.Errorf("command %q: got %q (lossy %v), sink writes %q", s, got, lossy, want)
			}
			spool := sink.AppendSpool(nil, it)
			i := bytes.LastIndex(spool, []byte("\noutput="))
			if i < 0 || !bytes.HasSuffix(spool, []byte("\n\n")) {
				t.Fatalf("spool file without an output line: %q", spool)
			}
			head, field := spool[:i+len("\noutput=")], spool[i+len("\noutput="):len(spool)-2]
			out, lossy = dialect.Nagios.AppendSpool(append([]byte(nil), head...), s)
			if !bytes.Equal(out[len(head):], field) || lossy != strings.HasSuffix(s, "\\\r") {
				t.Errorf("spool %q: got %q (lossy %v), sink writes %q", s, out[len(head):], lossy, field)
			}
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	for _, d := range []dialect.Dialect{dialect.Nagios, dialect.Icinga2, dialect.Naemon} {
		b, _ := d.AppendCommand([]byte("pre:"), "x\ny", false)
		if !bytes.HasPrefix(b, []byte("pre:")) {
			t.Errorf("%v: AppendCommand lost the prefix: %q", d, b)
		}
		b, _ = d.AppendSpool([]byte("pre:"), "x\ny")
		if !bytes.HasPrefix(b, []byte("pre:")) {
			t.Errorf("%v: AppendSpool lost the prefix: %q", d, b)
		}
	}
}

func TestParse(t *testing.T) {
	for _, n := range dialect.Names() {
		d, err := dialect.Parse(n)
		if err != nil || d.String() != n {
			t.Errorf("Parse(%q) = %v, %v", n, d, err)
		}
	}
	if d, _ := dialect.Parse("nagios"); d != dialect.Nagios {
		t.Errorf("nagios is %v", d)
	}
	for _, bad := range []string{"", "Nagios", "icinga", "naemon ", "nagios4"} {
		_, err := dialect.Parse(bad)
		if !errors.Is(err, dialect.ErrUnknown) {
			t.Errorf("Parse(%q): %v, want ErrUnknown", bad, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "dialect: ") || !strings.Contains(msg, "nagios, icinga2, naemon") {
			t.Errorf("Parse(%q): message %q should start with dialect: and list the names", bad, msg)
		}
	}
	if got := dialect.Names(); got[0] != "nagios" || len(got) != 3 {
		t.Errorf("Names() = %v", got)
	}
	if s := dialect.Dialect(9).String(); s != "dialect(9)" {
		t.Errorf("String of an unknown dialect: %q", s)
	}
}
