//go:build cgo

package openssl

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPendingUntilTheClientReads: what the socket does not take while the
// client reads nothing waits in the session (Pending, WantWrite) and goes
// out with Flush once it reads again, every byte once and in order.
func TestPendingUntilTheClientReads(t *testing.T) {
	ctx, ln := aliceServer(t, "PSK")
	cmd := clientCmd(ln.Addr().String(), "alice", "secret-alice", "-tls1_3")
	in, _ := cmd.StdinPipe() // open: s_client reads until its input ends
	var got bytes.Buffer
	cmd.Stdout = &got
	if err := cmd.Start(); err != nil {
		t.Skipf("openssl s_client: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s, fd, done, err := acceptSession(t, ctx, ln)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer done()

	cmd.Process.Signal(syscall.SIGSTOP)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1024)
	var sent []byte
	for i := 0; !s.Pending(); i++ {
		if len(sent) > 256<<20 {
			t.Fatalf("%d bytes written to a client that reads nothing, and none waits", len(sent))
		}
		chunk[0] = byte(i)
		n, w, err := s.Write(chunk)
		if err != nil || n != len(chunk) {
			t.Fatalf("write: %d of %d bytes, %v", n, len(chunk), err)
		}
		if s.Pending() != (w == WantWrite) {
			t.Fatalf("write said %v with Pending %v", w, s.Pending())
		}
		sent = append(sent, chunk...)
	}
	if w, err := s.Flush(); w != WantWrite || err != nil {
		t.Fatalf("flush to a client that reads nothing: %v, %v; want WantWrite", w, err)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(10 * time.Second)
	for s.Pending() && time.Now().Before(deadline) {
		waitFD(fd, WantWrite)
		if _, err := s.Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	if s.Pending() {
		t.Fatal("still pending 10 s after the client went on reading")
	}
	s.Shutdown()
	in.Close()
	cmd.Wait()
	if !bytes.Equal(got.Bytes(), sent) {
		t.Fatalf("the client got %d bytes, want the %d sent, in order", got.Len(), len(sent))
	}
}

// TestNoCallWithoutInput: a handshake or read that OpenSSL could only
// answer "want input" makes no C call: not for a new connection before
// its first byte, nor again until more comes; and a connection closed
// before its first byte ends as ErrEOF without an OpenSSL session.
func TestNoCallWithoutInput(t *testing.T) {
	ctx, err := NewContext([]Key{{"alice", []byte("secret-alice")}}, "PSK")
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	s, _ := ctx.NewSession(fds[0])
	defer s.Free()
	step := func(wantCalls int) {
		t.Helper()
		if w, err := s.Handshake(); w != WantRead || err != nil {
			t.Fatalf("handshake: %v, %v; want WantRead", w, err)
		}
		if s.calls != wantCalls {
			t.Fatalf("%d C calls, want %d", s.calls, wantCalls)
		}
	}
	step(0)
	if s.ssl != nil {
		t.Fatal("an OpenSSL session before the client sent a byte")
	}
	unix.Write(fds[1], []byte{0x16}) // a record's first byte
	step(1)
	step(1)
	unix.Write(fds[1], []byte{0x03})
	step(2)

	quiet, _ := ctx.NewSession(fds[1])
	defer quiet.Free()
	unix.Shutdown(fds[0], unix.SHUT_WR)
	if _, err := quiet.Handshake(); !errors.Is(err, ErrEOF) {
		t.Fatalf("handshake on a connection closed at once: %v, want ErrEOF", err)
	}
	if quiet.calls != 0 {
		t.Fatalf("%d C calls on a connection closed at once, want 0", quiet.calls)
	}
}
