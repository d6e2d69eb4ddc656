package nscang

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/rawsys"
)

// sessionState is where a session is in the protocol.
type sessionState int

const (
	stateHandshake sessionState = iota
	stateFirst                  // expecting MOIN, PING or BAIL
	stateReady                  // expecting PUSH, NOOP, QUIT or BAIL
	statePush                   // reading a pushed command
	stateWait                   // a command is with the pipeline or the command file
	stateClosing                // writing the last reply, then close_notify
	stateDraining               // close_notify sent: reading to the client's end
)

// drainFor bounds how long a closed session waits for the client's end.
// Closing a socket with unread input resets the connection, and the reset
// can take the client's last reply (OKAY to QUIT, a BAIL) with it.
const drainFor = 2 * time.Second

// session is one nsca-ng connection; only its worker touches it.
type session struct {
	w          *worker
	fd         int
	peer       netip.AddrPort
	tls        *openssl.Session
	state      sessionState
	name, sid  string
	identity   *identities.Identity
	src        intake.Source
	in, out    []byte
	want       int
	deadline   time.Time
	lastActive time.Time
	writing    bool // EPOLLOUT is polled for
	// drained: the last read found the socket empty, and no event came
	// since. Reading again would only cost a system call: with
	// edge-triggered polling, new input brings an event.
	drained bool
	// closeSent: close_notify is queued, the write side shuts once it
	// is through.
	closeSent bool
	ended     bool
}

// who names the session in messages as nsca-ng does: identity@address.
// The identity and the session id are the client's choice: escaped.
func (s *session) who() string {
	if s.name == "" {
		return s.peer.String()
	}
	if s.sid != "" {
		return intake.Printable(s.name) + "@" + s.peer.String() + " (ID: " + intake.Printable(s.sid) + ")"
	}
	return intake.Printable(s.name) + "@" + s.peer.String()
}

// drive moves the session as far as the socket and the pipeline let it.
func (s *session) drive() {
	for !s.ended {
		if s.tls.Pending() {
			want, err := s.tls.Flush()
			if err != nil {
				s.fail(err)
				return
			}
			if want != openssl.Done {
				s.pollWrite(true)
				return
			}
		}
		if len(s.out) > 0 {
			n, want, err := s.tls.Write(s.out)
			if err != nil {
				s.fail(err)
				return
			}
			s.out = s.out[n:]
			if want != openssl.Done {
				s.pollWrite(want == openssl.WantWrite)
				return
			}
			continue
		}
		s.pollWrite(false)
		switch s.state {
		case stateClosing:
			if !s.closeSent {
				s.tls.Shutdown()
				s.closeSent = true
				continue
			}
			unix.Shutdown(s.fd, unix.SHUT_WR)
			s.state, s.deadline = stateDraining, time.Now().Add(drainFor)
			continue
		case stateDraining:
			s.drain()
			return
		case stateHandshake:
			want, err := s.tls.Handshake()
			if err != nil {
				s.handshakeFailed(err)
				return
			}
			if want != openssl.Done {
				s.pollWrite(want == openssl.WantWrite)
				return
			}
			if !s.established() {
				return
			}
			continue
		case stateWait:
			return
		}
		if s.process() {
			continue
		}
		if s.drained {
			return
		}
		room := MaxLine - len(s.in)
		if s.state == statePush {
			room = s.want - len(s.in)
		}
		buf := s.w.buf[:min(len(s.w.buf), max(room, 1))]
		n, want, err := s.tls.Read(buf)
		if err != nil {
			s.fail(err)
			return
		}
		if n > 0 {
			s.in = append(s.in, buf[:n]...)
			s.lastActive = time.Now()
			s.drained = want == openssl.WantRead
			continue
		}
		s.drained = want == openssl.WantRead
		s.pollWrite(want == openssl.WantWrite)
		return
	}
}

// drain reads and discards what the client still sends after the session
// ended, and closes once it has closed its side.
func (s *session) drain() {
	for {
		n, err := rawsys.Read(s.fd, s.w.buf)
		switch {
		case n > 0:
			continue
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		}
		s.end()
		return
	}
}

// pollWrite polls the socket for room too while a write waits for it.
func (s *session) pollWrite(on bool) {
	if on == s.writing {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(s.fd)}
	if on {
		ev.Events |= unix.EPOLLOUT
	}
	rawsys.EpollCtl(s.w.ep.FD(), unix.EPOLL_CTL_MOD, s.fd, &ev)
	s.writing = on
}

