package tests

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Reliability tests (issue 4): accounting, slowloris and connection limits,
// the command file's failure modes, shutdown under load, hostile input,
// access control and metrics. Helpers here are prefixed rel.

const relPassword = "rel-secret"

// relCfg is a configuration for XOR with relPassword plus extra.
func relCfg(extra Config) Config {
	return merge(Config{"password": relPassword, "decryption_method": "1"}, extra)
}

// relPacket is a 4304-byte packet for r, XOR-encrypted with relPassword.
func relPacket(r *rawConn, rc int16, host, svc, out string) []byte {
	return r.packet(packetSize, r.ts, rc, host, svc, out, 1, relPassword)
}

// relPlain is a 4304-byte packet in clear text, version and CRC chosen by
// the caller, with NUL padding (no random filler).
func relPlain(version int16, rc int16, host, svc, out string, ts uint32) []byte {
	p := make([]byte, packetSize)
	binary.BigEndian.PutUint16(p[0:], uint16(version))
	binary.BigEndian.PutUint32(p[8:], ts)
	binary.BigEndian.PutUint16(p[12:], uint16(rc))
	copy(p[14:14+64], host)
	copy(p[78:78+128], svc)
	copy(p[206:206+4096], out)
	binary.BigEndian.PutUint32(p[4:], crc32.ChecksumIEEE(p))
	return p
}

// relSend sends checks on one connection from local and closes it.
func relSend(port int, local string, checks []rawCheck) error {
	return relSendWithin(port, local, 5*time.Second, checks)
}

// relSendWithin is relSend waiting up to dialTimeout for the connection
// and the init packet.
func relSendWithin(port int, local string, dialTimeout time.Duration, checks []rawCheck) error {
	r, err := dialInit(port, local, dialTimeout)
	if err != nil {
		return err
	}
	defer r.c.Close()
	r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Write(r.packets(relPassword, checks)); err != nil {
		return err
	}
	return r.c.Close()
}

// relParallel calls send(i) for every i in [0, n), concurrency at a time,
// and returns the ids of the checks they sent; an error of send(i) fails
// the test, naming i as what.
func relParallel(t *testing.T, n, concurrency int, what string, send func(i int) ([]string, error)) []string {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent []string
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ids, err := send(i)
				if err != nil {
					t.Errorf("%s %d: %v", what, i, err)
				}
				mu.Lock()
				sent = append(sent, ids...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sent
}

// relStream is a steady load of raw clients: each of its clients opens a
// connection, sends perConn checks whose output starts with "id=<id> ",
// closes, pauses gap and starts over, until Stop. A check counts as sent
// once its connection was written in full and closed without error.
type relStream struct {
	port    int
	prefix  string
	perConn int
	fill    string
	gap     time.Duration
	local   string
	target  func(client, seq int) (host, svc string)

	stop     chan struct{}
	wg       sync.WaitGroup
	paused   atomic.Bool
	inflight atomic.Int64
	mu       sync.Mutex
	sent     []string
	failures int
	lastErr  error
}

func relNewStream(port int, prefix string, perConn, outSize int, gap time.Duration) *relStream {
	return &relStream{port: port, prefix: prefix, perConn: perConn, fill: strings.Repeat("x", outSize), gap: gap,
		target: func(c, _ int) (string, string) { return "relhost", fmt.Sprintf("svc%02d", c) },
		stop:   make(chan struct{})}
}

func (s *relStream) Start(clients int) *relStream {
	for c := range clients {
		s.wg.Add(1)
		go s.client(c)
	}
	return s
}

func (s *relStream) id(c, seq int) string { return fmt.Sprintf("%s%02d-%06d", s.prefix, c, seq) }

func (s *relStream) client(c int) {
	defer s.wg.Done()
	seq := 0
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		if s.paused.Load() {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		s.inflight.Add(1)
		if s.paused.Load() {
			s.inflight.Add(-1)
			continue
		}
		ids, err := s.conn(c, seq)
		s.inflight.Add(-1)
		seq += s.perConn
		s.mu.Lock()
		if err == nil {
			s.sent = append(s.sent, ids...)
		} else {
			s.failures++
			s.lastErr = err
		}
		s.mu.Unlock()
		if s.gap > 0 {
			select {
			case <-s.stop:
				return
			case <-time.After(s.gap):
			}
		}
	}
}

func (s *relStream) conn(c, seq int) ([]string, error) {
	var checks []rawCheck
	var ids []string
	for i := range s.perConn {
		id := s.id(c, seq+i)
		host, svc := s.target(c, seq+i)
		checks = append(checks, rawCheck{0, host, svc, relOutput(id, s.fill)})
		ids = append(ids, id)
	}
	if err := relSendWithin(s.port, s.local, 3*time.Second, checks); err != nil {
		return nil, err
	}
	return ids, nil
}

func relOutput(id, fill string) string { return "id=" + id + " " + fill }

// Pause stops the clients from starting connections and waits until none
// is in flight.
func (s *relStream) Pause() {
	s.paused.Store(true)
	waitFor(10*time.Second, func() bool { return s.inflight.Load() == 0 })
}

func (s *relStream) Resume() { s.paused.Store(false) }

// Sent is the number of checks sent so far.
func (s *relStream) Sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// Stop ends the clients and returns the ids of the checks sent.
func (s *relStream) Stop() []string {
	close(s.stop)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sent...)
}

func (s *relStream) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d checks sent, %d connections failed (last error: %v)", len(s.sent), s.failures, s.lastErr)
}

var relIDRe = regexp.MustCompile(`id=([A-Za-z0-9]+-[0-9]+)`)

// relCommandLineRe matches a whole command line from a relStream check.
var relCommandLineRe = regexp.MustCompile(`^\[\d+\] PROCESS_SERVICE_CHECK_RESULT;[^;]+;[^;]+;0;id=([A-Za-z0-9]+-[0-9]+) x*$`)

// relLineIDs returns the ids of command lines; lines that are not whole
// relStream lines are returned as bad.
func relLineIDs(lines []string) (ids, bad []string) {
	for _, l := range lines {
		m := relCommandLineRe.FindStringSubmatch(l)
		if m == nil {
			bad = append(bad, l)
			continue
		}
		ids = append(ids, m[1])
	}
	return ids, bad
}

// relSpoolIDs returns the ids of the result files in dir that have their
// .ok, and the number of result files.
func relSpoolIDs(t *testing.T, dir string) ([]string, int) {
	t.Helper()
	entries, names := readDirNames(t, dir)
	var ids []string
	files := 0
	outputRe := regexp.MustCompile(`(?m)^output=(.*)$`)
	for _, e := range entries {
		if !spoolName.MatchString(e.Name()) || !names[e.Name()+".ok"] {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // taken by the core meanwhile
		}
		files++
		if m := outputRe.FindSubmatch(b); m != nil {
			if id := relIDRe.FindSubmatch(m[1]); id != nil {
				ids = append(ids, string(id[1]))
			}
		}
	}
	return ids, files
}

