package nscang

import (
	"bufio"
	"context"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/frontend"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// ngTestListener opens the nsca-ng listening socket of a test on a free
// loopback port.
func ngTestListener(t testing.TB) (string, *os.File) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ln, err := frontend.ListenReusePort(addr, "nsca-ng listener")
	if err != nil {
		t.Fatal(err)
	}
	return addr, ln
}

// needOpenSSL skips tb unless this build has OpenSSL and the machine the
// openssl command, which plays the client.
func needOpenSSL(tb testing.TB) {
	tb.Helper()
	if openssl.Available() != nil {
		tb.Skip("no OpenSSL in this build")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		tb.Skip("no openssl command")
	}
}

// aliceClient is openssl s_client connecting to addr as alice, not
// started yet.
func aliceClient(addr string) *exec.Cmd {
	return exec.Command("openssl", "s_client", "-quiet", "-connect", addr, "-psk_identity", "alice",
		"-psk", hex.EncodeToString([]byte("alice-secret")))
}

// ngStartTest starts a listener of one session goroutine for alice on a
// free loopback port, sending to out; the test's end cancels it.
func ngStartTest(tb testing.TB, out chan intake.Submission) (addr string, stop, closed chan struct{}, env stage.Env) {
	tb.Helper()
	addr, ln := ngTestListener(tb)
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	stop, closed = make(chan struct{}), make(chan struct{})
	cfg := Config{Listen: addr, Listener: ln, Threads: 1, MaxSessions: 10, HandshakeTimeout: 5 * time.Second,
		Timeout: 10 * time.Second, MaxCommandSize: 16384, Ciphers: "PSK", Identities: one{}, Grace: time.Second}
	env = stage.Env{Stats: counters.NewStats(), Log: counters.NewRateLog(time.Second, 5)}
	if err := Start(ctx, stop, out, func() { close(closed) }, cfg, env); err != nil {
		tb.Fatal(err)
	}
	return addr, stop, closed, env
}

// one is the identities file of the test: alice, with every right.
type one struct{}

func (one) Keys() []openssl.Key {
	return []openssl.Key{{Identity: "alice", PSK: []byte("alice-secret")}}
}

func (one) Lookup(name string) *identities.Identity {
	if name != "alice" {
		return nil
	}
	return alice
}

var alice = func() *identities.Identity {
	f, err := identities.Parse("test", []byte(`authorize "alice" { password = "alice-secret"; hosts = ".*"; services = ".*"; commands = ".*" }`), nil)
	if err != nil {
		panic(err)
	}
	return f.Lookup("alice")
}()

// TestNGOkayAfterAck: a pushed check result reaches the validate stage's
// input decoded, and the client hears OKAY only once validate acknowledges
// it; until then the session reads nothing more.
func TestNGOkayAfterAck(t *testing.T) {
	needOpenSSL(t)
	out := make(chan intake.Submission, 1)
	addr, stop, closed, _ := ngStartTest(t, out)

	cmd := aliceClient(addr)
	in, _ := cmd.StdinPipe()
	r, w, _ := os.Pipe()
	defer r.Close()
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- strings.TrimSuffix(sc.Text(), "\r")
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case l := <-lines:
			if l != want {
				t.Fatalf("got %q, want %q", l, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %q within 5 s", want)
		}
	}
	command := "[1700000000] PROCESS_SERVICE_CHECK_RESULT;web1;disk;2;full\\nsecond line\n"
	in.Write([]byte("MOIN 1 unit\r\n"))
	expect("MOIN 1")
	in.Write([]byte("PUSH " + strconv.Itoa(len(command)) + "\r\n"))
	expect("OKAY")
	in.Write([]byte(command + "NOOP\r\n"))
	var p intake.Submission
	select {
	case p = <-out:
	case <-time.After(5 * time.Second):
		t.Fatal("the pushed result did not reach the validate stage's input")
	}
	if p.Kind != intake.KindResult || p.Time != 1700000000 || p.Result.Host != "web1" || p.Result.Service != "disk" ||
		p.Result.ReturnCode != 2 || p.Result.Output != "full\nsecond line" || p.Source.Front != intake.Front("nsca-ng") {
		t.Fatalf("submission %+v", p)
	}
	select {
	case l := <-lines:
		t.Fatalf("the client heard %q before validate acknowledged the result", l)
	case <-time.After(300 * time.Millisecond):
	}
	p.Source.Outcomes.Taken(&p)
	expect("OKAY") // the result
	expect("OKAY") // the NOOP, read only after the result's answer
	in.Write([]byte("QUIT\r\n"))
	expect("OKAY")
	close(stop)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not finish after stop")
	}
}

// While the queue the listener feeds is full, it accepts no one: a new
// client waits in the listen queue, as a send_nsca client does, rather
// than behind a session goroutine blocked on that queue; it is served
// once the queue has room.
func TestNGAcceptWaitsForTheQueue(t *testing.T) {
	if openssl.Available() != nil {
		t.Skip("no OpenSSL in this build")
	}
	out := make(chan intake.Submission, 1)
	out <- intake.Submission{}
	addr, stop, closed, env := ngStartTest(t, out)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Not a TLS handshake: a session refuses it and closes at once.
	c.Write([]byte("not a client hello\r\n"))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var b [64]byte
	if n, err := c.Read(b[:]); err == nil || !os.IsTimeout(err) {
		t.Fatalf("with the queue full the client was served: read %d bytes, %v", n, err)
	}
	<-out
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, err := c.Read(b[:])
		if os.IsTimeout(err) {
			t.Fatal("the queue has room, but the client was not served within 5 s")
		}
		if err != nil {
			break // refused and closed: it was served
		}
	}
	if got := env.Stats.Refused.Load(); got != 1 {
		t.Fatalf("refused %d, want the 1 bad handshake", got)
	}
	close(stop)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not finish after stop")
	}
}
