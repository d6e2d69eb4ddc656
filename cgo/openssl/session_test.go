//go:build cgo

package openssl

import (
	"bytes"
	"syscall"
	"testing"
	"time"
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