// relOnce checks that every sent id was delivered exactly once over the
// places, and that nothing was delivered twice; it returns the sent ids
// that were delivered nowhere.
func relOnce(t *testing.T, sent []string, places map[string][]string) (missing []string) {
	t.Helper()
	where := map[string][]string{}
	for place, ids := range places {
		for _, id := range ids {
			where[id] = append(where[id], place)
		}
	}
	var dups []string
	for id, ps := range where {
		if len(ps) > 1 {
			dups = append(dups, fmt.Sprintf("%s in %v", id, ps))
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		t.Errorf("%d checks delivered more than once, e.g. %v", len(dups), dups[:min(len(dups), 10)])
	}
	for _, id := range sent {
		if len(where[id]) == 0 {
			missing = append(missing, id)
		}
	}
	return missing
}

// relCore plays the monitoring core on a FIFO: it opens it O_RDWR (as
// Nagios does), reads what arrives into one buffer, and can stop reading
// (a stalled core), close the FIFO (a core that exits) and open it again.
type relCore struct {
	path string
	mu   sync.Mutex
	data []byte
	f    *os.File
	// reading is false while the core stalls with the FIFO open.
	reading  bool
	openedAt time.Time
	first    time.Time // first data read after openedAt
	last     time.Time // last data read
	resumed  time.Time // last Resume
	quit     chan struct{}
	done     chan struct{}
}

func relNewCore(t *testing.T, path string) *relCore {
	c := &relCore{path: path, quit: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	t.Cleanup(func() {
		close(c.quit)
		<-c.done
		c.mu.Lock()
		if c.f != nil {
			c.f.Close()
			c.f = nil
		}
		c.mu.Unlock()
	})
	return c
}

func (c *relCore) loop() {
	defer close(c.done)
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-c.quit:
			return
		default:
		}
		c.mu.Lock()
		f, reading := c.f, c.reading
		c.mu.Unlock()
		if f == nil || !reading {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		f.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, _ := f.Read(buf)
		if n > 0 {
			now := time.Now()
			c.mu.Lock()
			c.data = append(c.data, buf[:n]...)
			if c.first.IsZero() {
				c.first = now
			}
			c.last = now
			c.mu.Unlock()
		}
	}
}

// Open opens the FIFO for reading and starts reading.
func (c *relCore) Open(t *testing.T) {
	t.Helper()
	f := openRDWR(t, c.path)
	c.mu.Lock()
	c.f, c.reading, c.openedAt, c.first = f, true, time.Now(), time.Time{}
	c.mu.Unlock()
}

// reopen opens the FIFO and waits until the daemon writes to it again
// (within its back-off), then a moment longer.
func (c *relCore) reopen(t *testing.T) {
	t.Helper()
	c.Open(t)
	waitFor(8*time.Second, func() bool { return c.FirstSinceOpen() >= 0 })
	time.Sleep(500 * time.Millisecond)
}

// Close closes the FIFO: the core is gone.
func (c *relCore) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

func (c *relCore) Pause() {
	c.mu.Lock()
	c.reading = false
	c.mu.Unlock()
	time.Sleep(60 * time.Millisecond) // a read in progress ends within its deadline
}

func (c *relCore) Resume() {
	c.mu.Lock()
	c.reading, c.resumed = true, time.Now()
	c.mu.Unlock()
}

// FirstSinceOpen is how long after the last Open the first data came, or
// -1 if none came.
func (c *relCore) FirstSinceOpen() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		return -1
	}
	return c.first.Sub(c.openedAt)
}

// Lines returns the complete lines read so far.
func (c *relCore) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return completeLines(string(c.data))
}

// Quiet waits until nothing has been read for d (bounded by timeout).
func (c *relCore) Quiet(d, timeout time.Duration) {
	waitFor(timeout, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		since := c.last
		if c.resumed.After(since) {
			since = c.resumed
		}
		return time.Since(since) >= d
	})
}

// relParseDrained finds the last "pipeline drained:" line in the daemon's
// output and checks that it balances: received = emitted + dropped, and
// nothing is left queued.
func relParseDrained(t *testing.T, stderr string) stats {
	t.Helper()
	all := statsLines(stderr, "pipeline drained")
	if len(all) == 0 {
		t.Fatalf("no `pipeline drained:` line in the daemon's output")
	}
	d := all[len(all)-1]
	if d.received != sum(d.emitted)+sum(d.dropped) || d.success != sum(d.emitted) || d.failed != sum(d.dropped) || d.queued != 0 {
		t.Errorf("the final statistics do not balance (want received = emitted + dropped, report_success = sum of emitted, report_failed = sum of dropped, queued = 0):\n%s", d.line)
	}
	return d
}

// relDropLog is, for each drop reason, what the log line that reports it
// says after the peer address.
var relDropLog = map[string]string{
	"bad_version":     `closing connection from %s: dropped packet \d+: packet: bad version`,
	"bad_crc":         `closing connection from %s: dropped packet \d+: packet: bad crc32`,
	"short_packet":    `dropped short packet from %s: connection ended`,
	"stale":           `closing connection from %s: dropped packet \d+: validate: stale packet`,
	"too_many_checks": `closing connection from %s: dropped packet \d+: validate: too many checks`,
	"spoofed_host":    `refused check from %s: validate: host name does not resolve`,
	"bad_name":        `refused check from %s: validate: a name no core can hold`,
	"unauthorized":    `refused check from %s: validate: not authorized`,
	// Packets after a rejected one on the same connection are reported by
	// the line that rejects the first and closes the connection.
	"after_reject": `closing connection from %s: dropped packet \d+: `,
}

// relCheckDropLogs asserts that every drop reason counted has a log line
// naming it and a peer matching peerRe.
func relCheckDropLogs(t *testing.T, stderr string, dropped map[string]uint64, peerRe string) {
	t.Helper()
	for reason, n := range dropped {
		if n == 0 {
			continue
		}
		pattern, ok := relDropLog[reason]
		if reason == "sink_failed" {
			pattern, ok = `dropped check host=".*" service=".*": no sink could take it`, true
		} else if ok {
			pattern = fmt.Sprintf(pattern, peerRe)
		}
		if !ok {
			t.Errorf("dropped{%s=%d}: no known log line for this reason", reason, n)
			continue
		}
		if len(grepLines(stderr, regexp.MustCompile(pattern))) == 0 {
			t.Errorf("dropped{%s=%d} is counted but no log line matches %q", reason, n, pattern)
		}
	}
}

// relScrape reads /metrics as "name{labels}" → value.
func relScrape(addr string) (map[string]float64, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

// relMetricsBalanced waits until the metrics show an idle pipeline whose
// counters balance: received (the decrypt stage's packets) = emitted +
// dropped, each total the sum of its labels, nothing queued, no connection
// open, and ready(m) says "" (what the test did has been counted: a
// connection's end is counted a moment after it is closed). It returns the
// last scrape.
func relMetricsBalanced(t *testing.T, addr string, ready func(m map[string]float64) string) map[string]float64 {
	t.Helper()
	var m map[string]float64
	var err error
	var why string
	ok := waitFor(10*time.Second, func() bool {
		m, err = relScrape(addr)
		if err != nil {
			why = err.Error()
			return false
		}
		if ready != nil {
			if why = ready(m); why != "" {
				return false
			}
		}
		var emitted, dropped float64
		for k, v := range m {
			switch {
			case strings.HasPrefix(k, "nsca_results_emitted_total{"):
				emitted += v
			case strings.HasPrefix(k, "nsca_results_dropped_total{"):
				dropped += v
			}
		}
		received := m[`nsca_stage_items_total{stage="decrypt"}`]
		switch {
		case m["nsca_connections_open"] != 0 || m["nsca_results_queued"] != 0:
			why = fmt.Sprintf("connections_open=%v results_queued=%v", m["nsca_connections_open"], m["nsca_results_queued"])
			return false
		case received != emitted+dropped:
			why = fmt.Sprintf("received %v != emitted %v + dropped %v", received, emitted, dropped)
			return false
		}
		return true
	})
	if !ok {
		t.Fatalf("the metrics on %s did not settle into a balanced, idle state within 10 s: %s", addr, why)
	}
	return m
}

func relMetricsAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
}

