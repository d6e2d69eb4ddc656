package proc

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/rawsys"
)

// ParentDeathSignal is what the kernel sends a worker when its supervisor
// dies. It differs from SIGTERM on purpose: a worker counts SIGTERMs (the
// second one aborts the drain), and the supervisor's own SIGTERM followed by
// its death must not look like two of them.
const ParentDeathSignal = syscall.SIGUSR2

// ReplaceSignal is what the supervisor sends a worker that a reload
// replaced, instead of SIGTERM: the worker drains just the same, but its
// last lines say that a reload replaced it, not that the daemon stopped.
// It is a real-time signal (SIGRTMIN+1 as glibc numbers them; the
// kernel's first two are glibc's own), which no terminal, kernel event or
// operator's habit sends: SIGUSR1 reopens files, SIGUSR2 is the parent's
// death, and SIGWINCH reaches every worker of a daemon in the foreground
// whose terminal is resized.
const ReplaceSignal = syscall.Signal(35)

// Process is a running worker as the supervisor sees it: the OS side of a
// worker, kept behind an interface so the supervisor's decisions can be
// tested with fake processes.
type Process interface {
	// Pid is the process id, for logs and for the operator.
	Pid() int
	// Signal sends sig to the process.
	Signal(sig os.Signal) error
	// Wait blocks until the process has exited and says how.
	Wait() Exit
}

// Exit says how a worker process ended.
type Exit struct {
	// Code is the exit status, or -1 when a signal ended the process.
	Code int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
	// Err is set when the exit could not be observed at all.
	Err error
}

// Clean reports an exit with status 0.
func (e Exit) Clean() bool { return e.Err == nil && e.Signal == 0 && e.Code == 0 }

func (e Exit) String() string {
	switch {
	case e.Err != nil:
		return "lost: " + e.Err.Error()
	case e.Signal != 0:
		return "killed by signal " + strconv.Itoa(int(e.Signal)) + " (" + e.Signal.String() + ")"
	default:
		return "exit status " + strconv.Itoa(e.Code)
	}
}

// Spawner starts one worker on a listening socket and returns it with the
// supervisor's side of its channels.
type Spawner interface {
	Spawn(slot, gen, listener int) (Process, Link, error)
}

// Link is the supervisor's side of a worker's channels.
type Link struct {
	// Status is the read end of the worker's status pipe: it says "ready"
	// there and, when it has no board, reports its counters.
	Status io.ReadCloser
	// Board is where the worker publishes its counters, or nil.
	Board *board.Board
	// Clients is the socket on which the worker hands over its table of
	// sources, or nil.
	Clients net.Conn
}

// ExecSpawner starts workers as new processes of this program. It hands
// each worker the listening socket as a raw descriptor: wrapping it in an
// *os.File would give it a finalizer that closes the supervisor's socket
// once the wrapper is collected, and exec's Fd() would switch the socket,
// shared with running workers, to blocking mode.
type ExecSpawner struct {
	// Path is the program; Args its arguments (without argv[0]).
	Path string
	Args []string
	// Syslog tells workers that the supervisor's standard error goes to
	// syslog through a pipe it reads itself: they then log to syslog on
	// their own, so that their last lines survive the supervisor.
	Syslog bool

	nullOnce sync.Once
	null     int
	nullErr  error
}

