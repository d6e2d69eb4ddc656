//go:build cgo

package openssl

import (
	"encoding/hex"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// serveOne accepts one connection on ln and runs the server side over the
// non-blocking socket as the listener does: handshake, read a line, answer.
func serveOne(t *testing.T, ctx *Context, ln *net.TCPListener) (Info, string, error) {
	s, fd, done, err := acceptSession(t, ctx, ln)
	if s == nil {
		return Info{}, "", err
	}
	defer done()
	if err != nil {
		return s.Info(), "", err
	}
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1024)
	var got []byte
	for time.Now().Before(deadline) && !strings.Contains(string(got), "\n") {
		n, w, err := s.Read(buf)
		if err != nil {
			return s.Info(), string(got), err
		}
		got = append(got, buf[:n]...)
		if w != Done {
			waitFD(fd, w)
		}
	}
	s.Write([]byte("PONG 1\r\n"))
	s.Shutdown()
	return s.Info(), string(got), nil
}

// acceptSession accepts one connection on ln and runs the server side of
// its handshake over the non-blocking socket as the listener does. done
// frees the session and closes the connection; s is nil when there is
// none.
func acceptSession(t *testing.T, ctx *Context, ln *net.TCPListener) (s *Session, fd int, done func(), err error) {
	ln.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.AcceptTCP()
	if err != nil {
		return nil, -1, nil, err
	}
	f, _ := c.File()
	fd = int(f.Fd())
	unix.SetNonblock(fd, true)
	if s, err = ctx.NewSession(fd); err != nil {
		f.Close()
		c.Close()
		return nil, -1, nil, err
	}
	done = func() {
		s.Free()
		f.Close()
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w, err := s.Handshake()
		if err != nil || w == Done {
			return s, fd, done, err
		}
		waitFD(fd, w)
	}
	return s, fd, done, errors.New("no handshake within 10 s")
}

// waitFD waits up to 100 ms for fd to be as w wants.
func waitFD(fd int, w Want) {
	ev := int16(unix.POLLIN)
	if w == WantWrite {
		ev = unix.POLLOUT
	}
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: ev}}, 100)
}

// client runs openssl s_client with identity and key, sending "PING 1".
// clientCmd is openssl s_client connecting to addr with a PSK, not
// started yet.
func clientCmd(addr, identity, key string, args ...string) *exec.Cmd {
	a := append([]string{"s_client", "-quiet", "-connect", addr, "-psk_identity", identity, "-psk", hex.EncodeToString([]byte(key))}, args...)
	return exec.Command("openssl", a...)
}

// aliceServer is a context that knows alice's key, with ciphers, and a
// loopback listener; both are closed when t ends.
func aliceServer(t *testing.T, ciphers string) (*Context, *net.TCPListener) {
	t.Helper()
	ctx, err := NewContext([]Key{{"alice", []byte("secret-alice")}}, ciphers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Close)
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ctx, ln
}

func client(t *testing.T, addr, identity, key string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := clientCmd(addr, identity, key, args...)
	cmd.Stdin = strings.NewReader("PING 1\r\n")
	if err := cmd.Start(); err != nil {
		t.Skipf("openssl s_client: %v", err)
	}
	return cmd
}

