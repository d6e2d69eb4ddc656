package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runAgainstStock runs the generator with o against stock nsca (method
// o.Method) writing to a FIFO, and checks that every check arrived once.
func runAgainstStock(t *testing.T, o Options) *Result {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "nagios.cmd")
	start := time.Now()
	sink, err := OpenSink(fifo, func() int64 { return int64(time.Since(start)) + 1 }, new(times))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(sink.fd)
	d := startStock(t, o.Method, fifo)
	_, port, _ := net.SplitHostPort(d.addr)
	o.Port, _ = strconv.Atoi(port)
	o.Host, o.Password, o.FIFO, o.ServerPID = "127.0.0.1", stockPassword, fifo, d.cmd.Process.Pid
	o.Quiet, o.Timeout, o.Settle = 5*time.Second, 5*time.Second, 50*time.Millisecond
	return runDelivered(t, o)
}

// runDelivered runs the generator with o and checks that every check it
// sent arrived once and nothing else did.
func runDelivered(t *testing.T, o Options) *Result {
	t.Helper()
	res, err := Run(o, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent == 0 || res.Delivered != res.Sent || res.Mismatched+res.Unknown+res.Duplicates+res.Failed != 0 {
		t.Fatalf("sent %d delivered %d failed %d mismatched %d unknown %d duplicates %d (first bad %q)",
			res.Sent, res.Delivered, res.Failed, res.Mismatched, res.Unknown, res.Duplicates, res.FirstBad)
	}
	return res
}

// --ahead encrypts every packet before sending and still delivers each
// check once, on the connections it prepared.
func TestAheadAgainstStock(t *testing.T) {
	res := runAgainstStock(t, Options{Method: 3, ChecksPerConn: 3, Conns: 2, Total: 13, Ahead: true})
	if res.Sent != 13 || res.Connections != 5 || res.Generator != "nsca-bench --ahead" {
		t.Errorf("sent %d on %d connections by %q, want 13 on 5 by nsca-bench --ahead", res.Sent, res.Connections, res.Generator)
	}
	if res.LatencyMaxMs <= 0 {
		t.Errorf("no latency measured: %+v", res)
	}
}

// scripts/nsca-load.c builds packets stock accepts, bit for bit, with
// libmcrypt and with XOR.
func TestExecClientAgainstStock(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	bin := filepath.Join(t.TempDir(), "nsca-load")
	if out, err := exec.Command(gcc, "-O2", "-Wall", "-Werror", "-o", bin, "../nsca-load.c", "-lmcrypt", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	for _, method := range []int{1, 3, 8} {
		t.Run(strconv.Itoa(method), func(t *testing.T) {
			res := runAgainstStock(t, Options{Method: method, ChecksPerConn: 2, Conns: 1, Duration: 300 * time.Millisecond, ExecClient: bin})
			if res.Connections == 0 || res.Sent > 2*res.Connections || res.Generator != "nsca-load" {
				t.Errorf("sent %d on %d connections by %q", res.Sent, res.Connections, res.Generator)
			}
		})
	}
}

// --burst opens each connection at its turn, one check each, so the
// connections arrive spread over Total/Rate seconds, and all deliver.
func TestBurstAgainstStock(t *testing.T) {
	res := runAgainstStock(t, Options{Method: 14, ChecksPerConn: 1, Conns: 20, Total: 20, Rate: 200, Burst: true})
	if res.Sent != 20 || res.Connections != 20 || res.DialErrors != 0 {
		t.Errorf("sent %d on %d connections (%d dial errors), want 20 on 20", res.Sent, res.Connections, res.DialErrors)
	}
	if res.SendSeconds < 0.09 {
		t.Errorf("sent in %.3f s, want the 20 arrivals spread over at least 0.095 s at 200/s", res.SendSeconds)
	}
	if res.LatencyMaxMs <= 0 {
		t.Errorf("no latency measured: %+v", res)
	}
}

// --burst counts the checks of a connection that could not be opened as
// sent and failed: lost, as a send_nsca client's would be.
func TestBurstLosesRefusedConnections(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "nagios.cmd")
	res, err := Run(Options{Host: "127.0.0.1", Port: freePort(t), Method: 1, Password: "x", ChecksPerConn: 1, Conns: 3,
		Total: 3, Rate: 1000, Burst: true, FIFO: fifo, Quiet: 100 * time.Millisecond, Timeout: time.Second}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3 || res.Delivered != 0 || res.Failed != 3 || res.DialErrors != 3 {
		t.Errorf("sent %d delivered %d failed %d dial errors %d, want 3 sent and lost", res.Sent, res.Delivered, res.Failed, res.DialErrors)
	}
}
