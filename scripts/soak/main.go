// Command soak runs nsca_fast under a bounded mixed load on loopback: good
// clients, slowloris connections, garbage and wrong-password clients, a
// command FIFO whose reader stalls and a spool directory whose "core" stalls
// too. At the end it stops the daemon and checks the accounting: every
// check a good client finished sending must have arrived exactly once (FIFO,
// spool or dump file), and the daemon's received count must equal emitted
// plus counted drops. It exits non-zero if either does not hold.
package main

import (
	"bufio"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"nsca_fast/stages/codec"
)

func main() {
	bin := flag.String("nsca", "./nsca", "the nsca_fast binary")
	duration := flag.Duration("duration", 30*time.Second, "how long to apply load")
	good := flag.Int("good", 8, "concurrent good clients")
	perConn := flag.Int("checks", 5, "checks per good connection")
	slow := flag.Int("slowloris", 500, "slowloris connections (one byte a second)")
	garbage := flag.Int("garbage", 2, "concurrent garbage and wrong-password clients")
	workers := flag.Int("workers", 0, "nsca_workers")
	flag.Parse()
	if err := run(*bin, *duration, *good, *perConn, *slow, *garbage, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	}
}

const password = "soak-secret"

type env struct {
	dir, fifo, spool, dump string
	port                   int
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// soak is one run: its settings, the daemon, the core's two readers and
// the clients' counts.
type soak struct {
	bin                                   string
	duration                              time.Duration
	good, perConn, slow, garbage, workers int

	env
	cfgPath, logPath string
	logFile          *os.File
	daemon           *exec.Cmd
	addr             string
	fifoReader       *fifoCore
	spoolReader      *spoolCore

	sentIDs                                         sync.Map
	nextID, sent, sendErrs, slowConns, garbageConns atomic.Int64
}

func run(bin string, duration time.Duration, good, perConn, slow, garbage, workers int) error {
	dir, err := os.MkdirTemp("", "nsca-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s := &soak{bin: bin, duration: duration, good: good, perConn: perConn, slow: slow, garbage: garbage, workers: workers}
	if err := s.configure(dir); err != nil {
		return err
	}
	if s.fifoReader, err = startFIFOCore(s.fifo); err != nil {
		return err
	}
	s.spoolReader = &spoolCore{dir: s.spool}
	if err := s.startDaemon(); err != nil {
		return err
	}
	defer s.daemon.Process.Kill()
	s.load()
	if err := s.stop(); err != nil {
		return err
	}
	return s.check()
}

// configure makes the FIFO, the spool directory and the daemon's config
// in dir.
func (s *soak) configure(dir string) error {
	s.env = env{dir: dir, fifo: filepath.Join(dir, "nsca.cmd"), spool: filepath.Join(dir, "spool"), dump: filepath.Join(dir, "dump"), port: freePort()}
	os.Mkdir(s.spool, 0o700)
	if err := syscall.Mkfifo(s.fifo, 0o600); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`server_address=127.0.0.1
server_port=%d
command_file=%s
check_result_path=%s
check_result_path_max_files=200
alternate_dump_file=%s
decryption_method=1
password=%s
connection_timeout=3
nsca_workers=%d
queue_size=256
`, s.port, s.fifo, s.spool, s.dump, password, s.workers)
	s.cfgPath = filepath.Join(dir, "nsca.cfg")
	os.WriteFile(s.cfgPath, []byte(cfg), 0o600)
	return nil
}

// startDaemon starts nsca_fast in the foreground and waits until it
// accepts connections.
func (s *soak) startDaemon() error {
	s.logPath = filepath.Join(s.dir, "nsca.log")
	s.logFile, _ = os.Create(s.logPath)
	s.daemon = exec.Command(s.bin, "-c", s.cfgPath, "-f")
	s.daemon.Stderr = s.logFile
	s.daemon.Stdout = s.logFile
	if err := s.daemon.Start(); err != nil {
		return err
	}
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err == nil {
			c.Close()
			return nil
		}
		if i > 100 {
			s.daemon.Process.Kill()
			return fmt.Errorf("daemon did not start listening: see %s", s.logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// load runs the good, slowloris and garbage clients for the duration,
// while the spool reader takes files every second after the first third.
func (s *soak) load() {
	deadline := time.Now().Add(s.duration)
	var wg sync.WaitGroup
	spawn := func(n int, client func(i int, deadline time.Time)) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client(i, deadline)
			}()
		}
	}
	spawn(s.good, s.goodClients)
	spawn(s.slow, s.slowloris)
	spawn(s.garbage, s.garbageClients)
	spoolTick := time.NewTicker(time.Second)
	for time.Now().Before(deadline) {
		<-spoolTick.C
		if time.Until(deadline) < s.duration*2/3 {
			s.spoolReader.collect()
		}
	}
	spoolTick.Stop()
	wg.Wait()
}

// goodClients is one good client: a connection after another until the
// deadline, noting the ids of every check a connection finished sending.
func (s *soak) goodClients(_ int, deadline time.Time) {
	for time.Now().Before(deadline) {
		ids, err := goodClient(s.addr, s.perConn, &s.nextID)
		if err != nil {
			s.sendErrs.Add(1)
			continue
		}
		for _, id := range ids {
			s.sentIDs.Store(id, true)
		}
		s.sent.Add(int64(len(ids)))
	}
}

// slowloris holds one connection, writing a byte a second, until the
// deadline or the daemon closes it.
func (s *soak) slowloris(_ int, deadline time.Time) {
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		return
	}
	defer c.Close()
	s.slowConns.Add(1)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte{0x42}); err != nil {
			return // closed by the daemon's timeout, as intended
		}
		time.Sleep(time.Second)
	}
}