// TestRelAccounting (issue 4.1): after a mixed run of good checks, a wrong
// password, a corrupted CRC and truncated packets, /metrics (before
// shutdown) and the final "pipeline drained:" line balance: received =
// emitted + dropped; and every drop reason is logged with the peer.
func TestRelAccounting(t *testing.T) {
	_, fifo, core := relFIFO(t, true)
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"command_file": fifo, "metrics_address": metrics}))
	good := Client{Password: relPassword, Method: 1}
	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, "acct\tsvc%d\t%d\tgood %d\x17", i, i%4, i)
	}
	good.send(t, d.Port, in.String(), 5)
	good.send(t, d.Port, in.String(), 5)
	// A wrong password (first two bytes differ, so the version is wrong):
	// send_nsca may die of SIGPIPE when the daemon closes on it.
	(Client{Password: "XX" + relPassword, Method: 1}).sendRejected(t, d.Port, "wrong\tsvc\t0\tmust not arrive\x17wrong\tsvc\t1\tnor this\x17")
	// A corrupted CRC, then two good packets on the same connection.
	r := dialRaw(t, d.Port, "127.0.0.21")
	bad := relPlain(3, 0, "acct", "crc", "bad crc", r.ts)
	bad[300] ^= 0x55
	b := r.xor(bad, relPassword)
	b = append(b, relPacket(r, 0, "acct", "after", "after a bad crc")...)
	b = append(b, relPacket(r, 0, "acct", "after", "after a bad crc")...)
	r.c.Write(b)
	waitClosed(r.c, 5*time.Second)
	r.c.Close()
	// One good packet, then half of one.
	r = dialRaw(t, d.Port, "127.0.0.22")
	b = relPacket(r, 1, "acct", "trunc", "complete before a cut")
	b = append(b, relPacket(r, 0, "acct", "trunc", "cut")[:packetSize/2]...)
	r.c.Write(b)
	r.c.Close()
	// One byte.
	r = dialRaw(t, d.Port, "127.0.0.23")
	r.c.Write([]byte{3})
	r.c.Close()

	const wantGood = 11
	if !waitFor(arriveTimeout, func() bool { return len(core.Lines()) >= wantGood }) {
		t.Fatalf("%d lines in the FIFO, want %d", len(core.Lines()), wantGood)
	}
	m := relMetricsBalanced(t, metrics, func(m map[string]float64) string {
		for _, reason := range []string{"bad_version", "bad_crc"} {
			if m[`nsca_results_dropped_total{reason="`+reason+`"}`] < 1 {
				return "no " + reason + " counted yet"
			}
		}
		if m[`nsca_results_dropped_total{reason="short_packet"}`] < 1 || m["nsca_connections_incomplete_total"] < 1 {
			return "the short packet or the one-byte connection not counted yet"
		}
		return ""
	})
	if got := m[`nsca_results_emitted_total{sink="fifo"}`]; got != wantGood {
		t.Errorf(`nsca_results_emitted_total{sink="fifo"} = %v, want %d`, got, wantGood)
	}

	d.Signal(syscall.SIGTERM)
	d.Stop()
	dr := relParseDrained(t, d.Stderr())
	if dr.received != uint64(m[`nsca_stage_items_total{stage="decrypt"}`]) {
		t.Errorf("the final line says received=%d, /metrics said %v before shutdown (nothing was sent in between)", dr.received, m[`nsca_stage_items_total{stage="decrypt"}`])
	}
	if dr.emitted["fifo"] != wantGood {
		t.Errorf("emitted{fifo=%d}, want %d: %s", dr.emitted["fifo"], wantGood, dr.line)
	}
	// The wrong password's stream after its first packet, and the good
	// packets after the bad CRC, are not short packets (see also
	// TestRelAfterRejectReason); the one-byte connection carried no check:
	// it is an incomplete connection.
	if dr.dropped["short_packet"] != 1 || dr.dropped["bad_crc"] != 1 || dr.dropped["bad_version"] != 1 {
		t.Errorf("want dropped short_packet=1, bad_crc=1, bad_version=1 (after_reject as many as were read): %s", dr.line)
	}
	if got := m["nsca_connections_incomplete_total"]; got != 1 || !strings.Contains(dr.line, "incomplete=1,") {
		t.Errorf("nsca_connections_incomplete_total = %v, want 1, and incomplete=1 in the final line: %s", got, dr.line)
	}
	relCheckDropLogs(t, d.Stderr(), dr.dropped, `127\.0\.0\.\d+:\d+`)
	// Each reason names the very peer that caused it.
	for _, want := range []string{
		`closing connection from 127\.0\.0\.1:\d+: dropped packet 1: packet: bad version`,
		`closing connection from 127\.0\.0\.21:\d+: dropped packet 1: packet: bad crc32`,
		`dropped short packet from 127\.0\.0\.22:\d+: connection ended \(client closed\) after 2152 of 4304 bytes`,
		`connection from 127\.0\.0\.23:\d+ ended \(client closed\) after 1 bytes, before a whole packet`,
	} {
		if len(grepLines(d.Stderr(), regexp.MustCompile(want))) == 0 {
			t.Errorf("no log line matches %q", want)
		}
	}
	if t.Failed() {
		t.Logf("daemon stderr:\n%s", d.Stderr())
	}
}