// established checks the identity the handshake authenticated.
func (s *session) established() bool {
	srv := s.w.srv
	info := s.tls.Info()
	s.name = info.Identity
	s.identity = srv.cfg.Identities.Lookup(info.Identity)
	if s.identity == nil || s.identity.Specificity(s.peer.Addr()) < 0 {
		srv.stats.Refused.Add(1)
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: refused %s: identity %q may not connect from %s", s.who(), info.Identity, s.peer.Addr())
		s.tls.Shutdown()
		s.end()
		return false
	}
	srv.stats.Connections.Add(1)
	srv.handshakes.Release(s.peer.Addr())
	id := intake.IDBase(1) + srv.nextID.Add(1)
	s.src = intake.Source{ID: id, Front: Front, Peer: s.peer, Identity: s.identity, Who: s.who(), LogPrefix: "nsca-ng: ", Outcomes: s, Answers: true}
	s.state = stateFirst
	s.lastActive = time.Now()
	if srv.cfg.Debug {
		glog.Infof("nsca-ng: TLS handshake with %s successful (%s, %s)", s.who(), info.Version, info.Cipher)
	}
	return true
}

func (s *session) handshakeFailed(err error) {
	srv := s.w.srv
	if errors.Is(err, openssl.ErrEOF) {
		// Closed before the handshake was done: a scanner, a probe, a
		// client that gave up. No key was refused.
		srv.stats.Incomplete.Add(1)
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s closed the connection during the TLS handshake", s.peer)
		s.end()
		return
	}
	srv.stats.Refused.Add(1)
	// A key was found for a known identity, so it did not fit.
	name := ""
	if info := s.tls.Info(); info.Identity != "" && info.Known {
		name = fmt.Sprintf(" (identity %q, wrong password?)", info.Identity)
	} else if info.Identity != "" {
		name = fmt.Sprintf(" (identity %q, unknown)", info.Identity)
	}
	srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: TLS handshake with %s%s failed: %v", s.peer, name, err)
	s.end()
}

// fail ends a session whose TLS connection broke or was closed.
func (s *session) fail(err error) {
	if errors.Is(err, openssl.ErrClosed) {
		// Its close_notify is answered with ours, as the client waits for it.
		s.tls.Shutdown()
	}
	if !errors.Is(err, openssl.ErrClosed) {
		s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s: %v", s.who(), err)
	} else if s.state != stateFirst && s.state != stateReady {
		s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s closed the TLS connection in the middle of a request", s.who())
	}
	s.end()
}

// end closes the connection and forgets the session.
func (s *session) end() {
	if s.ended {
		return
	}
	s.ended = true
	w := s.w
	w.ep.Remove(s.fd)
	s.tls.Free()
	unix.Close(s.fd)
	delete(w.sessions, s.fd)
	w.srv.left(s.peer, s.state == stateHandshake)
}

func (s *session) reply(line string) {
	s.out = append(append(s.out, line...), '\r', '\n')
}

// bail sends BAIL with why and closes the session.
func (s *session) bail(why string) {
	s.reply("BAIL " + why)
	s.state = stateClosing
	s.drive()
}

// process handles one request or pushed command from what was read, and
// reports whether it found a whole one.
func (s *session) process() bool {
	if s.state == statePush {
		if len(s.in) < s.want {
			return false
		}
		// Parsed before what follows it moves over it: a client that
		// sends its next request behind the data has it in s.in too.
		s.push(s.in[:s.want])
		s.in = append(s.in[:0], s.in[s.want:]...)
		return true
	}
	i := bytes.IndexByte(s.in, '\n')
	if i < 0 || i+1 > MaxLine {
		if len(s.in) >= MaxLine {
			s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s sent a request line longer than %d bytes", s.who(), MaxLine)
			s.bail(strings.TrimPrefix(BailLineTooLong, "BAIL "))
			return true
		}
		return false
	}
	line := strings.TrimSuffix(string(s.in[:i]), "\r")
	s.in = append(s.in[:0], s.in[i+1:]...)
	s.request(ParseRequest(line))
	return true
}

func (s *session) request(r Request) {
	switch {
	case r.Verb == Quit:
		s.reply(ReplyOkay)
		s.state = stateClosing
	case r.Verb == Bail:
		s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s said: %s", s.who(), r.Line)
		s.state = stateClosing
	case s.state == stateFirst && r.Verb == Moin:
		if ok, fail := MoinOK(r); !ok {
			s.reply(fail)
			return
		}
		s.sid = r.Args[1]
		s.src.Who = s.who()
		s.reply(ReplyMoin)
		s.state = stateReady
	case s.state == stateFirst && r.Verb == Ping:
		s.reply(ReplyPong)
		s.state = stateClosing
	case s.state == stateFirst:
		s.reply(FailFirst)
	case r.Verb == Noop:
		s.reply(ReplyOkay)
	case r.Verb == Push:
		n, fail := PushSize(r, s.w.srv.cfg.MaxCommandSize)
		if fail != "" {
			s.reply(fail)
			return
		}
		s.reply(ReplyOkay)
		s.state, s.want = statePush, n
	default:
		s.reply(FailSession)
	}
}
