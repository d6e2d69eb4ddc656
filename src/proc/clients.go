package proc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/diagnose"
)

// The supervisor's /clients page lists what every worker's table of
// sources holds (see diagnose.Registry). Each worker keeps its table, and
// the supervisor asks for them when the page is asked for, over a socket
// pair per worker: one request line, answered by the table as one line of
// JSON. Nothing is sent while nobody looks, so the workers' hot path and
// their idle wake-ups stay as they are, and a table of 10,000 sources
// (about 1.5 MB of JSON) has no record size to fit, as it would on a
// board.

// clientsRequest is the line by which the supervisor asks for a table.
const clientsRequest = "clients\n"

// clientsTimeout bounds how long the page waits for a worker's table.
const clientsTimeout = 5 * time.Second

// ErrNoTable is returned for a worker whose table cannot be asked for.
var ErrNoTable = errors.New("proc: no table of sources")

// serveClients answers the supervisor's requests on conn with table's
// sources until conn is closed.
func serveClients(conn net.Conn, table *diagnose.Registry) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	enc := json.NewEncoder(conn)
	for sc.Scan() {
		if enc.Encode(table.Sources()) != nil {
			return
		}
	}
}

// clientsLink is the supervisor's end of one worker's socket pair.
type clientsLink struct {
	mu   sync.Mutex
	conn net.Conn // nil once closed
	r    *bufio.Reader
}

func newClientsLink(conn net.Conn) *clientsLink {
	if conn == nil {
		return &clientsLink{}
	}
	return &clientsLink{conn: conn, r: bufio.NewReader(conn)}
}

// query asks for the worker's table. A worker that does not answer in
// time is not asked again: its answer may still come and would be read as
// the next one's.
func (l *clientsLink) query(timeout time.Duration) ([]diagnose.Source, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil, ErrNoTable
	}
	l.conn.SetDeadline(time.Now().Add(timeout))
	var line []byte
	_, err := l.conn.Write([]byte(clientsRequest))
	if err == nil {
		line, err = l.r.ReadBytes('\n')
	}
	var table []diagnose.Source
	if err == nil {
		err = json.Unmarshal(line, &table)
	}
	if err != nil {
		l.closeLocked()
		return nil, fmt.Errorf("%w: %w", ErrNoTable, err)
	}
	return table, nil
}

func (l *clientsLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked()
}

func (l *clientsLink) closeLocked() {
	if l.conn != nil {
		l.conn.Close()
		l.conn, l.r = nil, nil
	}
}

// Clients is every running worker's table of sources merged into one of
// at most diagnose.DefaultMaxSources, with a note for each worker whose
// table is missing from it. The workers are asked at once, not one after
// the other.
func (s *Supervisor) Clients() ([]diagnose.Source, []string) {
	s.mu.Lock()
	procs := make([]*workerProc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	tables := make([][]diagnose.Source, len(procs))
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
	return diagnose.Merge(diagnose.DefaultMaxSources, tables...), notes
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
