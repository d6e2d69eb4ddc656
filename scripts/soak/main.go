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

func run(bin string, duration time.Duration, good, perConn, slow, garbage, workers int) error {
	dir, err := os.MkdirTemp("", "nsca-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e := env{dir: dir, fifo: filepath.Join(dir, "nsca.cmd"), spool: filepath.Join(dir, "spool"), dump: filepath.Join(dir, "dump"), port: freePort()}
	os.Mkdir(e.spool, 0o700)
	if err := syscall.Mkfifo(e.fifo, 0o600); err != nil {
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
`, e.port, e.fifo, e.spool, e.dump, password, workers)
	cfgPath := filepath.Join(dir, "nsca.cfg")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)

	// The "core": reads the FIFO but stalls for 2 s out of every 5.
	var fifoLines []string
	var fifoMu sync.Mutex
	rfd, err := syscall.Open(e.fifo, syscall.O_RDWR, 0) // O_RDWR: never blocks, never sees EOF
	if err != nil {
		return err
	}
	stopCore := make(chan struct{})
	coreDone := make(chan struct{})
	go func() {
		defer close(coreDone)
		f := os.NewFile(uintptr(rfd), "fifo")
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
		start := time.Now()
		for {
			if time.Since(start)%(5*time.Second) < 2*time.Second {
				select {
				case <-stopCore:
					goto drain
				case <-time.After(50 * time.Millisecond):
					continue
				}
			}
			select {
			case l := <-lines:
				fifoMu.Lock()
				fifoLines = append(fifoLines, l)
				fifoMu.Unlock()
			case <-stopCore:
				goto drain
			case <-time.After(50 * time.Millisecond):
			}
		}
	drain:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return
				}
				fifoMu.Lock()
				fifoLines = append(fifoLines, l)
				fifoMu.Unlock()
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}()
	// The core's spool reader: takes finished files every second, but not
	// during the first third of the run, so the spool fills to its cap.
	var spoolBodies []string
	collectSpool := func() {
		entries, _ := os.ReadDir(e.spool)
		for _, ent := range entries {
			name := ent.Name()
			if !strings.HasSuffix(name, ".ok") {
				continue
			}
			base := filepath.Join(e.spool, strings.TrimSuffix(name, ".ok"))
			b, err := os.ReadFile(base)
			if err != nil {
				continue
			}
			spoolBodies = append(spoolBodies, string(b))
			os.Remove(base)
			os.Remove(base + ".ok")
		}
	}

	logPath := filepath.Join(dir, "nsca.log")
	logFile, _ := os.Create(logPath)
	daemon := exec.Command(bin, "-c", cfgPath, "-f")
	daemon.Stderr = logFile
	daemon.Stdout = logFile
	if err := daemon.Start(); err != nil {
		return err
	}
	defer daemon.Process.Kill()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(e.port))
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			return fmt.Errorf("daemon did not start listening: see %s", logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}

	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	var sentIDs sync.Map
	var nextID, sent, sendErrs, slowConns, garbageConns atomic.Int64
	for range good {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				ids, err := goodClient(addr, perConn, &nextID)
				if err != nil {
					sendErrs.Add(1)
					continue
				}
				for _, id := range ids {
					sentIDs.Store(id, true)
				}
				sent.Add(int64(len(ids)))
			}
		}()
	}
	for range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			slowConns.Add(1)
			for time.Now().Before(deadline) {
				if _, err := c.Write([]byte{0x42}); err != nil {
					return // closed by the daemon's timeout, as intended
				}
				time.Sleep(time.Second)
			}
		}()
	}
	for i := range garbage {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				garbageClient(addr, i%2 == 0)
				garbageConns.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	spoolTick := time.NewTicker(time.Second)
	for time.Now().Before(deadline) {
		<-spoolTick.C
		if time.Until(deadline) < duration*2/3 {
			collectSpool()
		}
	}
	spoolTick.Stop()
	wg.Wait()

	// Stop the daemon: everything fully received must be written out.
	daemon.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	var waitErr error
	for done := false; !done; {
		select {
		case waitErr = <-exited:
			done = true
		case <-time.After(200 * time.Millisecond):
			collectSpool()
		case <-time.After(60 * time.Second):
			daemon.Process.Kill()
			return fmt.Errorf("daemon did not stop within 60 s of SIGTERM")
		}
	}
	collectSpool()
	close(stopCore)
	<-coreDone
	logFile.Close()
	if waitErr != nil {
		return fmt.Errorf("daemon exit: %v (log %s)", waitErr, logPath)
	}

	// Every good check exactly once.
	seen := map[string]int{}
	idRe := regexp.MustCompile(`soak-id-(\d+)`)
	count := func(text string) {
		for _, m := range idRe.FindAllStringSubmatch(text, -1) {
			seen[m[1]]++
		}
	}
	fifoMu.Lock()
	for _, l := range fifoLines {
		count(l)
	}
	fifoMu.Unlock()
	for _, b := range spoolBodies {
		count(b)
	}
	dumpBytes, _ := os.ReadFile(e.dump)
	count(string(dumpBytes))
	var missing, dup int
	sentIDs.Range(func(k, _ any) bool {
		switch seen[strconv.FormatInt(k.(int64), 10)] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
		return true
	})

	logText, _ := os.ReadFile(logPath)
	final := lastMatch(string(logText), `(?m)^.*(?:pipeline drained|stopped): (.*)$`)
	received := counter(final, `received=(\d+)`)
	emitted := counter(final, `report_success=(\d+)`)
	dropped := counter(final, `report_failed=(\d+)`)
	fmt.Printf("soak: %v, %d good clients x %d checks/conn, %d slowloris, %d garbage/wrong-password clients, nsca_workers=%d\n",
		duration, good, perConn, slow, garbage, workers)
	fmt.Printf("clients: checks sent=%d, failed connections=%d, slowloris connections=%d, garbage connections=%d\n",
		sent.Load(), sendErrs.Load(), slowConns.Load(), garbageConns.Load())
	fmt.Printf("arrived: fifo lines=%d, spool files=%d, dump lines=%d; good checks missing=%d duplicated=%d\n",
		len(fifoLines), len(spoolBodies), strings.Count(string(dumpBytes), "\n"), missing, dup)
	fmt.Printf("daemon: %s\n", final)
	fmt.Printf("accounting: received=%d emitted=%d dropped=%d: received %s emitted+dropped\n",
		received, emitted, dropped, map[bool]string{true: "==", false: "!="}[received == emitted+dropped])
	switch {
	case final == "":
		return fmt.Errorf("no final statistics line in %s", logPath)
	case missing > 0 || dup > 0:
		return fmt.Errorf("%d good checks missing, %d duplicated", missing, dup)
	case received != emitted+dropped:
		return fmt.Errorf("received %d != emitted %d + dropped %d", received, emitted, dropped)
	case sent.Load() == 0:
		return fmt.Errorf("no check was sent")
	}
	fmt.Println("soak: PASS")
	return nil
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