// devNull is /dev/null opened once for the workers' standard input; it is
// never closed.
func (e *ExecSpawner) devNull() (int, error) {
	e.nullOnce.Do(func() { e.null, e.nullErr = unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	return e.null, e.nullErr
}

// Spawn starts a worker process with the listening socket as descriptor 3,
// the write end of its status pipe as descriptor 4, its counters' board
// as descriptor 5 and the socket of its table of sources as descriptor 6.
func (e *ExecSpawner) Spawn(slot, gen, listener int) (Process, Link, error) {
	null, err := e.devNull()
	if err != nil {
		return nil, Link{}, fmt.Errorf("%w: %s: %w", ErrSpawn, os.DevNull, err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, Link{}, fmt.Errorf("%w: status pipe: %w", ErrSpawn, err)
	}
	defer unix.Close(p[1])
	role := strconv.Itoa(slot) + ":" + strconv.Itoa(gen)
	files := []uintptr{uintptr(null), 1, uintptr(workerStderr), uintptr(listener), uintptr(p[1])}
	// Without a board (no memfd_create, say, under a seccomp filter) the
	// worker still serves and reports through its status pipe.
	b, boardFD, err := board.Create("nsca-worker-" + strconv.Itoa(slot))
	if err != nil {
		glog.Warningf("supervisor: worker %d reports through its status pipe: %v", slot, err)
	} else {
		defer unix.Close(boardFD)
		role += ":" + roleBoard + ":" + countersRole()
		files = append(files, uintptr(boardFD))
	}
	// Without the socket, the worker's sources are missing from /clients.
	clients, clientsFD, err := clientsPair()
	if err != nil {
		glog.Warningf("supervisor: worker %d's sources will be missing from /clients: %v", slot, err)
	} else {
		defer unix.Close(clientsFD)
		if b == nil {
			files = append(files, uintptr(null)) // descriptor 5 stays a board's
		}
		role += ":" + roleClients
		files = append(files, uintptr(clientsFD))
	}
	fail := func(err error) (Process, Link, error) {
		unix.Close(p[0])
		if b != nil {
			b.Close()
		}
		if clients != nil {
			clients.Close()
		}
		return nil, Link{}, err
	}
	if e.Syslog {
		role += ":" + roleSyslog
	}
	attr := &syscall.ProcAttr{
		Env:   append(workerEnv(os.Environ()), envWorker+"="+role),
		Files: files,
		Sys:   &syscall.SysProcAttr{Pdeathsig: ParentDeathSignal},
	}
	pid, err := syscall.ForkExec(e.Path, append([]string{e.Path}, e.Args...), attr)
	if err != nil {
		return fail(fmt.Errorf("%w: %s: %w", ErrSpawn, e.Path, err))
	}
	proc, err := os.FindProcess(pid)
	if err != nil { // cannot happen on Linux: FindProcess always succeeds
		return fail(fmt.Errorf("%w: pid %d: %w", ErrSpawn, pid, err))
	}
	unix.SetNonblock(p[0], true)
	return osProcess{proc}, Link{Status: newStatusPipe(os.NewFile(uintptr(p[0]), "status")), Board: b, Clients: clients}, nil
}

// statusPipe is the read end of a worker's status pipe, read in Go's
// poller with raw read(2)s: a normal read returning a report every few
// milliseconds would wake the supervisor's sysmon into 1 ms of 20 µs
// polling each time.
type statusPipe struct {
	*os.File
	raw syscall.RawConn
}

func newStatusPipe(f *os.File) io.ReadCloser {
	raw, err := f.SyscallConn()
	if err != nil {
		return f
	}
	return statusPipe{File: f, raw: raw}
}

func (p statusPipe) Read(b []byte) (int, error) {
	var n int
	var rerr error
	err := p.raw.Read(func(fd uintptr) bool {
		for {
			if n, rerr = rawsys.Read(int(fd), b); rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// workerEnv is the supervisor's environment without the variables that
// speak to the supervisor alone: a worker must not answer the detaching
// parent, nor take systemd's sockets for its own.
func workerEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case envDetached, envWorker, "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// osProcess is a real worker process.
type osProcess struct{ p *os.Process }

func (o osProcess) Pid() int                   { return o.p.Pid }
func (o osProcess) Signal(sig os.Signal) error { return o.p.Signal(sig) }

func (o osProcess) Wait() Exit {
	st, err := o.p.Wait()
	if err != nil {
		return Exit{Code: -1, Err: err}
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return Exit{Code: -1, Signal: ws.Signal()}
	}
	return Exit{Code: ws.ExitStatus()}
}
