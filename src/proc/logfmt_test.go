package proc

import (
	"log/syslog"
	"net"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// Syslog and the journal get the message without glog's header, with its
// severity; a line that is not glog's is kept whole.
func TestGlogMessage(t *testing.T) {
	for _, c := range []struct {
		line, text string
		sev        byte
	}{
		{"W1202 00:36:34.123456   12345 validate.go:149] closing connection from 10.0.0.5:4711: bad crc", "closing connection from 10.0.0.5:4711: bad crc", 'W'},
		{"E1202 00:36:34.123456 1 x.go:1] a] b", "a] b", 'E'},
		// Fail's line: a start-up or reload refusal, at err (before, info).
		{"nsca: conf: /etc/nsca.cfg:3: listen tcp 127.0.0.1:5667: bind: address already in use",
			"conf: /etc/nsca.cfg:3: listen tcp 127.0.0.1:5667: bind: address already in use", 'E'},
		{"nsca: conf: /etc/nsca.cfg:9: proc: already running: pid_file /run/nsca.pid is held by pid 7",
			"conf: /etc/nsca.cfg:9: proc: already running: pid_file /run/nsca.pid is held by pid 7", 'E'},
		{"panic: runtime error", "panic: runtime error", 'I'},
		{"Info without a header] x", "Info without a header] x", 'I'},
	} {
		sev, text := glogMessage(c.line)
		if sev != c.sev || text != c.text {
			t.Errorf("glogMessage(%q) = %c %q, want %c %q", c.line, sev, text, c.sev, c.text)
		}
	}
}

// The syslog header is ours: priority, an RFC 3339 time with year,
// microseconds and zone, the tag and pid, then the bare message.
func TestSyslogWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	saved := syslogSockets
	syslogSockets = []string{path}
	defer func() { syslogSockets = saved }()
	w := &syslogWriter{facility: syslog.LOG_DAEMON, tag: "nsca"}
	at := time.Date(2026, 12, 2, 0, 36, 34, 123456000, time.FixedZone("CET", 3600))
	sev, text := glogMessage("W1202 00:36:34.123456   12345 validate.go:149] bad crc")
	if err := w.send(syslogLevel(sev), text, at); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := l.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^<28>2026-12-02T00:36:34\.123456\+01:00 nsca\[\d+\]: bad crc$`)
	if got := string(buf[:n]); !want.MatchString(got) {
		t.Errorf("syslog got %q, want %s", got, want)
	}
	syslogSockets = []string{filepath.Join(t.TempDir(), "none")}
	w2 := &syslogWriter{facility: syslog.LOG_DAEMON, tag: "nsca"}
	if err := w2.send(syslog.LOG_INFO, "x", at); err != errNoSyslog {
		t.Errorf("without a syslog daemon: %v, want errNoSyslog (discarded at once)", err)
	}
}

// A detached daemon that fails before its log is forwarded (a refused
// configuration) sends the reason to syslog itself, at err, under daemon
// (stock's facility before it has read its configuration): its standard
// error is /dev/null.
func TestFailLogDetached(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	saved := syslogSockets
	syslogSockets = []string{path}
	defer func() { syslogSockets = saved }()
	t.Setenv(envDetached, "99")
	t.Setenv("JOURNAL_STREAM", "")
	failLog("conf: /etc/nsca.cfg:4: server_port=0 must be at least 1: bad value")
	buf := make([]byte, 512)
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := l.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^<27>\S+ nsca\[\d+\]: conf: /etc/nsca\.cfg:4: server_port=0 must be at least 1: bad value$`)
	if got := string(buf[:n]); !want.MatchString(got) {
		t.Errorf("syslog got %q, want %s", got, want)
	}
}
