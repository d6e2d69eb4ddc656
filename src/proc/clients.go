package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/diagnose"
)

// The supervisor's /clients page lists what every worker's table of
// sources holds (see diagnose.Registry). Each worker keeps its table, and
// the supervisor asks for them when the page is asked for, over a socket
// pair per worker: one request line, answered by the table as one line of
// JSON; a worker's last table, sent as its drain ends, is kept once it
// is gone. Nothing is sent while nobody looks, so the workers' hot path and
// their idle wake-ups stay as they are, and a table of 10,000 sources
// (about 1.5 MB of JSON) has no record size to fit, as it would on a
// board.

// clientsRequest is the line by which the supervisor asks for a table.
const clientsRequest = "clients\n"

// finalPrefix starts the line of a worker's last table, which it sends
// unasked once its drain has ended, so that the sources it served stay on
// the page after a reload replaced it.
const finalPrefix = "final "

// clientsTimeout bounds how long the page waits for a worker's table, and
// lastWordsTimeout how long an exited worker's last table may take to be
// read.
const (
	clientsTimeout   = 5 * time.Second
	lastWordsTimeout = 2 * time.Second
)

// ErrNoTable is returned for a worker whose table cannot be asked for.
var ErrNoTable = errors.New("proc: no table of sources")

// tableServer is a worker's end of its socket pair.
type tableServer struct {
	mu    sync.Mutex // one table at a time on the socket
	conn  net.Conn
	table *diagnose.Registry
}

// serve answers the supervisor's requests with the table until the
// socket is closed.
func (t *tableServer) serve() {
	sc := bufio.NewScanner(t.conn)
	for sc.Scan() {
		if t.send("") != nil {
			return
		}
	}
}

// handOver sends the table one last time, unasked, as the worker ends.
func (t *tableServer) handOver() { t.send(finalPrefix) }

func (t *tableServer) send(prefix string) error {
	b, err := json.Marshal(t.table.Sources())
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// A supervisor that stopped reading must not keep a worker from ending.
	t.conn.SetWriteDeadline(time.Now().Add(clientsTimeout))
	_, err = t.conn.Write(append(append([]byte(prefix), b...), '\n'))
	return err
}

// clientsLink is the supervisor's end of one worker's socket pair. Its
// reader reads every line the worker sends, so that neither a late answer
// nor the last table blocks the worker, and hands answers to the query
// waiting for one (an answer nobody waits for is dropped).
type clientsLink struct {
	mu      sync.Mutex // one query at a time
	conn    net.Conn   // nil: the worker has no table to ask for
	answers chan []diagnose.Source
	done    chan struct{} // closed when the worker's end is closed
	final   atomic.Pointer[[]diagnose.Source]
}

func newClientsLink(conn net.Conn) *clientsLink {
	l := &clientsLink{conn: conn, answers: make(chan []diagnose.Source, 1), done: make(chan struct{})}
	if conn == nil {
		close(l.done)
		return l
	}
	go l.read(conn)
	return l
}

func (l *clientsLink) read(conn net.Conn) {
	defer close(l.done)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		final := bytes.HasPrefix(line, []byte(finalPrefix))
		var table []diagnose.Source
		if json.Unmarshal(bytes.TrimPrefix(line, []byte(finalPrefix)), &table) != nil {
			continue
		}
		if final {
			l.final.Store(&table)
			continue
		}
		select {
		case l.answers <- table:
		default:
		}
	}
}

// query asks for the worker's table; a worker that has handed over its
// last one answers with that.
func (l *clientsLink) query(timeout time.Duration) ([]diagnose.Source, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil, ErrNoTable
	}
	select {
	case <-l.answers: // a late answer to a query that gave up
	default:
	}
	l.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := l.conn.Write([]byte(clientsRequest)); err != nil {
		if t := l.final.Load(); t != nil {
			return *t, nil
		}
		return nil, fmt.Errorf("%w: %w", ErrNoTable, err)
	}
	select {
	case t := <-l.answers:
		return t, nil
	case <-l.done:
		if t := l.final.Load(); t != nil {
			return *t, nil
		}
		return nil, fmt.Errorf("%w: the worker closed its socket", ErrNoTable)
	case <-time.After(timeout):
		return nil, fmt.Errorf("%w: no answer within %v", ErrNoTable, timeout)
	}
}

// lastWords is the table an exited worker handed over (nil if none),
// once its end of the socket is closed (the process's exit closes it).
func (l *clientsLink) lastWords(timeout time.Duration) []diagnose.Source {
	select {
	case <-l.done:
	case <-time.After(timeout):
	}
	if t := l.final.Load(); t != nil {
		return *t
	}
	return nil
}

func (l *clientsLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
}

// Clients is every running worker's table of sources, and the last ones
// of the workers that ended, merged into one of at most
// diagnose.DefaultMaxSources, with a note for each running worker whose
// table is missing from it. The workers are asked at once, not one after
// the other.
func (s *Supervisor) Clients() ([]diagnose.Source, []string) {
	s.mu.Lock()
	procs := make([]*workerProc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	tables := make([][]diagnose.Source, len(procs), len(procs)+1)
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tables[i], errs[i] = p.clients.query(clientsTimeout)
		}()
	}
	wg.Wait()
	var notes []string
	for i, err := range errs {
		if err != nil {
			notes = append(notes, fmt.Sprintf("worker %d (pid %d) is missing: %v", procs[i].slot, procs[i].proc.Pid(), err))
		}
	}
	s.mu.Lock()
	tables = append(tables, s.retiredSources)
	s.mu.Unlock()
	return diagnose.Merge(diagnose.DefaultMaxSources, tables...), notes
}

// keepSources keeps the last table of a worker that ended in the page's
// list: a reload replaces every worker, and its sources must not vanish
// with them.
func (s *Supervisor) keepSources(table []diagnose.Source) {
	if len(table) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retiredSources = diagnose.Merge(diagnose.DefaultMaxSources, s.retiredSources, table)
}

// clientsPair makes the socket pair of a worker's table: the supervisor's
// end as a connection, and the worker's as a descriptor (close-on-exec)
// that the caller closes once passed.
func clientsPair() (net.Conn, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("proc: socketpair: %w", err)
	}
	conn, err := fileConn(fds[0], "clients")
	if err != nil {
		unix.Close(fds[1])
		return nil, -1, err
	}
	return conn, fds[1], nil
}

// fileConn makes a connection of the socket fd, which it closes.
func fileConn(fd int, name string) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("proc: %s socket: %w", name, err)
	}
	return conn, nil
}
