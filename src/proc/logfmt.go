package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// failPrefix starts the line Fail writes: why the daemon cannot start.
const failPrefix = "nsca: "

// glogMessage splits a glog line ("W1202 00:36:34.123456   12345
// file.go:12] text") into its severity letter and its text: syslog and
// the journal put a header of their own (time, host, program, pid) before
// each message, and glog's would be a second one. Fail's line ("nsca:
// text") is an error, the program's name dropped for the same reason. Any
// other line (a worker's panic, say) is kept whole, as information.
func glogMessage(line string) (severity byte, text string) {
	if text, ok := strings.CutPrefix(line, failPrefix); ok {
		return 'E', text
	}
	if len(line) < 2 || !strings.ContainsRune("IWEF", rune(line[0])) || line[1] < '0' || line[1] > '9' {
		return 'I', line
	}
	i := strings.Index(line, "] ")
	if i < 0 || i > 80 {
		return 'I', line
	}
	return line[0], line[i+2:]
}

// syslogLevel maps glog's severity letter to a syslog level.
func syslogLevel(severity byte) syslog.Priority {
	switch severity {
	case 'F':
		return syslog.LOG_CRIT
	case 'E':
		return syslog.LOG_ERR
	case 'W':
		return syslog.LOG_WARNING
	}
	return syslog.LOG_INFO
}

// syslogSockets are where the local syslog daemon listens.
var syslogSockets = []string{"/dev/log", "/var/run/syslog", "/var/run/log"}

// syslogWriter sends messages to the local syslog daemon. Its header is
// ours, so it carries the time with year, microseconds and zone (RFC 3339,
// which rsyslog and syslog-ng read), where Go's log/syslog sends a
// timestamp without either.
type syslogWriter struct {
	facility syslog.Priority
	tag      string
	conn     net.Conn
}

// Why a message did not reach syslog: no daemon listens (the message is
// discarded), or one did but the write failed (it may be restarting).
var (
	errNoSyslog    = errors.New("proc: no syslog daemon")
	errSyslogWrite = errors.New("proc: writing to syslog failed")
)

// send writes one message at level, connecting (again) as needed.
func (w *syslogWriter) send(level syslog.Priority, text string, now time.Time) error {
	msg := fmt.Sprintf("<%d>%s %s[%d]: %s", w.facility|level, now.Format("2006-01-02T15:04:05.000000Z07:00"), w.tag, os.Getpid(), text)
	for range 2 {
		if w.conn == nil {
			for _, path := range syslogSockets {
				for _, network := range []string{"unixgram", "unix"} {
					if c, err := net.Dial(network, path); err == nil {
						w.conn = c
						break
					}
				}
				if w.conn != nil {
					break
				}
			}
			if w.conn == nil {
				return errNoSyslog
			}
		}
		if _, err := w.conn.Write([]byte(msg)); err == nil {
			return nil
		}
		w.conn.Close()
		w.conn = nil
	}
	return errSyslogWrite
}

// redirectStderr points standard error (glog's output, and that of
// worker processes, which inherit it) at a pipe and returns its reading
// end.
func redirectStderr() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := unix.Dup2(int(w.Fd()), 2); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// forwarded is closed when the forwarder of standard error has passed on
// its last line; nil without one.
var forwarded chan struct{}

// forwardLines calls each, on a goroutine of its own, for every line read
// from r until it ends.
func forwardLines(r io.Reader, each func(line string)) {
	forwarded = make(chan struct{})
	go func() {
		defer close(forwarded)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			each(sc.Text())
		}
	}()
}

// DrainLog lets the forwarder of standard error (to syslog or the journal)
// pass on the lines written so far before the process exits: it closes
// this process's end of the pipe and waits, a bounded time (a worker still
// draining holds the pipe open too), for the forwarder to reach its end.
func DrainLog() {
	if forwarded == nil {
		return
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		unix.Dup2(int(null.Fd()), 2)
		null.Close()
	}
	select {
	case <-forwarded:
	case <-time.After(time.Second):
	}
}

// OnJournal reports whether standard error is systemd's journal stream
// (JOURNAL_STREAM names its device and inode), as under the unit's -f.
func OnJournal() bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(2, &st) != nil {
		return false
	}
	return strconv.FormatUint(st.Dev, 10) == dev && strconv.FormatUint(st.Ino, 10) == ino
}

// workerStderr is the standard error workers are started with: this
// process's, or the journal stream itself once StderrToJournal has put a
// pipe in its place, so that a worker's last lines reach the journal even
// after the supervisor died.
var workerStderr = 2

// StderrToJournal rewrites what goes to standard error, which is the
// journal, as "<level>text": the journal keeps glog's severity as the
// message's priority and adds its own header, so glog's is dropped.
func StderrToJournal() error {
	journal, err := unix.FcntlInt(2, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return err
	}
	workerStderr = journal
	out := os.NewFile(uintptr(journal), "journal")
	r, err := redirectStderr()
	if err != nil {
		out.Close()
		return err
	}
	forwardLines(r, func(line string) {
		sev, text := glogMessage(line)
		fmt.Fprintf(out, "<%d>%s\n", syslogLevel(sev), text)
	})
	return nil
}

// LogToSystem sends this process's standard error to syslog (under
// facility) when it is the detached daemon, or to the journal when it runs
// in the foreground (-f) with the journal as its standard error, each line
// at its priority; otherwise it leaves standard error alone.
func LogToSystem(facility string, foreground bool) error {
	switch {
	case Detached():
		return StderrToSyslog(facility)
	case foreground && OnJournal():
		return StderrToJournal()
	}
	return nil
}

// failLog writes Fail's line where the operator finds it, at err: through
// the forwarder to syslog or the journal when LogToSystem has set one up,
// else straight to the journal or (for a detached daemon, whose standard
// error is /dev/null) to syslog under stock's facility before it has read
// its configuration, daemon; else to standard error.
func failLog(text string) {
	switch {
	case forwarded != nil:
	case OnJournal():
		fmt.Fprintf(os.Stderr, "<%d>%s%s\n", syslog.LOG_ERR, failPrefix, text)
		return
	case Detached():
		w := &syslogWriter{facility: syslog.LOG_DAEMON, tag: "nsca"}
		w.send(syslog.LOG_ERR, text, time.Now())
		return
	}
	fmt.Fprintf(os.Stderr, "%s%s\n", failPrefix, text)
}
