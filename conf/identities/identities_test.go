package identities

import (
	"errors"
	"io/fs"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// mapFS is an Opener over files in memory; a name ending in / is a
// directory.
type mapFS map[string]string

func (m mapFS) ReadFile(path string) ([]byte, error) {
	if s, ok := m[path]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}

func (m mapFS) ReadDir(path string) ([]string, bool, error) {
	if _, ok := m[path+"/"]; !ok {
		return nil, false, nil
	}
	var names []string
	for k := range m {
		if dir, name := filepath.Split(k); dir == path+"/" && name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, true, nil
}

const sample = `# as nsca-ng.cfg has it, with keys of ours
command_file = "/var/lib/nagios4/rw/nagios.cmd"
authorize "web01" {
	password = "s3cret"
	hosts = "web01"
	services = { "disk.*", "load@web0[12]" }   // several
	networks = { "10.1.0.0/16", "192.0.2.7" }
	decryption_method = 14
}
/* the fallback
   for everyone else */
authorize "*" { password = 'fall\'back'; services = "ping@.*"; commands = "ENABLE_NOTIFICATIONS" }
include("more.cfg")
`

func loadSample(t *testing.T) *File {
	t.Helper()
	f, err := Parse("/etc/nsca/ids.cfg", []byte(sample), mapFS{"/etc/nsca/more.cfg": `authorize "db" { password = "x"; hosts += "db[0-9]+"; hosts += "db-backup" }`})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParse(t *testing.T) {
	f := loadSample(t)
	if len(f.Identities) != 3 {
		t.Fatalf("%d identities, want 3", len(f.Identities))
	}
	web := f.Lookup("web01")
	if web.Password != "s3cret" || web.Method != "14" || web.Where != "/etc/nsca/ids.cfg:3" {
		t.Errorf("web01: %+v", web)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("192.0.2.7/32")}; !equalPrefixes(web.Networks, want) {
		t.Errorf("web01 networks %v, want %v", web.Networks, want)
	}
	if fb := f.Lookup("nobody"); fb == nil || fb.Name != "*" || fb.Password != "fall'back" {
		t.Errorf("Lookup of an unknown name gives %+v, want the fallback", fb)
	}
	if db := f.Lookup("db"); db == nil || len(db.Hosts) != 2 || db.Where != "/etc/nsca/more.cfg:1" {
		t.Errorf("db from the include: %+v", db)
	}
	if len(f.Ignored) != 1 || f.Ignored[0] != "/etc/nsca/ids.cfg:2: command_file" {
		t.Errorf("ignored settings %q", f.Ignored)
	}
}

func equalPrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRights: hosts, services (service and service@host) and commands as
// nsca-ng matches them, anchored at both ends.
func TestRights(t *testing.T) {
	f := loadSample(t)
	web, fb, db := f.Lookup("web01"), f.Lookup("*"), f.Lookup("db")
	cases := []struct {
		id        *Identity
		host, svc string
		want      bool
	}{
		{web, "web01", "", true},       // hosts
		{web, "web011", "", false},     // anchored
		{web, "xweb01", "", false},     // anchored
		{web, "web01", "disk", true},   // services, any host
		{web, "other", "disk /", true}, // any host
		{web, "web02", "load", true},   // service@host
		{web, "web03", "load", false},  // host part
		{web, "web01", "loadx", false}, // anchored service
		{web, "web01", "ping", false},  // not its right
		{fb, "any", "ping", true},
		{fb, "any", "", false},
		{db, "db12", "", true},
		{db, "db-backup", "", true}, // += adds
		{db, "dbx", "", false},
	}
	for _, c := range cases {
		if got := c.id.AllowsResult(c.host, c.svc, 0, "output"); got != c.want {
			t.Errorf("%s: result for host %q service %q allowed %v, want %v", c.id.Name, c.host, c.svc, got, c.want)
		}
	}
	if !fb.AllowsCommand("ENABLE_NOTIFICATIONS") || fb.AllowsCommand("ENABLE_NOTIFICATIONS;x") || fb.AllowsCommand("DISABLE_NOTIFICATIONS") {
		t.Errorf("commands pattern not matched as the whole command")
	}
	if !web.AllowsResult("web01", "disk", 0, "") {
		t.Errorf("a result with empty output refused: rights are on names, and send_nsca may send no output")
	}
}

// TestAlternationAnchored: a pattern a|b is anchored as a whole (nsca-ng
// anchors only its ends), and a pattern cannot break out of its group.
func TestAlternationAnchored(t *testing.T) {
	f, err := Parse("f", []byte(`authorize "x" { password = "p"; hosts = "a|b" }`), mapFS{})
	if err != nil {
		t.Fatal(err)
	}
	id := f.Lookup("x")
	if !id.AllowsResult("a", "", 0, "o") || !id.AllowsResult("b", "", 0, "o") || id.AllowsResult("ab", "", 0, "o") {
		t.Errorf("a|b not matched as ^(a|b)$")
	}
	if _, err := Parse("f", []byte(`authorize "x" { password = "p"; hosts = "a)|(.*" }`), mapFS{}); !errors.Is(err, ErrBadValue) {
		t.Errorf("a pattern that breaks out of its group: %v, want ErrBadValue", err)
	}
}

func TestSpecificity(t *testing.T) {
	f := loadSample(t)
	web, fb := f.Lookup("web01"), f.Lookup("*")
	for _, c := range []struct {
		id   *Identity
		addr string
		want int
	}{{web, "10.1.2.3", 16}, {web, "192.0.2.7", 32}, {web, "::ffff:10.1.0.1", 16}, {web, "10.2.0.1", -1}, {fb, "10.2.0.1", 0}} {
		if got := c.id.Specificity(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("%s from %s: specificity %d, want %d", c.id.Name, c.addr, got, c.want)
		}
	}
}

func TestIncludeDirectory(t *testing.T) {
	files := mapFS{
		"/d/":            "",
		"/d/b.cfg":       `authorize "b" { password = "b" }`,
		"/d/a.conf":      `authorize "a" { password = "a" }`,
		"/d/.hidden.cfg": `authorize "h" { password = "h" }`,
		"/d/notes.txt":   `not parsed`,
	}
	f, err := Parse("/main.cfg", []byte(`include("/d")`), files)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, id := range f.Identities {
		names = append(names, id.Name)
	}
	if strings.Join(names, ",") != "a,b" {
		t.Errorf("identities %v, want a,b in name order", names)
	}
}

// TestErrors: each mistake is refused with its file and line and the
// sentinel for its kind.
func TestErrors(t *testing.T) {
	for _, c := range []struct {
		text string
		want error
		msg  string
	}{
		{`authorize "a" { password = "x" }` + "\n" + `authorize "a" { password = "y" }`, ErrBadValue, `f:2: authorize "a" again (first at f:1)`},
		{`authorize "a" { hosts = "x" }`, ErrBadValue, `f:1: authorize "a" has no password`},
		{"authorize \"a\" {\n password = \"x\"\n colour = \"red\" }", ErrBadValue, "f:3: authorize \"a\": unknown key colour"},
		{`authorize "a" { password = "x"; hosts = "[" }`, ErrBadValue, `hosts pattern "["`},
		{`authorize "a" { password = "x"; hosts = "\\d+" }`, ErrBadValue, `hosts pattern`},
		{`authorize "a" { password = "x"; networks = "10.0.0.0/33" }`, ErrBadValue, `networks: "10.0.0.0/33"`},
		{`authorize "a" { password = { "x", "y" } }`, ErrBadValue, "password takes one value"},
		{`authorize "a" { password = "x"`, ErrSyntax, "expected a key"},
		{`authorize "a" { password = "x }`, ErrSyntax, "a string is never closed"},
		{"/* open", ErrSyntax, "never closed"},
		{`authorize { }`, ErrSyntax, "authorize needs an identity name"},
		{`include("missing.cfg")`, ErrInclude, "missing.cfg"},
		{`include("f")`, ErrInclude, "nested more than"},
		{`password "x"`, ErrSyntax, "expected = after the key"},
	} {
		_, err := Parse("f", []byte(c.text), mapFS{"f": `include("f")`})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: error %v, want %v containing %q", c.text, err, c.want, c.msg)
		}
	}
}

// TestResultCommand: the command a result is matched as.
func TestResultCommand(t *testing.T) {
	if got := ResultCommand("h", "s", 2, "out"); got != "PROCESS_SERVICE_CHECK_RESULT;h;s;2;out" {
		t.Errorf("service result: %q", got)
	}
	if got := ResultCommand("h", "", -1, "o"); got != "PROCESS_HOST_CHECK_RESULT;h;-1;o" {
		t.Errorf("host result: %q", got)
	}
}

// FuzzParse: no input makes the parser panic or loop, and what it accepts
// has named identities with compiled rights.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add(`authorize "*" { password = "x"; services = { ".*" } }`)
	f.Add(`include("x") authorize a { password = 'p\'q'; networks += "::1" }`)
	f.Fuzz(func(t *testing.T, text string) {
		file, err := Parse("f", []byte(text), mapFS{"x": `authorize "x" { password = "x" }`, "f": text})
		if err != nil {
			return
		}
		for _, id := range file.Identities {
			if id.Name == "" || (!id.HasPassword && id.Name != Fallback) {
				t.Fatalf("accepted %+v", id)
			}
			id.AllowsResult("h", "s", 0, "o")
		}
	})
}

// TestCraftedNames: names made to cross a field, a case, a space or an @
// never satisfy a pattern meant for one field. nsca-ng matched every
// pattern over the command text, where "core-router;2;x.dmz" satisfied
// hosts = ".*\.dmz" and the core read host core-router, state 2.
func TestCraftedNames(t *testing.T) {
	f, err := Parse("f", []byte(`authorize "dmz" { password = "p"; hosts = ".*\.dmz"; services = { "disk.*@.*\.dmz", "web" } }
authorize "ng" { password = "p"; hosts = "[^;]+\.dmz" }
authorize "cmd" { password = "p"; commands = "PROCESS_SERVICE_CHECK_RESULT;web01;.*" }`), mapFS{})
	if err != nil {
		t.Fatal(err)
	}
	dmz, ng, cmd := f.Lookup("dmz"), f.Lookup("ng"), f.Lookup("cmd")
	cases := []struct {
		id            *Identity
		host, service string
		want          bool
	}{
		{dmz, "a.dmz", "", true},
		{dmz, "core-router;2;x.dmz", "", false},          // ';' moves the fields
		{dmz, "core-router\x00x.dmz", "", false},         // NUL ends the name for the core
		{dmz, "core-router\nPROCESS_X;x.dmz", "", false}, // a newline starts a command
		{ng, "core-router\x00x.dmz", "", false},
		{dmz, "A.DMZ", "", false}, // patterns are case-sensitive, as nsca-ng's
		{dmz, "a.dmz ", "", false},
		{dmz, "a.dmz", "disk /", true},
		{dmz, "a.dmz", "disk;0;x", false},
		{dmz, "web01", "disk@a.dmz", false}, // an @ in the service is no host
		{dmz, "web01@x.dmz", "disk", true},  // an @ in a host is part of its name
		{dmz, "web01", "web", true},
		{dmz, "web01", "web ", false},
		{cmd, "web01", "disk", true},
		{cmd, "web02;web01", "disk", false},
		{cmd, "web01", "", false},
	}
	for _, c := range cases {
		if got := c.id.AllowsResult(c.host, c.service, 0, "out"); got != c.want {
			t.Errorf("%s: host %q service %q allowed %v, want %v", c.id.Name, c.host, c.service, got, c.want)
		}
	}
}