// garbageClients is client i: random bytes if i is odd, the wrong
// password if even, every 20 ms until the deadline.
func (s *soak) garbageClients(i int, deadline time.Time) {
	for time.Now().Before(deadline) {
		garbageClient(s.addr, i%2 == 0)
		s.garbageConns.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM, collecting the spool meanwhile: everything fully
// received must be written out. Then it stops the FIFO reader.
func (s *soak) stop() error {
	s.daemon.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- s.daemon.Wait() }()
	var waitErr error
	// One deadline for the whole wait: a time.After inside the loop would
	// start over at every 200 ms collection and never fire.
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case waitErr = <-exited:
			done = true
		case <-time.After(200 * time.Millisecond):
			s.spoolReader.collect()
		case <-deadline:
			s.daemon.Process.Kill()
			return fmt.Errorf("daemon did not stop within 60 s of SIGTERM")
		}
	}
	s.spoolReader.collect()
	s.fifoReader.close()
	s.logFile.Close()
	if waitErr != nil {
		return fmt.Errorf("daemon exit: %v (log %s)", waitErr, s.logPath)
	}
	return nil
}

// check prints what was sent and what arrived, and fails unless every good
// check arrived exactly once and received == emitted + dropped.
func (s *soak) check() error {
	dumpBytes, _ := os.ReadFile(s.dump)
	missing, dup := s.arrivals(string(dumpBytes))
	logText, _ := os.ReadFile(s.logPath)
	final := lastMatch(string(logText), `(?m)^.*(?:pipeline drained|stopped): (.*)$`)
	received := counter(final, `received=(\d+)`)
	emitted := counter(final, `report_success=(\d+)`)
	dropped := counter(final, `report_failed=(\d+)`)
	fmt.Printf("soak: %v, %d good clients x %d checks/conn, %d slowloris, %d garbage/wrong-password clients, nsca_workers=%d\n",
		s.duration, s.good, s.perConn, s.slow, s.garbage, s.workers)
	fmt.Printf("clients: checks sent=%d, failed connections=%d, slowloris connections=%d, garbage connections=%d\n",
		s.sent.Load(), s.sendErrs.Load(), s.slowConns.Load(), s.garbageConns.Load())
	fmt.Printf("arrived: fifo lines=%d, spool files=%d, dump lines=%d; good checks missing=%d duplicated=%d\n",
		len(s.fifoReader.lines), len(s.spoolReader.bodies), strings.Count(string(dumpBytes), "\n"), missing, dup)
	fmt.Printf("daemon: %s\n", final)
	fmt.Printf("accounting: received=%d emitted=%d dropped=%d: received %s emitted+dropped\n",
		received, emitted, dropped, map[bool]string{true: "==", false: "!="}[received == emitted+dropped])
	switch {
	case final == "":
		return fmt.Errorf("no final statistics line in %s", s.logPath)
	case missing > 0 || dup > 0:
		return fmt.Errorf("%d good checks missing, %d duplicated", missing, dup)
	case received != emitted+dropped:
		return fmt.Errorf("received %d != emitted %d + dropped %d", received, emitted, dropped)
	case s.sent.Load() == 0:
		return fmt.Errorf("no check was sent")
	}
	fmt.Println("soak: PASS")
	return nil
}

// arrivals counts the good checks that arrived nowhere and those that
// arrived more than once, over the FIFO, the spool and the dump file.
func (s *soak) arrivals(dump string) (missing, dup int) {
	seen := map[string]int{}
	idRe := regexp.MustCompile(`soak-id-(\d+)`)
	count := func(text string) {
		for _, m := range idRe.FindAllStringSubmatch(text, -1) {
			seen[m[1]]++
		}
	}
	for _, l := range s.fifoReader.lines {
		count(l)
	}
	for _, b := range s.spoolReader.bodies {
		count(b)
	}
	count(dump)
	s.sentIDs.Range(func(k, _ any) bool {
		switch seen[strconv.FormatInt(k.(int64), 10)] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
		return true
	})
	return missing, dup
}

