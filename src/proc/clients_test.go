package proc

import (
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"nsca_fast/stages/diagnose"
)

// The supervisor's /clients lists the sources of every worker merged: a
// source that both workers saw has the sum of their counts and the last
// error of the worker that saw it last; a worker's table is asked for
// again at each request, and the table of a worker that died is no longer
// asked for.
func TestSupervisorClientsMergesWorkers(t *testing.T) {
	f := &fakeSpawner{tables: true}
	s, _, _ := startSupervisor(t, f, 2, sameN(2))
	w := f.all()
	a, b, both := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	w[0].table.Seen(a, "password/14", "14")
	w[1].table.Failed(b, "bad crc32")
	w[0].table.Failed(both, "bad crc32")
	time.Sleep(10 * time.Millisecond)
	w[1].table.Failed(both, "before a whole packet")
	w[1].table.Seen(both, "old/1", "1")
	page := get(t, s)
	for _, want := range []string{"127.0.0.2\t1\t0\tpassword/14\t14\t", "127.0.0.3\t1\t1\t-\t-\t", "127.0.0.4\t3\t2\told/1\t1\t"} {
		if !strings.Contains(page, want) {
			t.Errorf("/clients lacks %q:\n%s", want, page)
		}
	}
	if !regexp.MustCompile(`(?m)^127\.0\.0\.4\t.*\tbefore a whole packet$`).MatchString(page) {
		t.Errorf("127.0.0.4's last error is not the later worker's:\n%s", page)
	}
	w[0].table.Failed(a, "bad crc32")
	if page := get(t, s); !strings.Contains(page, "127.0.0.2\t2\t1\t") {
		t.Errorf("a second request does not ask the workers again:\n%s", page)
	}
	w[1].crash()
	waitUntil(t, "the dead worker was replaced", func() bool { return len(f.all()) == 3 && len(s.Pids()) == 2 })
	page = get(t, s)
	if strings.Contains(page, "127.0.0.3") || strings.Contains(page, "missing") {
		t.Errorf("/clients after a worker died still lists its source or misses a worker:\n%s", page)
	}
}

// The sources of a worker that a reload replaced stay listed: it hands
// over its last table as it ends, and the supervisor keeps it beside the
// new workers' tables; a source both served is counted once, summed. The
// stop, which retires the workers it finds a second time, counts each
// table once.
func TestSupervisorClientsKeepsReplacedWorkers(t *testing.T) {
	f := &fakeSpawner{tables: true}
	s, sigs, served := startSupervisor(t, f, 1, sameN(1))
	old := f.all()[0]
	a := netip.MustParseAddr("127.0.0.2")
	old.table.Failed(a, "bad crc32")
	old.table.Failed(netip.MustParseAddr("127.0.0.3"), "bad crc32")
	sigs <- syscall.SIGHUP
	waitUntil(t, "the old worker is gone", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.procs) == 1 && len(s.retiredSources) > 0
	})
	f.all()[1].table.Failed(a, "before a whole packet")
	page := get(t, s)
	if !strings.Contains(page, "127.0.0.2\t2\t2\t") || !strings.Contains(page, "127.0.0.3\t1\t1\t") {
		t.Errorf("/clients after a reload lacks the replaced worker's sources:\n%s", page)
	}
	sigs <- syscall.SIGTERM
	<-served
	if page := get(t, s); !strings.Contains(page, "127.0.0.2\t2\t2\t") || !strings.Contains(page, "127.0.0.3\t1\t1\t") {
		t.Errorf("/clients after the stop counts a table twice or lost one:\n%s", page)
	}
}

// A worker without a table (its socket could not be made, or it did not
// answer) is named on the page; the other workers' sources are listed.
func TestSupervisorClientsNamesMissingWorker(t *testing.T) {
	f := &fakeSpawner{tables: true}
	s, _, _ := startSupervisor(t, f, 2, sameN(2))
	w := f.all()
	w[0].table.Seen(netip.MustParseAddr("127.0.0.2"), "password/14", "14")
	s.mu.Lock()
	for p := range s.procs {
		if p.slot == 1 {
			p.clients.close()
		}
	}
	s.mu.Unlock()
	page := get(t, s)
	if !strings.Contains(page, "# worker 1 (pid ") || !strings.Contains(page, "is missing") || !strings.Contains(page, "127.0.0.2\t1\t") {
		t.Errorf("/clients does not name the missing worker beside the other's sources:\n%s", page)
	}
}

func get(t *testing.T, s *Supervisor) string {
	t.Helper()
	rec := httptest.NewRecorder()
	diagnose.Handler(s.Clients).ServeHTTP(rec, httptest.NewRequest("GET", "/clients", nil))
	return rec.Body.String()
}

// BenchmarkClientsQuery: one /clients request's round trip to a worker
// holding a full table (10,000 sources, each with a last error), over a
// real socket pair: the worker's encoding and the supervisor's decoding.
func BenchmarkClientsQuery(b *testing.B) {
	table := diagnose.NewRegistry()
	for i := range diagnose.DefaultMaxSources {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		table.Failed(addr, "diagnosis: sends packets that no known password decrypts with any method: it uses a password this server does not know")
	}
	conn, fd, err := clientsPair()
	if err != nil {
		b.Fatal(err)
	}
	worker, err := fileConn(fd, "worker")
	if err != nil {
		b.Fatal(err)
	}
	go (&tableServer{conn: worker, table: table}).serve()
	l := newClientsLink(conn)
	defer l.close()
	b.ResetTimer()
	for range b.N {
		if t, err := l.query(clientsTimeout); err != nil || len(t) != diagnose.DefaultMaxSources {
			b.Fatalf("%d sources, %v", len(t), err)
		}
	}
}