// TestRelAfterRejectReason: bytes that follow a rejected packet on the
// same connection are dropped as after_reject, including an incomplete
// packet at the end; they are not reported as a short packet from a client
// that "did not finish sending" (the client's problem is the rejected
// packet). One connection sends 200 good packets (with debug=1 validation
// logs each, so it runs behind decryption), a version 2 packet and 1000
// bytes of another packet, then closes.
func TestRelAfterRejectReason(t *testing.T) {
	cmd := commandFile(t, t.TempDir())
	d := startDaemon(t, relCfg(Config{"command_file": cmd, "append_to_file": "1", "debug": "1"}))
	r, err := dialInit(d.Port, "127.0.0.24", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	peer := r.c.LocalAddr().String()
	const good = 200
	var b []byte
	for i := range good {
		b = append(b, relPacket(r, 0, "rej", "svc", fmt.Sprintf("good %d", i))...)
	}
	b = append(b, r.xor(relPlain(2, 0, "rej", "svc", "version 2", r.ts), relPassword)...)
	b = append(b, relPacket(r, 0, "rej", "svc", "after")[:1000]...)
	go func() {
		r.c.Write(b)
		r.c.Close()
	}()
	waitFileLines(t, cmd, good)
	waitFor(2*time.Second, func() bool { return strings.Contains(d.Stderr(), "closing connection from "+peer) })
	time.Sleep(200 * time.Millisecond)
	d.Signal(syscall.SIGTERM)
	d.Stop()
	dr := relParseDrained(t, d.Stderr())
	if dr.emitted["file"] != good || dr.dropped["bad_version"] != 1 || dr.dropped["after_reject"] != 1 || dr.dropped["short_packet"] != 0 {
		t.Errorf("want emitted{file=%d}, dropped{after_reject=1,bad_version=1} and no short_packet: %s", good, dr.line)
	}
	if l := grepLines(d.Stderr(), regexp.MustCompile(`dropped short packet from `+regexp.QuoteMeta(peer))); len(l) > 0 {
		t.Errorf("the tail after a rejected packet is logged as a short packet from a client that closed:\n%s", strings.Join(l, "\n"))
	}
}

// TestRelMetrics (issue 4.7): /metrics counts exactly what the test did.
func TestRelMetrics(t *testing.T) {
	_, fifo, core := relFIFO(t, true)
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"command_file": fifo, "metrics_address": metrics, "allowed_hosts": "127.0.0.0/24"}))
	before := relMetricsBalanced(t, metrics, nil)

	// Three good connections: 2 + 1 service checks and a host check.
	for _, cs := range [][]rawCheck{
		{{0, "m1", "svc", "one"}, {1, "m1", "svc2", "two"}},
		{{2, "m2", "svc", "three"}},
		{{1, "m3", "", "host down"}},
	} {
		if err := relSend(d.Port, "127.0.0.31", cs); err != nil {
			t.Fatal(err)
		}
	}
	// A bad CRC, a version 2 packet, and 100 bytes of a packet: one
	// connection each. The last never sent a whole packet: it counts as an
	// incomplete connection, not as a check.
	r := dialRaw(t, d.Port, "127.0.0.32")
	p := relPlain(3, 0, "m4", "svc", "crc", r.ts)
	p[4] ^= 1
	r.c.Write(r.xor(p, relPassword))
	waitClosed(r.c, 5*time.Second)
	r.c.Close()
	r = dialRaw(t, d.Port, "127.0.0.32")
	r.c.Write(r.xor(relPlain(2, 0, "m5", "svc", "version 2", r.ts), relPassword)[:legacyPacketSize])
	waitClosed(r.c, 5*time.Second)
	r.c.Close()
	r = dialRaw(t, d.Port, "127.0.0.32")
	r.c.Write(relPacket(r, 0, "m6", "svc", "short")[:100])
	r.c.Close()
	// Refused by allowed_hosts.
	if c, err := dialLocal(d.Port, "127.0.1.1", 5*time.Second); err == nil {
		waitClosed(c, 5*time.Second)
		c.Close()
	}
	if !waitFor(arriveTimeout, func() bool { return len(core.Lines()) >= 4 }) {
		t.Fatalf("%d lines in the FIFO, want 4", len(core.Lines()))
	}
	want := map[string]float64{
		"nsca_connections_total":                            6,
		"nsca_connections_refused_total":                    1,
		"nsca_connections_incomplete_total":                 1,
		`nsca_results_emitted_total{sink="fifo"}`:           4,
		`nsca_results_dropped_total{reason="bad_crc"}`:      1,
		`nsca_results_dropped_total{reason="bad_version"}`:  1,
		`nsca_results_dropped_total{reason="short_packet"}`: 0,
		`nsca_stage_items_total{stage="decrypt"}`:           6,
		`nsca_stage_items_total{stage="validate"}`:          4,
		"nsca_read_bytes_total":                             4*packetSize + packetSize + legacyPacketSize + 100,
	}
	differences := func(after map[string]float64) (diff []string) {
		for name, w := range want {
			if got := after[name] - before[name]; got != w {
				diff = append(diff, fmt.Sprintf("%s went up by %v, want %v (before %v, after %v)", name, got, w, before[name], after[name]))
			}
		}
		sort.Strings(diff)
		return diff
	}
	// Wait until everything is counted, then compare.
	after := relMetricsBalanced(t, metrics, func(m map[string]float64) string {
		if m[`nsca_stage_items_total{stage="decrypt"}`]-before[`nsca_stage_items_total{stage="decrypt"}`] < 6 ||
			m["nsca_connections_incomplete_total"]-before["nsca_connections_incomplete_total"] < 1 ||
			m["nsca_connections_refused_total"]-before["nsca_connections_refused_total"] < 1 {
			return "not everything counted yet: " + strings.Join(differences(m), "; ")
		}
		return ""
	})
	for _, diff := range differences(after) {
		t.Error(diff)
	}
	for _, name := range []string{`nsca_results_dropped_total{reason="after_reject"}`, `nsca_results_dropped_total{reason="sink_failed"}`} {
		if got := after[name] - before[name]; got != 0 {
			t.Errorf("%s went up by %v, want 0", name, got)
		}
	}
	if t.Failed() {
		t.Logf("daemon stderr:\n%s", d.Stderr())
	}
}