// fifoCore is the core's FIFO reader: it reads the lines but stalls for
// 2 s out of every 5.
type fifoCore struct {
	mu    sync.Mutex
	lines []string
	stop  chan struct{}
	done  chan struct{}
}

func startFIFOCore(path string) (*fifoCore, error) {
	rfd, err := syscall.Open(path, syscall.O_RDWR, 0) // O_RDWR: never blocks, never sees EOF
	if err != nil {
		return nil, err
	}
	c := &fifoCore{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		lines := readLines(os.NewFile(uintptr(rfd), "fifo"))
		c.follow(lines)
		c.drain(lines)
	}()
	return c, nil
}

// readLines sends the lines of f on the channel it returns, closed when a
// read fails.
func readLines(f *os.File) <-chan string {
	r := bufio.NewReaderSize(f, 1<<16)
	lines := make(chan string, 1024)
	go func() {
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	return lines
}

// follow takes lines, except 2 s out of every 5, until stopped.
func (c *fifoCore) follow(lines <-chan string) {
	start := time.Now()
	for {
		var in <-chan string // nil while stalled: nothing is taken
		if time.Since(start)%(5*time.Second) >= 2*time.Second {
			in = lines
		}
		select {
		case l := <-in:
			c.add(l)
		case <-c.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// drain takes what is left, until no line came for 500 ms.
func (c *fifoCore) drain(lines <-chan string) {
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return
			}
			c.add(l)
		case <-time.After(500 * time.Millisecond):
			return
		}
	}
}

func (c *fifoCore) add(l string) {
	c.mu.Lock()
	c.lines = append(c.lines, l)
	c.mu.Unlock()
}

// close stops the reader once it has drained the FIFO.
func (c *fifoCore) close() {
	close(c.stop)
	<-c.done
}

// spoolCore is the core's spool reader: collect takes the finished files
// (a body and its .ok marker) and removes them.
type spoolCore struct {
	dir    string
	bodies []string
}

func (s *spoolCore) collect() {
	entries, _ := os.ReadDir(s.dir)
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".ok") {
			continue
		}
		base := filepath.Join(s.dir, strings.TrimSuffix(name, ".ok"))
		b, err := os.ReadFile(base)
		if err != nil {
			continue
		}
		s.bodies = append(s.bodies, string(b))
		os.Remove(base)
		os.Remove(base + ".ok")
	}
}

func lastMatch(text, expr string) string {
	all := regexp.MustCompile(expr).FindAllStringSubmatch(text, -1)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1][1]
}

func counter(line, expr string) int64 {
	m := regexp.MustCompile(expr).FindStringSubmatch(line)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// goodClient sends n XOR-encrypted checks on one connection, as send_nsca
// does, and returns their ids once the connection is closed cleanly.
func goodClient(addr string, n int, nextID *atomic.Int64) ([]int64, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	init := make([]byte, codec.InitSize)
	if _, err := io.ReadFull(c, init); err != nil {
		return nil, err
	}
	iv, ts := init[:codec.IVSize], uint32(init[128])<<24|uint32(init[129])<<16|uint32(init[130])<<8|uint32(init[131])
	var ids []int64
	buf := make([]byte, 0, n*codec.Size)
	for range n {
		id := nextID.Add(1)
		pkt := make([]byte, codec.Size)
		rand.Read(pkt)
		codec.Encode(pkt, codec.Result{Timestamp: ts, ReturnCode: int16(id % 4), Host: "soak-host",
			Service: "soak-svc", Output: fmt.Sprintf("OK soak-id-%d\nsecond line \\ with a backslash", id)})
		codec.XOR(pkt, iv, []byte(password), 0)
		buf = append(buf, pkt...)
		ids = append(ids, id)
	}
	if _, err := c.Write(buf); err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	// The daemon closes after we do; reading to EOF means it took every byte.
	io.Copy(io.Discard, c)
	return ids, nil
}

// garbageClient sends random bytes, or a well-formed packet under the wrong
// password.
func garbageClient(addr string, wrongPassword bool) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	init := make([]byte, codec.InitSize)
	if _, err := io.ReadFull(c, init); err != nil {
		return
	}
	pkt := make([]byte, codec.Size)
	rand.Read(pkt)
	if wrongPassword {
		codec.Encode(pkt, codec.Result{Host: "intruder", Service: "svc", Output: "forged"})
		codec.XOR(pkt, init[:codec.IVSize], []byte("not-the-password"), 0)
	}
	c.Write(pkt)
	io.Copy(io.Discard, c)
}
