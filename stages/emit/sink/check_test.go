package sink

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/emit/dialect"
)

// An external command is written as the core reads it: its timestamp and
// its text verbatim, whatever the dialect does to outputs.
func TestAppendCommandOfACommand(t *testing.T) {
	it := Item{Time: 1762153445, Command: `ENABLE_SVC_NOTIFICATIONS;web01;disk \n|x`}
	for _, d := range []dialect.Dialect{dialect.Nagios, dialect.Icinga2, dialect.Naemon} {
		l := lineBuf{dialect: d}
		l.add(it)
		if got, want := string(l.b), "[1762153445] ENABLE_SVC_NOTIFICATIONS;web01;disk \\n|x\n"; got != want || len(l.lossy) != 0 {
			t.Errorf("%s: %q (lossy %v), want %q", d, got, l.lossy, want)
		}
	}
}

// The command file and the dump file take commands, in order with results.
func TestCommandsInCommandAndDumpFiles(t *testing.T) {
	dir := t.TempDir()
	cmdPath := filepath.Join(dir, "nagios.cmd")
	if err := os.WriteFile(cmdPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	its := items(3, 10)
	its = append(its[:1], append([]Item{{Time: 1762153999, Command: "DISABLE_NOTIFICATIONS"}}, its[1:]...)...)
	want := "[1762153999] DISABLE_NOTIFICATIONS\n"
	for _, s := range []Sink{NewCommandFile(cmdPath, true, false), NewDump(filepath.Join(dir, "dump"))} {
		if !TakesCommands(s) {
			t.Errorf("%s does not take commands", s.Name())
		}
		mustWrite(t, s, its)
		mustClose(t, s)
	}
	for _, p := range []string{cmdPath, filepath.Join(dir, "dump")} {
		got := string(mustRead(t, p))
		if got != string(commandLines(its)) || !strings.Contains(got, want) {
			t.Errorf("%s holds %q, want the command %q among the results", p, got, want)
		}
	}
	if TakesCommands(NewSpool(dir, 0)) {
		t.Error("the spool says it takes commands")
	}
}

// Check tells a full file system, and room again once space is freed, for
// the command file, the spool and the dump file; a command file's Check
// that succeeds ends its back-off.
func TestCheckFullDisk(t *testing.T) {
	dir := smallFS(t, "size=128k")
	cmdPath := filepath.Join(dir, "nagios.cmd")
	if err := os.WriteFile(cmdPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewCommandFile(cmdPath, true, false)
	defer c.Close()
	spool := NewSpool(dir, 0)
	dump := NewDump(filepath.Join(dir, "dump"))
	defer dump.Close()
	for _, s := range []Checker{c, spool, dump} {
		if err := s.Check(); err != nil {
			t.Fatalf("%T.Check on an empty file system: %v", s, err)
		}
	}
	if _, err := writeUntilFull(t, c, items(1000, 300), 64); err == nil {
		t.Fatal("no error on a full disk")
	}
	for _, s := range []Checker{c, spool, dump} {
		if err := s.Check(); !errors.Is(err, errNoSpace) {
			t.Errorf("%T.Check on a full file system = %v, want errNoSpace", s, err)
		}
	}
	if _, err := c.Write(items(1, 10)); !errors.Is(err, errBackoff) {
		t.Fatalf("a write right after the failure = %v, want the back-off", err)
	}
	if err := os.Truncate(cmdPath, 0); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Checker{c, spool, dump} {
		if err := s.Check(); err != nil {
			t.Errorf("%T.Check once space is freed: %v", s, err)
		}
	}
	if n, err := c.Write(items(1, 10)); n != 1 || err != nil {
		t.Errorf("a write after a successful Check = %d, %v: the back-off should have ended", n, err)
	}
}

// Check of a FIFO tells whether the core reads it.
func TestCheckFIFOReader(t *testing.T) {
	path := mkfifo(t)
	c := NewCommandFile(path, false, false)
	defer c.Close()
	if err := c.Check(); !errors.Is(err, errNoReader) {
		t.Fatalf("Check without a reader = %v, want errNoReader", err)
	}
	rfd := openReader(t, path)
	defer unix.Close(rfd)
	if err := c.Check(); err != nil {
		t.Fatalf("Check with a reader = %v", err)
	}
}
