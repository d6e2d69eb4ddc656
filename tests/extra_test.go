package tests

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSinkFIFOReaderRestarts: the core closes the FIFO and a new core
// opens it (a restart); the next results reach the new reader, whether the
// daemon holds the FIFO open (aggregate_writes=1, its write gets EPIPE) or
// opens it per result.
func TestSinkFIFOReaderRestarts(t *testing.T) {
	eachAggregateWrites(t, func(t *testing.T, fifo string, first *FIFOReader, d *Daemon, cl Client) {
		lo := now()
		cl.send(t, d.Port, "core1\tsvc\t0\tto the first core\x17", 1)
		got := first.Collect(t, 1)
		first.Close()
		second := openFIFOReader(t, fifo)
		cl.send(t, d.Port, "core2\tsvc\t1\tto the second core\x17core2\t2\tand a host check\x17", 2)
		got = append(got, second.Collect(t, 2)...)
		hi := now()
		d.Stop()
		time.Sleep(50 * time.Millisecond)
		got = append(got, second.Pending()...)
		assertLines(t, stripTimes(t, got, lo, hi), []string{
			serviceLine("core1", "svc", 0, "to the first core"),
			serviceLine("core2", "svc", 1, "to the second core"),
			hostLine("core2", 2, "and a host check"),
		})
	})
}

// TestRelativePathsFromStartDir: relative command_file and pid_file are
// resolved against the daemon's working directory.
func TestRelativePathsFromStartDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "var", "nsca.cmd"), "", 0o644)
	d := startDaemonWith(t, Config{
		"command_file":      "var/nsca.cmd",
		"pid_file":          "var/nsca.pid",
		"append_to_file":    "1",
		"password":          shortPassword,
		"decryption_method": "1",
	}, daemonOpts{dir: dir})
	if _, err := os.Stat(filepath.Join(dir, "var", "nsca.pid")); err != nil {
		t.Errorf("relative pid_file not written in the start directory: %v", err)
	}
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "rel\tsvc\t0\trelative paths\x17", 1)
	deliverAll(t, d, filepath.Join(dir, "var", "nsca.cmd"), lo, []string{serviceLine("rel", "svc", 0, "relative paths")})
}

// TestInetd: with --inetd the daemon serves the one connection on its
// standard input and exits 0 when the client is done.
func TestInetd(t *testing.T) {
	dir := t.TempDir()
	cmdFile := commandFile(t, dir)
	cfgPath := filepath.Join(dir, "nsca.cfg")
	cfg := Config{"command_file": cmdFile, "append_to_file": "1", "password": shortPassword, "decryption_method": "14"}
	writeFile(t, cfgPath, cfg.text(), 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	// Play inetd: accept one connection and start the daemon on it.
	type started struct {
		p   *proc
		err error
	}
	var stderr lockedBuffer
	ch := make(chan started, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- started{err: err}
			return
		}
		defer c.Close()
		f, err := c.(*net.TCPConn).File()
		if err != nil {
			ch <- started{err: err}
			return
		}
		defer f.Close()
		cmd := nscaCmd(dir, nil, "-c", cfgPath, "--inetd", "-f")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, &stderr
		p, err := startProc("nsca --inetd", cmd)
		ch <- started{p, err}
	}()
	lo := now()
	out, sendErr := Client{Password: shortPassword, Method: 14}.run(t, port, "inetd\tsvc\t2\tvia inetd\nline 2\x17inetd\t0\thost via inetd\x17")
	var s started
	select {
	case s = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("send_nsca never connected")
	}
	if s.err != nil {
		t.Fatalf("starting the daemon under inetd: %v", s.err)
	}
	if !s.p.exitWithin(stopTimeout) {
		t.Fatalf("the inetd daemon did not exit after its connection ended\nstderr:\n%s", stderr.String())
	}
	if sendErr != nil || !strings.Contains(out, "2 data packet(s) sent") {
		t.Errorf("send_nsca: %v: %s", sendErr, out)
	}
	if !s.p.state.Success() {
		t.Errorf("the inetd daemon exited with %v, want 0\nstderr:\n%s", s.p.state, stderr.String())
	}
	hi := now()
	assertLines(t, commandsIn(t, cmdFile, lo, hi), []string{
		serviceLine("inetd", "svc", 2, "via inetd\nline 2"),
		hostLine("inetd", 0, "host via inetd"),
	})
}