// relRaiseNofile raises RLIMIT_NOFILE of the test process, which daemons
// it starts inherit, to at least want (root may raise the hard limit).
func relRaiseNofile(t *testing.T, want uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	rl := old
	rl.Max = max(rl.Max, want)
	rl.Cur = max(rl.Cur, want)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("raising RLIMIT_NOFILE from %d/%d to %d: %v", old.Cur, old.Max, want, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestRelSlowloris (issue 4.2): 2000 connections that send one byte a
// second do not keep a good client from being served; they are closed
// after connection_timeout with a "timeout" log line; connections beyond
// max_connections are closed at once, with a rate-limited log line. The
// slow clients, the connections over the limit and the good client come
// from different loopback addresses, since the daemon rate-limits its log
// per peer address.
func TestRelSlowloris(t *testing.T) {
	const slow = 2000
	const maxConn = slow + 2
	relRaiseNofile(t, 3*slow+1000)
	d, cmd := startFileDaemon(t, 1, relPassword, Config{"connection_timeout": "2", "max_connections": strconv.Itoa(maxConn)})
	time.Sleep(300 * time.Millisecond) // the daemon sees the end of startDaemon's probe

	type slowConn struct {
		c              net.Conn
		opened, closed time.Time
	}
	conns := make([]*slowConn, slow)
	t.Cleanup(func() {
		for _, sc := range conns {
			if sc != nil {
				sc.c.Close()
			}
		}
	})
	var openErr atomic.Value
	var wg sync.WaitGroup
	var next atomic.Int64
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= slow {
					return
				}
				r, err := dialInit(d.Port, "127.0.0.3", 5*time.Second)
				if err != nil {
					openErr.Store(fmt.Errorf("slow connection %d: %w", i, err))
					return
				}
				conns[i] = &slowConn{c: r.c, opened: time.Now()}
			}
		}()
	}
	wg.Wait()
	if err, _ := openErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	t.Logf("opened %d slow connections in %v", slow, time.Since(start))
	var closedMu sync.Mutex
	var readers sync.WaitGroup
	for _, sc := range conns {
		readers.Add(1)
		go func() {
			defer readers.Done()
			waitClosed(sc.c, 15*time.Second)
			closedMu.Lock()
			sc.closed = time.Now()
			closedMu.Unlock()
		}()
	}
	stopWriting := make(chan struct{})
	go func() { // one byte per second on every slow connection
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, sc := range conns {
				sc.c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				sc.c.Write([]byte{'s'})
			}
			select {
			case <-stopWriting:
				return
			case <-tick.C:
			}
		}
	}()
	defer close(stopWriting)
	stillOpen := func() int {
		closedMu.Lock()
		defer closedMu.Unlock()
		n := 0
		for _, sc := range conns {
			if sc.closed.IsZero() {
				n++
			}
		}
		return n
	}

	// Fill up to max_connections, then 30 more: each is closed at once,
	// before any init packet.
	var fillers []net.Conn
	for range maxConn - slow {
		r, err := dialInit(d.Port, "127.0.0.3", 5*time.Second)
		if err != nil {
			t.Fatalf("a connection within max_connections: %v", err)
		}
		fillers = append(fillers, r.c)
	}
	const extra = 30
	for i := range extra {
		c, err := dialLocal(d.Port, "127.0.0.4", 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d over the limit: dial: %v", i, err)
		}
		began := time.Now()
		n, closed := waitClosed(c, 2*time.Second)
		c.Close()
		if !closed || n != 0 {
			t.Errorf("connection %d over max_connections=%d: read %d bytes, closed=%v within %v; want closed at once with no init packet", i, maxConn, n, closed, time.Since(began))
		}
	}
	for _, c := range fillers {
		c.Close()
	}
	time.Sleep(200 * time.Millisecond) // the daemon sees the fillers go

	// A good client gets through while the slow ones are still connected.
	began := time.Now()
	lo := now()
	Client{Password: relPassword, Method: 1}.send(t, d.Port, "good\tsvc\t0\tthrough the slowloris\x17", 1)
	waitFileLines(t, cmd, 1)
	took := time.Since(began)
	open := stillOpen()
	t.Logf("good client delivered in %v with %d of %d slow connections open", took, open, slow)
	if took > 3*time.Second {
		t.Errorf("the good client took %v to be delivered, want a couple of seconds at most", took)
	}
	if open < slow*9/10 {
		t.Errorf("only %d of %d slow connections were still open when the good client was delivered: the test did not load the daemon as meant", open, slow)
	}

	// The slow ones are closed after connection_timeout=2.
	readers.Wait()
	var early, late []time.Duration
	for _, sc := range conns {
		lived := sc.closed.Sub(sc.opened)
		switch {
		case lived < 1500*time.Millisecond:
			early = append(early, lived)
		case lived > 5*time.Second:
			late = append(late, lived)
		}
	}
	if len(early) > 0 || len(late) > 0 {
		t.Errorf("slow connections should be closed 2 to 5 s after they opened (connection_timeout=2, checked every 0.5 s): %d closed too early (e.g. %v), %d too late (e.g. %v)", len(early), early[:min(len(early), 3)], len(late), late[:min(len(late), 3)])
	}
	stderr := d.Stderr()
	if n := len(grepLines(stderr, regexp.MustCompile(`closing connection from 127\.0\.0\.3:\d+: timeout`))); n == 0 {
		t.Errorf("no `closing connection from 127.0.0.3:PORT: timeout` log line")
	}
	refused := grepLines(stderr, regexp.MustCompile(fmt.Sprintf(`refused connection from 127\.0\.0\.4:\d+: max_connections=%d reached`, maxConn)))
	if len(refused) == 0 || len(refused) > 5 {
		t.Errorf("%d log lines for %d connections refused over max_connections, want at least 1 and at most 5 (rate-limited)", len(refused), extra)
	}
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), []string{serviceLine("good", "svc", 0, "through the slowloris")})
	if t.Failed() {
		t.Logf("daemon stderr (first 3000 bytes):\n%s", stderr[:min(len(stderr), 3000)])
	}
}