func TestPSKHandshakes(t *testing.T) {
	ctx, err := NewContext([]Key{{"alice", []byte("secret-alice")}, {"*", []byte("fallback")}}, "PSK-AES256-CBC-SHA:PSK-AES128-CBC-SHA")
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	cases := []struct {
		name, identity, key string
		args                []string
		version, cipher     string
		fail                bool
	}{
		{"tls1.2 nsca-ng suite", "alice", "secret-alice", []string{"-tls1_2", "-cipher", "PSK-AES256-CBC-SHA"}, "TLSv1.2", "PSK-AES256-CBC-SHA", false},
		{"tls1.3", "alice", "secret-alice", []string{"-tls1_3"}, "TLSv1.3", "", false},
		{"fallback key", "bob", "fallback", []string{"-tls1_3"}, "TLSv1.3", "", false},
		{"wrong key tls1.2", "alice", "wrong", []string{"-tls1_2", "-cipher", "PSK-AES256-CBC-SHA"}, "", "", true},
		{"wrong key tls1.3", "alice", "wrong", []string{"-tls1_3"}, "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cmd := client(t, ln.Addr().String(), tc.identity, tc.key, tc.args...)
			info, line, err := serveOne(t, ctx, ln)
			cmd.Process.Kill()
			cmd.Wait()
			if tc.fail {
				if !errors.Is(err, ErrTLS) {
					t.Fatalf("handshake with a wrong key: err %v, want ErrTLS", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("serve: %v", err)
			}
			if line != "PING 1\r\n" && line != "PING 1\n" {
				t.Errorf("read %q, want the PING line", line)
			}
			if info.Identity != tc.identity || !info.Known || info.Version != tc.version || (tc.cipher != "" && info.Cipher != tc.cipher) {
				t.Errorf("info %+v, want identity %q known, %s %s", info, tc.identity, tc.version, tc.cipher)
			}
		})
	}
}

func TestUnknownIdentityWithoutFallback(t *testing.T) {
	ctx, ln := aliceServer(t, "PSK")
	cmd := client(t, ln.Addr().String(), "mallory", "secret-alice", "-tls1_2", "-cipher", "PSK-AES256-CBC-SHA")
	info, _, err := serveOne(t, ctx, ln)
	cmd.Process.Kill()
	cmd.Wait()
	if !errors.Is(err, ErrTLS) || info.Known || info.Identity != "mallory" {
		t.Fatalf("unknown identity: err %v, info %+v; want ErrTLS, identity mallory not known", err, info)
	}
}

func TestBadCipherList(t *testing.T) {
	if _, err := NewContext(nil, "NO-SUCH-CIPHER"); !errors.Is(err, ErrContext) {
		t.Fatalf("err %v, want ErrContext", err)
	}
}

// TestEOFDuringHandshake: a client that connects and closes without a
// word is ErrEOF, not a refused key.
func TestEOFDuringHandshake(t *testing.T) {
	ctx, ln := aliceServer(t, "PSK")
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, _, err := serveOne(t, ctx, ln); !errors.Is(err, ErrEOF) || !errors.Is(err, ErrTLS) {
		t.Fatalf("err %v, want ErrTLS and ErrEOF", err)
	}
}

// TestTicketAfterFinished: with TLS 1.3 the server sends a session ticket
// after the client's Finished, its only message there. Without one the
// client's first request, written behind its Finished, waits under Nagle
// for the server's delayed ACK: 40 ms a session (issue 34). TLS 1.2 needs
// none (the server's Finished comes last) and gets none.
func TestTicketAfterFinished(t *testing.T) {
	ctx, err := NewContext([]Key{{"alice", []byte("secret-alice")}}, "PSK-AES256-CBC-SHA")
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	for _, tc := range []struct {
		version string
		args    []string
		ticket  bool
	}{
		{"TLSv1.3", []string{"-tls1_3"}, true},
		{"TLSv1.2", []string{"-tls1_2", "-cipher", "PSK-AES256-CBC-SHA"}, false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			a := append([]string{"s_client", "-connect", ln.Addr().String(), "-psk_identity", "alice",
				"-psk", hex.EncodeToString([]byte("secret-alice"))}, tc.args...)
			cmd := exec.Command("openssl", a...)
			// Open until the server is done: s_client stops at the end
			// of its input, maybe before it read the ticket.
			in, _ := cmd.StdinPipe()
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Skipf("openssl s_client: %v", err)
			}
			in.Write([]byte("PING 1\r\n"))
			info, _, err := serveOne(t, ctx, ln)
			in.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			if err != nil || info.Version != tc.version {
				t.Fatalf("serve: %v, %+v; want %s", err, info, tc.version)
			}
			if got := strings.Contains(out.String(), "New Session Ticket") || strings.Contains(out.String(), "TLS session ticket:"); got != tc.ticket {
				t.Errorf("a session ticket: %v, want %v; s_client said:\n%s", got, tc.ticket, out.String())
			}
		})
	}
}

// TestTrim: Trim trims once trimAfter sessions were freed since the last
// time, and not for each session that ends.
func TestTrim(t *testing.T) {
	ctx, err := NewContext([]Key{{"alice", []byte("secret-alice")}}, "PSK")
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	Trim()
	freed.Store(0)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	for i := 0; i < trimAfter; i++ {
		if Trim() {
			t.Fatalf("Trim after %d sessions freed: true, want false", i)
		}
		s, err := ctx.NewSession(fds[0])
		if err != nil {
			t.Fatal(err)
		}
		// A record's first byte: OpenSSL's session is made, and waits
		// for the rest.
		unix.Write(fds[1], []byte{0x16})
		if w, err := s.Handshake(); w != WantRead || err != nil {
			t.Fatalf("handshake on one byte: %v, %v; want WantRead", w, err)
		}
		s.Free()
		s.Free() // a second Free is no session more
	}
	if !Trim() {
		t.Fatalf("Trim after %d sessions freed: false, want true", trimAfter)
	}
	if Trim() {
		t.Fatal("Trim again at once: true, want false")
	}
}
