package sink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDumpFollowsRotation: the dump file's next write after its path was
// renamed away (or removed) goes to a new file at the path, and Reopen
// makes it open the path anew though the path still names the same file.
func TestDumpFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nsca.dump")
	d := NewDump(path)
	d.Reopens = &Reopener{}
	defer d.Close()
	write := func(out string) {
		t.Helper()
		if n, err := d.Write([]Item{item(1, "h", "s", 0, out)}); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	lines := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var outs []string
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			outs = append(outs, l[strings.LastIndex(l, ";")+1:])
		}
		return strings.Join(outs, " ")
	}
	write("a")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write("b")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write("c")
	if got := lines(path + ".1"); got != "a" {
		t.Errorf("the rotated file has %q, want a", got)
	}
	if got := lines(path); got != "c" {
		t.Errorf("the file at the path has %q, want c (b went to the removed file)", got)
	}

	if d.held.stale(path, d.Reopens) {
		t.Fatal("the open file is stale with nothing changed")
	}
	d.Reopens.Reopen()
	if !d.held.stale(path, d.Reopens) {
		t.Error("the open file is not stale after Reopen")
	}
	fd := d.fd
	write("d")
	if d.held.stale(path, d.Reopens) || d.fd < 0 {
		t.Errorf("after the write that followed Reopen: stale %v, fd %d (was %d)", d.held.stale(path, d.Reopens), d.fd, fd)
	}
	if got := lines(path); got != "c d" {
		t.Errorf("the file at the path has %q, want c d", got)
	}
}

// TestCommandFileKeptOpenFollowsRotation: a regular command file kept open
// (aggregate_writes) is opened anew once its path names another file; one
// that is gone is not created (stock never creates the command file): the
// write fails for the fallback.
func TestCommandFileKeptOpenFollowsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nagios.cmd")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewCommandFile(path, true, true)
	defer c.Close()
	if n, err := c.Write([]Item{item(1, "h", "s", 0, "a")}); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Write([]Item{item(1, "h", "s", 0, "b")}); n != 0 || err == nil {
		t.Errorf("Write with the command file renamed away = %d, %v; want 0 and an error", n, err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.retry.Succeeded() // no back-off wait for the test
	if n, err := c.Write([]Item{item(1, "h", "s", 0, "c")}); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	for p, want := range map[string]string{path + ".1": ";a\n", path: ";c\n"} {
		if b, _ := os.ReadFile(p); !strings.HasSuffix(string(b), want) || strings.Count(string(b), "\n") != 1 {
			t.Errorf("%s holds %q, want one line ending %q", p, b, want)
		}
	}
}

// TestDumpCutsTornTail: a dump file that ends in a partial line (a write a
// crash cut short) has it cut off at the first write after opening, so the
// next line is not glued to it; a file that ends whole is left as it is.
func TestDumpCutsTornTail(t *testing.T) {
	const whole = "[1762153445] PROCESS_SERVICE_CHECK_RESULT;h;s;0;whole\n"
	for _, c := range []struct{ name, before, kept string }{
		{"torn", whole + "[1762153446] PROCESS_SERVICE_CHECK_RESULT;h;s;0;cut sh", whole},
		{"only a torn line", "[1762153446] PROCESS_SERV", ""},
		{"whole", whole, whole},
		{"empty", "", ""},
		// No newline within tornLook: ended, not cut.
		{"long torn line", whole + strings.Repeat("x", tornLook+1), whole + strings.Repeat("x", tornLook+1) + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nsca.dump")
			if err := os.WriteFile(path, []byte(c.before), 0o600); err != nil {
				t.Fatal(err)
			}
			d := NewDump(path)
			defer d.Close()
			for _, out := range []string{"next", "after"} {
				if n, err := d.Write([]Item{item(1762153447, "h", "s", 0, out)}); n != 1 || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			b, _ := os.ReadFile(path)
			want := c.kept + "[1762153447] PROCESS_SERVICE_CHECK_RESULT;h;s;0;next\n[1762153447] PROCESS_SERVICE_CHECK_RESULT;h;s;0;after\n"
			if string(b) != want {
				t.Errorf("the file holds\n%q\nwant\n%q", b, want)
			}
		})
	}
}
