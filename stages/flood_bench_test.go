package stages

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/conf"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/diagnose"
)

// BenchmarkGoodUnderGarbageFlood: what good clients pay while a flood of
// garbage keeps the diagnosis busy. The whole pipeline serves a loopback
// port with two secrets (method 14 tried first, the good clients' method
// 1 second); per op one good client from 127.0.0.2 dials, reads the init
// packet, sends one XOR check and closes, and the op ends when its line
// comes out of the command file (a FIFO). "quiet" has nothing else;
// "flood" adds floodRate connections a second, each from one of
// floodSources addresses 127.1.x.y, that send a packet of random bytes
// after the init packet: every candidate is refuted, and each source is
// diagnosed (every method with each password) once a minute, more than
// the diagnosis budget of 20 ms a second allows; "flood-one-source" is
// the same flood from one address, diagnosed once: set against "flood",
// what the diagnosis itself costs the good clients.
//
// Reported: the good checks' latency (p50, p99), the diagnosis time per
// second of the run as the budget counts it (diag-ms/s, wall time, which
// on a busy machine includes waits for a CPU) and the CPU it used
// (diag-cpu-ms/s, which must stay within the budget), the flood's
// connections per second, and the process's CPU per good check (clients
// and flood included: the process is client and server).
//
//	nice go test -run '^$' -bench GoodUnderGarbageFlood -benchtime 20000x ./stages
func BenchmarkGoodUnderGarbageFlood(b *testing.B) {
	for _, run := range []struct {
		name    string
		sources int
	}{{"quiet", 0}, {"flood", floodSources}, {"flood-one-source", 1}} {
		b.Run(run.name, func(b *testing.B) { benchGoodClients(b, run.sources) })
	}
}

const (
	floodRate    = 500  // garbage connections a second
	floodSources = 2000 // distinct addresses they come from
)

// benchGoodClients runs b.N good checks beside a flood from sources
// addresses (0: none).
func benchGoodClients(b *testing.B, sources int) {
	flood := sources > 0
	fifo, f := benchFIFO(b)
	defer f.Close()
	arrived := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			arrived <- sc.Text()
		}
	}()
	ts := startServer(b, func(cfg *conf.Config) {
		cfg.CommandFile, cfg.AppendToFile = fifo, false
		cfg.DecryptionMethod, cfg.MoreMethods = 14, []int{1}
	})
	stop := make(chan struct{})
	var floodWG sync.WaitGroup
	var floodConns atomic.Int64
	if flood {
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			garbageFlood(ts.addr, sources, &floodConns, stop)
		}()
		time.Sleep(500 * time.Millisecond) // the diagnosis busy before the first good check
	}
	lat := make([]time.Duration, 0, b.N)
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	spent, spentCPU := diagnose.Spent()
	floodBefore := floodConns.Load()
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := goodCheck(ts.addr, i); err != nil {
			b.Fatal(err)
		}
		want := fmt.Sprintf(";good-%d", i)
		for line := range arrived {
			if strings.HasSuffix(line, want) {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	elapsed := time.Since(start)
	nowSpent, nowCPU := diagnose.Spent()
	floodN := floodConns.Load() - floodBefore
	spent, spentCPU = nowSpent-spent, nowCPU-spentCPU
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	close(stop)
	floodWG.Wait()
	// The benchmark calls this function again for a larger b.N; the next
	// run's diagnosis must be the only one.
	ts.stop()
	cpu := time.Duration(syscall.TimevalToNsec(after.Utime) + syscall.TimevalToNsec(after.Stime) -
		syscall.TimevalToNsec(before.Utime) - syscall.TimevalToNsec(before.Stime))
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(spent.Microseconds())/1000/elapsed.Seconds(), "diag-ms/s")
	b.ReportMetric(float64(spentCPU.Microseconds())/1000/elapsed.Seconds(), "diag-cpu-ms/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	if flood {
		b.ReportMetric(float64(floodN)/elapsed.Seconds(), "flood-conn/s")
	}
	if elapsed < time.Second {
		return // b.N's probe: too short to judge a budget per second
	}
	if sources > 1 && spent == 0 {
		b.Errorf("the flood was never diagnosed")
	}
	// One diagnosis a second may start before the budget is spent and end
	// after it.
	if ms := float64(spentCPU.Microseconds()) / 1000 / elapsed.Seconds(); ms > 25 {
		b.Errorf("the diagnosis used %.1f ms of CPU a second, over its budget of 20", ms)
	}
}

// goodCheck sends check i from 127.0.0.2 as send_nsca does, with XOR.
func goodCheck(addr string, i int) error {
	c, init, err := dialFrom(addr, "127.0.0.2")
	if err != nil {
		return err
	}
	defer c.Close()
	pkt := make([]byte, codec.Size)
	codec.Encode(pkt, codec.Result{Timestamp: uint32(time.Now().Unix()), Host: "good", Service: "svc", Output: fmt.Sprintf("good-%d", i)})
	codec.XOR(pkt, init[:codec.IVSize], []byte(testPassword), 0)
	_, err = c.Write(pkt)
	return err
}

// benchFIFO makes a command file FIFO for a benchmark's server and opens
// it for reading and writing: the sink's open never waits, and the reader
// never sees the end of the file.
func benchFIFO(b *testing.B) (string, *os.File) {
	fifo := filepath.Join(b.TempDir(), "nsca.cmd")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	return fifo, f
}

// dialFrom connects to addr from local and reads the init packet. The
// port is picked at connect, knowing the destination: picked at bind, it
// must differ from every connection of local's in TIME_WAIT, and that
// search grew to milliseconds of kernel CPU per connection after 10,000.
func dialFrom(addr, local string) (net.Conn, []byte, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)},
		Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1) })
		}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	init := make([]byte, codec.InitSize)
	if _, err := io.ReadFull(c, init); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, init, nil
}

// garbageFlood opens floodRate connections a second from sources addresses
// until stop, each sending a packet of random bytes after the init packet
// (read first, so that the close is a FIN, not a reset that could lose
// the packet), and counts them in n.
func garbageFlood(addr string, sources int, n *atomic.Int64, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second / floodRate)
	defer tick.Stop()
	garbage := make([]byte, codec.Size)
	rand.Read(garbage)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		src := fmt.Sprintf("127.1.%d.%d", i%sources/250, i%sources%250+1)
		if c, _, err := dialFrom(addr, src); err == nil {
			c.Write(garbage)
			c.Close()
			n.Add(1)
		}
	}
}