// TestRelFIFO (issue 4.3): the command file's failure modes, each under a
// stream of results; every result must end up in exactly one place.
func TestRelFIFO(t *testing.T) {
	t.Run("core-down-then-up", func(t *testing.T) {
		// (a) The FIFO exists but nobody reads it (ENXIO): results go to the
		// spool; once a reader appears they go to the FIFO again, within the
		// daemon's back-off (at most 6.4 s).
		t.Parallel()
		dir, fifo, core := relFIFO(t, false)
		spool := makeSpoolDir(t, dir)
		d := startDaemon(t, relCfg(Config{"command_file": fifo, "check_result_path": spool}))
		s := relNewStream(d.Port, "a", 5, 100, 50*time.Millisecond).Start(3)
		time.Sleep(1500 * time.Millisecond)
		core.reopen(t)
		sent, fifoIDs, spoolIDs := relStopAndCollect(t, d, s, core, spool)
		if back := core.FirstSinceOpen(); back < 0 || back > 7*time.Second {
			t.Errorf("the FIFO got results %v after its reader appeared, want within the 6.4 s back-off", back)
		} else {
			t.Logf("FIFO used again %v after the reader appeared; %d results in the FIFO, %d in the spool (%s)", back, len(fifoIDs), len(spoolIDs), s.summary())
		}
		if len(spoolIDs) == 0 {
			t.Errorf("nothing went to the spool while the FIFO had no reader")
		}
		relAssertDelivered(t, d, sent, fifoIDs, spoolIDs)
	})

	t.Run("missing-fifo-dump", func(t *testing.T) {
		// (b) The command file does not exist (ENOENT) and there is no spool:
		// results go to alternate_dump_file; when the core creates its FIFO
		// they go there, and when it is removed again, back to the dump.
		t.Parallel()
		dir := t.TempDir()
		fifo := filepath.Join(dir, "nagios.cmd")
		dump := filepath.Join(dir, "nsca.dump")
		d := startDaemon(t, relCfg(Config{"command_file": fifo, "alternate_dump_file": dump}))
		var sent []string
		send := func(id string) {
			t.Helper()
			if err := relSend(d.Port, "", []rawCheck{{0, "relhost", "svc", relOutput(id, "x")}}); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, id)
		}
		dumpIDs := func() []string {
			ids, bad := relLineIDs(completeLines(readFile(t, dump)))
			if len(bad) > 0 {
				t.Errorf("dump file lines that are not whole results: %q", bad)
			}
			return ids
		}
		for i := range 5 {
			send(fmt.Sprintf("b1-%d", i))
		}
		if !waitFor(arriveTimeout, func() bool { return len(dumpIDs()) == 5 }) {
			t.Fatalf("%d results in the dump file, want 5", len(dumpIDs()))
		}
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		core := relNewCore(t, fifo)
		core.Open(t)
		opened := time.Now()
		for i := 0; len(core.Lines()) == 0; i++ {
			if time.Since(opened) > 8*time.Second {
				t.Fatalf("the FIFO created after start got nothing within 8 s")
			}
			send(fmt.Sprintf("b2-%d", i))
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("the new FIFO was used %v after it appeared", time.Since(opened))
		for i := range 5 {
			send(fmt.Sprintf("b3-%d", i))
		}
		waitFor(arriveTimeout, func() bool { ids, _ := relLineIDs(core.Lines()); return len(ids)+len(dumpIDs()) == len(sent) })
		os.Remove(fifo) // the core goes away and takes its FIFO
		for i := range 5 {
			send(fmt.Sprintf("b4-%d", i))
		}
		waitFor(arriveTimeout, func() bool { ids, _ := relLineIDs(core.Lines()); return len(ids)+len(dumpIDs()) == len(sent) })
		d.Stop()
		fifoIDs, bad := relLineIDs(core.Lines())
		if len(bad) > 0 {
			t.Errorf("FIFO lines that are not whole results: %q", bad)
		}
		inDump := dumpIDs()
		if missing := relOnce(t, sent, map[string][]string{"fifo": fifoIDs, "dump": inDump}); len(missing) > 0 {
			t.Errorf("never delivered: %v", missing)
		}
		in := func(ids []string, prefix string) (n int) {
			for _, id := range ids {
				if strings.HasPrefix(id, prefix) {
					n++
				}
			}
			return n
		}
		if in(inDump, "b1-") != 5 || in(fifoIDs, "b3-") != 5 || in(inDump, "b4-") != 5 {
			t.Errorf("want b1-* (no FIFO) and b4-* (FIFO removed) in the dump and b3-* in the FIFO; dump %v, FIFO %v", inDump, fifoIDs)
		}
	})

	t.Run("pipe-full", func(t *testing.T) {
		// (c) The core stops reading: the pipe fills, and after about a second
		// (FullWait) results go to the spool; when it reads again nothing is
		// missing or doubled, and the FIFO holds only whole lines.
		t.Parallel()
		dir, fifo, core := relFIFO(t, true)
		spool := makeSpoolDir(t, dir)
		d := startDaemon(t, relCfg(Config{"command_file": fifo, "check_result_path": spool, "aggregate_writes": "1"}))
		s := relNewStream(d.Port, "c", 5, 1000, 20*time.Millisecond).Start(2)
		time.Sleep(time.Second)
		core.Pause()
		paused := time.Now()
		if !waitFor(8*time.Second, func() bool { _, n := relSpoolIDs(t, spool); return n > 0 }) {
			t.Fatalf("nothing reached the spool within 8 s of the core stalling (%s)", s.summary())
		}
		if took := time.Since(paused); took < 900*time.Millisecond || took > 4*time.Second {
			t.Errorf("the first result reached the spool %v after the core stalled, want about 1 s (the full-pipe wait) plus the time to fill the pipe", took)
		} else {
			t.Logf("first spool file %v after the core stalled", took)
		}
		time.Sleep(time.Until(paused.Add(2500 * time.Millisecond)))
		core.Resume()
		time.Sleep(1500 * time.Millisecond)
		sent, fifoIDs, spoolIDs := relStopAndCollect(t, d, s, core, spool)
		t.Logf("%d results in the FIFO, %d in the spool (%s)", len(fifoIDs), len(spoolIDs), s.summary())
		relAssertDelivered(t, d, sent, fifoIDs, spoolIDs)
	})

	t.Run("reader-restart", func(t *testing.T) {
		// (d) The core closes the FIFO and opens it again (a restart) in the
		// middle of a stream, with aggregate_writes=1 (the daemon's held
		// descriptor gets EPIPE). A second descriptor held open for writing
		// keeps what the daemon wrote but the old reader had not read yet in
		// the pipe for the new reader, as a core that restarts cleanly would
		// have read it: what is tested is the daemon's side, that no result
		// is lost or written twice across EPIPE, ENXIO and the spool.
		t.Parallel()
		dir, fifo, core := relFIFO(t, true)
		spool := makeSpoolDir(t, dir)
		keeper, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer keeper.Close()
		d := startDaemon(t, relCfg(Config{"command_file": fifo, "check_result_path": spool, "aggregate_writes": "1"}))
		s := relNewStream(d.Port, "d", 3, 200, 10*time.Millisecond).Start(4)
		time.Sleep(time.Second)
		core.Close()
		time.Sleep(time.Second)
		core.reopen(t)
		sent, fifoIDs, spoolIDs := relStopAndCollect(t, d, s, core, spool)
		t.Logf("%d results in the FIFO, %d in the spool (%s)", len(fifoIDs), len(spoolIDs), s.summary())
		if len(spoolIDs) == 0 {
			t.Errorf("nothing went to the spool while the FIFO had no reader")
		}
		relAssertDelivered(t, d, sent, fifoIDs, spoolIDs)
	})

	t.Run("two-workers-long-lines", func(t *testing.T) {
		// (e) Two worker processes write lines longer than PIPE_BUF into one
		// FIFO at the same time: every line read is whole.
		t.Parallel()
		_, fifo, core := relFIFO(t, true)
		d := startDaemon(t, relCfg(Config{"command_file": fifo, "aggregate_writes": "1", "nsca_workers": "2",
			"nsca_workers_spread": "always"}))
		workers := d.waitWorkers(2, startTimeout)
		t.Cleanup(func() { endWorkers(t, workers) })
		// About 6 KB per line: backslashes double when escaped.
		fill := strings.Repeat(`ab\`, 1300)
		const clients, conns, per = 16, 4, 5
		sent := relParallel(t, clients, clients, "client", func(c int) (sent []string, err error) {
			for k := range conns {
				var cs []rawCheck
				var ids []string
				for i := range per {
					id := fmt.Sprintf("e%02d-%03d", c, k*per+i)
					cs = append(cs, rawCheck{0, "relhost", fmt.Sprintf("svc%02d", c), relOutput(id, fill)})
					ids = append(ids, id)
				}
				if err := relSend(d.Port, fmt.Sprintf("127.0.0.%d", 100+c), cs); err != nil {
					return sent, err
				}
				sent = append(sent, ids...)
			}
			return sent, nil
		})
		if !waitFor(arriveTimeout, func() bool { return len(core.Lines()) >= len(sent) }) {
			t.Errorf("%d lines in the FIFO, want %d", len(core.Lines()), len(sent))
		}
		d.Stop()
		endWorkers(t, workers)
		lines := core.Lines()
		var ids []string
		bad := 0
		for _, l := range lines {
			m := regexp.MustCompile(`^\[\d+\] (PROCESS_SERVICE_CHECK_RESULT;relhost;svc(\d\d);0;id=(e\d\d-\d+) .*)$`).FindStringSubmatch(l)
			if m == nil || m[1] != serviceLine("relhost", "svc"+m[2], 0, relOutput(m[3], fill)) {
				bad++
				if bad <= 3 {
					t.Errorf("a FIFO line is not one whole result (interleaved?): %s", abbrev(l))
				}
				continue
			}
			if len(l) <= 4096 {
				t.Fatalf("line of %d bytes: the test needs lines longer than PIPE_BUF", len(l))
			}
			ids = append(ids, m[3])
		}
		if bad > 0 {
			t.Errorf("%d of %d FIFO lines are damaged", bad, len(lines))
		}
		if missing := relOnce(t, sent, map[string][]string{"fifo": ids}); len(missing) > 0 {
			t.Errorf("%d of %d results never arrived, e.g. %v", len(missing), len(sent), missing[:min(len(missing), 5)])
		}
		// Both workers served: each logs its own final line with its pid.
		drained := grepLines(d.Stderr(), regexp.MustCompile(`pipeline drained: .*received=[1-9]`))
		pids := map[string]bool{}
		for _, l := range drained {
			if f := strings.Fields(l); len(f) > 2 {
				pids[f[2]] = true
			}
		}
		if len(pids) < 2 {
			t.Errorf("want both workers to have received results; final lines with results: %q", drained)
		}
	})
}

// relWaitAll waits until the FIFO (via core), the spool and the dump file
// together hold want results and then for a moment more, and returns the
// ids in the FIFO and the spool (dump lines are counted with the FIFO's).
func relWaitAll(t *testing.T, core *relCore, spool, dump string, want int) (fifoIDs, spoolIDs []string) {
	t.Helper()
	collect := func() {
		fifoIDs, spoolIDs = nil, nil
		var bad []string
		if core != nil {
			fifoIDs, bad = relLineIDs(core.Lines())
		}
		if dump != "" {
			ids, b := relLineIDs(completeLines(readFile(t, dump)))
			fifoIDs = append(fifoIDs, ids...)
			bad = append(bad, b...)
		}
		if len(bad) > 0 {
			t.Fatalf("%d lines are not whole results, e.g. %s", len(bad), abbrev(bad[0]))
		}
		if spool != "" {
			spoolIDs, _ = relSpoolIDs(t, spool)
		}
	}
	waitFor(15*time.Second, func() bool { collect(); return len(fifoIDs)+len(spoolIDs) >= want })
	time.Sleep(300 * time.Millisecond) // anything delivered twice shows up too
	collect()
	return fifoIDs, spoolIDs
}

// relFIFO makes a FIFO in a new temporary directory with a relCore for it,
// open if open.
func relFIFO(t *testing.T, open bool) (dir, fifo string, core *relCore) {
	dir = t.TempDir()
	fifo = makeFIFO(t, dir)
	core = relNewCore(t, fifo)
	if open {
		core.Open(t)
	}
	return dir, fifo, core
}

// relStopAndCollect stops the stream and, once the FIFO and the spool hold
// what it sent, the daemon; it returns the ids sent and those found in the
// FIFO and in the spool.
func relStopAndCollect(t *testing.T, d *Daemon, s *relStream, core *relCore, spool string) (sent, fifoIDs, spoolIDs []string) {
	t.Helper()
	sent = s.Stop()
	fifoIDs, spoolIDs = relWaitAll(t, core, spool, "", len(sent))
	d.Stop()
	return sent, fifoIDs, spoolIDs
}

// relAssertDelivered checks that every id sent is in the FIFO or the
// spool, once, and that the daemon's final statistics balance.
func relAssertDelivered(t *testing.T, d *Daemon, sent, fifoIDs, spoolIDs []string) {
	t.Helper()
	if missing := relOnce(t, sent, map[string][]string{"fifo": fifoIDs, "spool": spoolIDs}); len(missing) > 0 {
		t.Errorf("%d of %d sent results were never delivered, e.g. %v", len(missing), len(sent), missing[:min(len(missing), 5)])
	}
	relParseDrained(t, d.Stderr())
}

// TestRelShutdownUnderLoad (issue 4.4): SIGTERM while clients send, with
// the sinks in trouble. Everything a client sent in full is emitted
// (FIFO, spool, dump file) or counted as dropped with a logged reason.
func TestRelShutdownUnderLoad(t *testing.T) {
	t.Run("fifo-blocked", func(t *testing.T) {
		// (i) The core holds the FIFO open but reads nothing; a spool is set.
		t.Parallel()
		dir, fifo, core := relFIFO(t, true)
		spool := makeSpoolDir(t, dir)
		core.Pause()
		d := startDaemon(t, relCfg(Config{"command_file": fifo, "aggregate_writes": "1", "check_result_path": spool}))
		s := relNewStream(d.Port, "i", 10, 1000, 20*time.Millisecond).Start(8)
		relShutdownUnderLoad(t, d, s, func() map[string][]string {
			core.Resume()
			core.Quiet(300*time.Millisecond, 5*time.Second)
			fifoIDs, bad := relLineIDs(core.Lines())
			if len(bad) > 0 {
				t.Errorf("%d FIFO lines are not whole results, e.g. %s", len(bad), abbrev(bad[0]))
			}
			spoolIDs, _ := relSpoolIDs(t, spool)
			return map[string][]string{"fifo": fifoIDs, "spool": spoolIDs}
		})
	})
	t.Run("spool-capped", func(t *testing.T) {
		// (ii) The spool is at check_result_path_max_files (nobody takes the
		// files), its waiting queue is small, and there is a dump file.
		t.Parallel()
		dir := t.TempDir()
		spool := makeSpoolDir(t, dir)
		dump := filepath.Join(dir, "nsca.dump")
		d := startDaemon(t, relCfg(Config{"check_result_path": spool, "check_result_path_max_files": "5", "queue_size": "8", "alternate_dump_file": dump}))
		s := relNewStream(d.Port, "ii", 10, 200, 20*time.Millisecond).Start(4)
		relShutdownUnderLoad(t, d, s, func() map[string][]string {
			dumpIDs, bad := relLineIDs(completeLines(readFile(t, dump)))
			if len(bad) > 0 {
				t.Errorf("%d dump file lines are not whole results, e.g. %s", len(bad), abbrev(bad[0]))
			}
			spoolIDs, files := relSpoolIDs(t, spool)
			if files > 5 {
				t.Errorf("%d result files in the spool, check_result_path_max_files=5", files)
			}
			return map[string][]string{"dump": dumpIDs, "spool": spoolIDs}
		})
	})
}

// relShutdownUnderLoad lets s run for a while, sends SIGTERM, waits for the
// exit and checks with collect (called after the exit) that every check
// sent in full was delivered once or counted as dropped with a logged reason.
func relShutdownUnderLoad(t *testing.T, d *Daemon, s *relStream, collect func() map[string][]string) {
	t.Helper()
	time.Sleep(1500 * time.Millisecond)
	sentBefore := s.Sent()
	d.Signal(syscall.SIGTERM)
	termAt := time.Now()
	// The harness allows stopTimeout for a drain; wait longer, so that a
	// slow drain is reported with what it delivered.
	select {
	case <-d.p.exited:
	case <-time.After(40 * time.Second):
		s.Stop()
		t.Fatalf("the daemon did not exit within 40 s of SIGTERM under load")
	}
	exitedAfter := time.Since(termAt)
	if exitedAfter > stopTimeout {
		t.Errorf("the daemon took %v to exit after SIGTERM, more than the %v allowed for a drain (the read grace is 2 s)", exitedAfter.Round(time.Millisecond), stopTimeout)
	}
	sent := s.Stop()
	d.Stop() // asserts exit status 0
	places := collect()
	missing := relOnce(t, sent, places)
	dr := relParseDrained(t, d.Stderr())
	var counts []string
	for k, v := range places {
		counts = append(counts, fmt.Sprintf("%s=%d", k, len(v)))
	}
	sort.Strings(counts)
	t.Logf("SIGTERM after %d checks sent, exit %v later; %s; delivered %v; %s", sentBefore, exitedAfter.Round(time.Millisecond), s.summary(), counts, dr.line)
	if uint64(len(missing)) > dr.failed {
		t.Errorf("%d checks sent in full are neither delivered nor counted as dropped (dropped total %d), e.g. %v",
			uint64(len(missing))-dr.failed, dr.failed, missing[:min(len(missing), 5)])
	}
	relCheckDropLogs(t, d.Stderr(), dr.dropped, `127\.0\.0\.1:\d+`)
	if t.Failed() {
		stderr := d.Stderr()
		t.Logf("daemon stderr (last 4000 bytes):\n%s", stderr[max(0, len(stderr)-4000):])
	}
}

// TestRelHostileInput (issue 4.5): hostile clients, each on its own source
// address. Each is closed with a logged reason naming it; nothing of theirs
// reaches the command file except what stock delivers too; the daemon
// keeps serving and exits 0.
func TestRelHostileInput(t *testing.T) {
	d, cmd := startFileDaemon(t, 1, relPassword, nil)
	valid := func(r *rawConn) []byte { return relPacket(r, 0, "hostile", "svc", "valid packet") }
	cases := []struct {
		name string
		send func(r *rawConn) []byte
		// halfClose: the client ends its side (the daemon cannot know the
		// packet is incomplete otherwise) and waits for the daemon to close.
		halfClose bool
		log       string // after "PEER"
	}{
		{"random-bytes", func(*rawConn) []byte {
			b := make([]byte, packetSize)
			for i := range b {
				b[i] = byte(rand.IntN(256))
			}
			return b
		}, false, `: dropped packet 1: packet: bad (version|crc32)`},
		{"init-packet-echoed", func(r *rawConn) []byte {
			b := make([]byte, initPacketSize)
			copy(b, r.iv)
			binary.BigEndian.PutUint32(b[128:], r.ts)
			return b
		}, true, ` ended \(client closed\) after 132 bytes, before a whole packet`},
		{"truncated-1", func(r *rawConn) []byte { return valid(r)[:1] }, true, ` ended \(client closed\) after 1 bytes, before a whole packet`},
		{"truncated-719", func(r *rawConn) []byte { return valid(r)[:719] }, true, ` ended \(client closed\) after 719 bytes, before a whole packet`},
		{"truncated-721", func(r *rawConn) []byte { return valid(r)[:721] }, true, ` ended \(client closed\) after 721 bytes, before a whole packet`},
		{"truncated-4303", func(r *rawConn) []byte { return valid(r)[:4303] }, true, ` ended \(client closed\) after 4303 bytes, before a whole packet`},
		{"version-2-good-crc", func(r *rawConn) []byte {
			return r.xor(relPlain(2, 0, "hostile", "svc", "version 2", r.ts), relPassword)
		}, false, `: dropped packet 1: packet: bad version \(.*\): got 2`},
		{"10MB-garbage", func(*rawConn) []byte {
			b := make([]byte, 10<<20)
			for i := range b {
				b[i] = byte(i*7 + i>>9)
			}
			return b
		}, false, `: dropped packet 1: packet: bad (version|crc32)`},
	}
	for i, c := range cases {
		local := fmt.Sprintf("127.0.0.%d", 50+i)
		r, err := dialInit(d.Port, local, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		peer := r.c.LocalAddr().String()
		wrote := make(chan error, 1)
		go func() {
			r.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_, err := r.c.Write(c.send(r))
			if c.halfClose && err == nil {
				err = r.c.(*net.TCPConn).CloseWrite()
			}
			wrote <- err
		}()
		n, closed := waitClosed(r.c, 8*time.Second)
		werr := <-wrote
		r.c.Close()
		if !closed || n != 0 {
			t.Errorf("%s (from %s): the daemon did not close the connection within 8 s (closed=%v, %d bytes read); write: %v", c.name, peer, closed, n, werr)
		}
		// A client that never sent a whole packet is an incomplete
		// connection, not a dropped check.
		prefix := `closing connection from `
		if c.halfClose {
			prefix = `connection from `
		}
		re := regexp.MustCompile(prefix + regexp.QuoteMeta(peer) + c.log)
		if _, ok := waitLines(d.Stderr, re, 1, 2*time.Second); !ok {
			t.Errorf("%s: no log line matches %q", c.name, re)
		}
		if d.p.hasExited() {
			t.Fatalf("the daemon exited after %s: %v\n%s", c.name, d.p.state, d.Stderr())
		}
	}

	// What stock delivers: signed return codes at both ends; host and
	// service cut at a newline or NUL, output cut at NUL and escaped; a
	// service that is empty after the cut makes a host check; fields that
	// fill their whole width without a NUL lose their last byte.
	lo := now()
	if err := relSend(d.Port, "127.0.0.60", []rawCheck{
		{32767, "rc-max", "svc", "max"},
		{-32768, "rc-min", "svc", "min"},
	}); err != nil {
		t.Fatal(err)
	}
	waitFileLines(t, cmd, 2)
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	if err := relSend(d.Port, "127.0.0.61", []rawCheck{
		{0, "nl\nINJECTED", "svc\nPROCESS_HOST_CHECK_RESULT;evil;0;pwned", "line1\nline2 \\ end\x00hidden"},
		{1, "nul\x00host", "\nservice", "\x00"},
		{2, "x\x00\n", "s\x00\nvc", "out\r\nput;with;semicolons\x00\n"},
		{3, long('H', 64), long('S', 128), long('O', 4096)},
	}); err != nil {
		t.Fatal(err)
	}
	waitFileLines(t, cmd, 6)
	Client{Password: relPassword, Method: 1}.send(t, d.Port, "after\tsvc\t0\tstill serving\x17", 1)
	deliverAll(t, d, cmd, lo, []string{
		serviceLine("rc-max", "svc", 32767, "max"),
		serviceLine("rc-min", "svc", -32768, "min"),
		serviceLine("nl", "svc", 0, "line1\nline2 \\ end"),
		hostLine("nul", 1, ""),
		serviceLine("x", "s", 2, "out\r\nput;with;semicolons"),
		serviceLine(long('H', 63), long('S', 127), 3, long('O', 4095)),
		serviceLine("after", "svc", 0, "still serving"),
	})
	if t.Failed() {
		t.Logf("daemon stderr:\n%s", d.Stderr())
	}
}

// TestRelAccessControl (issue 4.6): with allowed_hosts=127.0.0.2/32 a
// client from 127.0.0.1 is closed before any init packet, and logged; one
// from 127.0.0.2 is served. A config file holding a password that every
// user may read gets a warning naming the file.
func TestRelAccessControl(t *testing.T) {
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	d := startDaemonWith(t, relCfg(Config{"command_file": cmd, "append_to_file": "1", "allowed_hosts": "127.0.0.2/32"}),
		daemonOpts{dir: dir, cfgMode: 0o644})
	port, cfgPath := d.Port, d.CfgPath

	warning := regexp.MustCompile(`^W.*` + regexp.QuoteMeta(cfgPath) + `.*password: the file is readable by every user \(mode 0644\)`)
	if len(grepLines(d.Stderr(), warning)) == 0 {
		t.Errorf("no warning at start naming %s as readable by every user while it holds the password:\n%s", cfgPath, d.Stderr())
	}

	refused, err := dialLocal(port, "127.0.0.1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	peer := refused.LocalAddr().String()
	n, closed := waitClosed(refused, 3*time.Second)
	refused.Close()
	if !closed || n != 0 {
		t.Errorf("a client from 127.0.0.1 read %d bytes and was closed=%v within 3 s; want EOF before any init packet", n, closed)
	}
	re := regexp.MustCompile(`refused connection from ` + regexp.QuoteMeta(peer) + `: not in allowed_hosts`)
	if _, ok := waitLines(d.Stderr, re, 1, 2*time.Second); !ok {
		t.Errorf("no log line matches %q", re)
	}

	lo := now()
	if err := relSend(port, "127.0.0.2", []rawCheck{{0, "allowed", "svc", "from 127.0.0.2"}}); err != nil {
		t.Fatalf("a client from 127.0.0.2: %v", err)
	}
	deliverAll(t, d, cmd, lo, []string{serviceLine("allowed", "svc", 0, "from 127.0.0.2")})
	if t.Failed() {
		t.Logf("daemon stderr:\n%s", d.Stderr())
	}
}
