// Command soak runs nsca_fast under a bounded mixed load on loopback: good
// clients, slowloris connections, garbage and wrong-password clients, a
// command FIFO whose reader stalls and a spool directory whose "core" stalls
// too. At the end it stops the daemon and checks the accounting: every
// check a good client finished sending must have arrived exactly once (FIFO,
// spool or dump file), and the daemon's received count must equal emitted
// plus counted drops. It exits non-zero if either does not hold.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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

// freePort is a loopback port free now, for the daemon to listen on, so
// that runs side by side do not collide.
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

// run is one soak: it sets up, loads, stops the daemon and checks, and
// removes its directory whatever happened.
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
