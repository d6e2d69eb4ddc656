package proc

import (
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nsca_fast/stages/counters"
)

// Environment variables by which a process learns its role from its parent.
const (
	envDetached = "NSCA_FAST_DETACHED" // the descriptor of the readiness pipe
	envWorker   = "NSCA_FAST_WORKER"   // "slot:generation[:flag]...", flags below
)

// Flags of a worker's role.
const (
	roleBoard   = "board"   // descriptor 5 is its counters' board
	roleSyslog  = "syslog"  // it forwards its own log to syslog (Worker.Syslog)
	roleClients = "clients" // descriptor 6 is the socket on which it hands over its table of sources
	// roleCounters, "counters=" and the supervisor's counters.Layout in
	// hexadecimal, says the supervisor reads counters kept on the board
	// (Board.Counters) laid out as it lays them out.
	roleCounters = "counters="
)

// countersRole is the role flag by which a supervisor says it reads its
// workers' counters laid out as this binary lays them out, and by which a
// worker knows it was started by such a supervisor.
func countersRole() string { return roleCounters + strconv.FormatUint(counters.Layout, 16) }

// Detached reports whether this process is the detached daemon started by
// Detach.
func Detached() bool { return os.Getenv(envDetached) != "" }

// Detach starts this program again as a daemon, the way stock nsca detaches
// without -f: a new session without a controlling terminal, standard input
// and output on /dev/null, the working directory unchanged (relative paths
// in nsca.cfg keep resolving against it). It waits until the daemon reports
// that it is serving, or why it could not start, so that start-up errors
// still reach the operator's terminal, and returns the daemon's exit code
// for this process to use.
func Detach(args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: detach: %v\n", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: detach: %v\n", err)
		return 1
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: detach: %v\n", err)
		return 1
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(os.Environ(), envDetached+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "nsca: detach: %v\n", err)
		return 1
	}
	w.Close()
	null.Close()
	msg, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	if strings.TrimSpace(string(msg)) == "ok" {
		cmd.Process.Release()
		return 0
	}
	if len(msg) == 0 {
		msg = []byte("the daemon exited during start-up without saying why (see syslog)")
	}
	fmt.Fprintf(os.Stderr, "nsca: %s\n", strings.TrimSpace(string(msg)))
	cmd.Wait()
	return 1
}

// ReportStarted tells the waiting parent of a detached daemon that it
// serves (err nil) or why it could not start. Outside Detach it does nothing.
func ReportStarted(err error) {
	fd, convErr := strconv.Atoi(os.Getenv(envDetached))
	if convErr != nil {
		return
	}
	os.Unsetenv(envDetached)
	f := os.NewFile(uintptr(fd), "ready")
	if err == nil {
		f.WriteString("ok\n")
	} else {
		f.WriteString(err.Error() + "\n")
	}
	f.Close()
}

// ErrFacility is returned for a log_facility syslog does not know.
var ErrFacility = errors.New("proc: unknown log_facility")

var facilities = map[string]syslog.Priority{
	"kern": syslog.LOG_KERN, "user": syslog.LOG_USER, "mail": syslog.LOG_MAIL, "daemon": syslog.LOG_DAEMON,
	"auth": syslog.LOG_AUTH, "syslog": syslog.LOG_SYSLOG, "lpr": syslog.LOG_LPR, "news": syslog.LOG_NEWS,
	"uucp": syslog.LOG_UUCP, "cron": syslog.LOG_CRON, "authpriv": syslog.LOG_AUTHPRIV, "ftp": syslog.LOG_FTP,
	"local0": syslog.LOG_LOCAL0, "local1": syslog.LOG_LOCAL1, "local2": syslog.LOG_LOCAL2, "local3": syslog.LOG_LOCAL3,
	"local4": syslog.LOG_LOCAL4, "local5": syslog.LOG_LOCAL5, "local6": syslog.LOG_LOCAL6, "local7": syslog.LOG_LOCAL7,
}

// StderrToSyslog sends everything written to this process's standard error
// (glog's output, and that of worker processes, which inherit it) to syslog
// under facility, one message per line, with glog's severity letter mapped
// to the syslog level and glog's header dropped (syslog's is ours, with
// the year and zone). Without a syslog daemon the lines are discarded.
func StderrToSyslog(facility string) error {
	fac, ok := facilities[facility]
	if !ok {
		return fmt.Errorf("%w: %q", ErrFacility, facility)
	}
	r, err := redirectStderr()
	if err != nil {
		return err
	}
	out := &syslogWriter{facility: fac, tag: "nsca"}
	forwardLines(r, func(line string) {
		sev, text := glogMessage(line)
		if out.send(syslogLevel(sev), text, time.Now()) == errSyslogWrite {
			time.Sleep(10 * time.Millisecond) // syslogd restarting; the next line reconnects
		}
	})
	return nil
}
