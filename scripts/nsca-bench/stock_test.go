package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stockNsca is Debian's stock daemon (package nsca 2.10.2).
const stockNsca = "/usr/sbin/nsca"

const stockPassword = "bench-secret"

// stockDaemon is a running stock nsca.
type stockDaemon struct {
	addr    string
	cmdFile string
	cmd     *exec.Cmd
}

// startStock starts `nsca -c CFG -f` (stock's default single-process mode,
// which does not sleep between accepts) on a free loopback port, writing
// to commandFile, and kills it by its PID at cleanup.
func startStock(t *testing.T, method int, commandFile string) *stockDaemon {
	t.Helper()
	if _, err := os.Stat(stockNsca); err != nil {
		t.Skipf("stock nsca not installed: %v", err)
	}
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf("pid_file=%s\nserver_port=%d\nserver_address=127.0.0.1\ndebug=0\n"+
		"command_file=%s\nalternate_dump_file=%s\naggregate_writes=0\nappend_to_file=1\n"+
		"max_packet_age=30\npassword=%s\ndecryption_method=%d\n",
		filepath.Join(dir, "nsca.pid"), port, commandFile, filepath.Join(dir, "dump"), stockPassword, method)
	cfgPath := filepath.Join(dir, "nsca.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(stockNsca, "-c", cfgPath, "-f")
	cmd.Dir = dir
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &stockDaemon{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmdFile: commandFile, cmd: cmd}
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
		out.Close()
	})
	// Wait for the port without connecting: a connection would be served.
	deadline := time.Now().Add(5 * time.Second)
	for !listening(port) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("stock nsca did not listen on %d: %s", port, b)
		}
		if cmd.ProcessState != nil {
			t.Fatalf("stock nsca exited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

// listening reports whether 127.0.0.1:port is in LISTEN state, from /proc.
func listening(port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == want && f[3] == "0A" {
			return true
		}
	}
	return false
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readLines waits until path holds n lines (or 10 s passed) and returns them.
func readLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) == 0 {
			lines = nil
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStockAcceptsGenerator sends checks with the generator's client code
// to the stock daemon and requires that it wrote exactly those results:
// the generator speaks the real protocol (init packet, IV, key derivation,
// CFB state across the packets of a connection, timestamp echo, CRC).
func TestStockAcceptsGenerator(t *testing.T) {
	cases := []struct {
		method, conns, perConn int
		legacy                 bool
	}{
		{1, 2, 3, false},
		{3, 2, 3, false},
		{14, 2, 3, false},
		// Stock reads a legacy packet only when the connection ends after
		// exactly 720 bytes: one per connection.
		{1, 2, 1, true},
		{14, 2, 1, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("method=%d/legacy=%v", tc.method, tc.legacy), func(t *testing.T) {
			t.Parallel()
			cmdFile := filepath.Join(t.TempDir(), "nagios.cmd")
			if err := os.WriteFile(cmdFile, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			d := startStock(t, tc.method, cmdFile)
			c, err := NewCipher(tc.method, stockPassword, tc.legacy)
			if err != nil {
				t.Fatal(err)
			}
			lo := time.Now().Unix()
			var want []string
			id := uint64(1000 * tc.method)
			for conn := range tc.conns {
				cc, err := Dial(d.addr, c, uint64(conn), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				for range tc.perConn {
					if err := cc.Send(ResultFor(id)); err != nil {
						t.Fatal(err)
					}
					want = append(want, ExpectedLine(id))
					id++
				}
				cc.Close()
				// One connection at a time keeps the order of the lines known.
				readLines(t, cmdFile, len(want))
			}
			got := readLines(t, cmdFile, len(want))
			hi := time.Now().Unix()
			if len(got) != len(want) {
				t.Fatalf("stock wrote %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
			for i, line := range got {
				ts, rest, ok := strings.Cut(line, "] ")
				sec, err := strconv.ParseInt(strings.TrimPrefix(ts, "["), 10, 64)
				// Stock stamps lines with time(NULL), which glibc reads from the
				// kernel's coarse clock: up to a tick behind time.Now, so a line
				// written just after a second turned can carry the second before.
				if !ok || !strings.HasPrefix(ts, "[") || err != nil || sec < lo-1 || sec > hi {
					t.Errorf("line %d: bad time prefix: %q", i, line)
				}
				if rest != want[i] {
					t.Errorf("line %d:\n got %q\nwant %q", i, rest, want[i])
				}
			}
		})
	}
}

// TestRunAgainstStock runs the whole generator (connections, the FIFO sink,
// matching, latency, /proc measurements) against stock nsca writing to the
// FIFO. One connection at a time: stock's single-process mode can leave a
// concurrent client without its init packet (see BENCHMARKS.md).
func TestRunAgainstStock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "nagios.cmd")
	recv := new(times)
	start := time.Now()
	// The FIFO must exist before stock starts, or it writes to alternate_dump_file.
	sink, err := OpenSink(fifo, func() int64 { return int64(time.Since(start)) + 1 }, recv)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(sink.fd)
	d := startStock(t, 14, fifo)
	_, port, _ := net.SplitHostPort(d.addr)
	p, _ := strconv.Atoi(port)
	res, err := Run(Options{
		Host: "127.0.0.1", Port: p, Method: 14, Password: stockPassword,
		ChecksPerConn: 3, Conns: 1, Total: 12, FIFO: fifo,
		Quiet: 5 * time.Second, Timeout: 5 * time.Second, ServerPID: d.cmd.Process.Pid, Settle: 50 * time.Millisecond,
	}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 12 || res.Delivered != 12 || res.Mismatched+res.Unknown+res.Duplicates != 0 {
		t.Fatalf("sent %d delivered %d mismatched %d unknown %d duplicates %d (first bad %q)",
			res.Sent, res.Delivered, res.Mismatched, res.Unknown, res.Duplicates, res.FirstBad)
	}
	if res.Connections != 4 {
		t.Errorf("%d connections, want 4 (12 checks, 3 per connection)", res.Connections)
	}
	if res.LatencyMaxMs <= 0 || res.LatencyP50Ms > res.LatencyMaxMs || res.RSSPeakKB == 0 || res.ServerProcs != 1 {
		t.Errorf("implausible measurements: %+v", res)
	}
}

// The /proc reading finds CPU time spent by a child and its own child.
func TestTreeCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 5' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var cpu time.Duration
	var procs int
	for range 100 {
		time.Sleep(50 * time.Millisecond)
		var err error
		cpu, procs, err = TreeCPU(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if cpu >= 100*time.Millisecond && procs >= 2 {
			break
		}
	}
	if procs < 2 || cpu < 100*time.Millisecond {
		t.Fatalf("tree of %d processes used %v, want the grandchild's busy loop counted", procs, cpu)
	}
	if rss, _, n := TreeRSS(cmd.Process.Pid); rss == 0 || n < 2 {
		t.Fatalf("RSS %d kB over %d processes", rss, n)
	}
}
