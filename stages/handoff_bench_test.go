package stages

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"nsca_fast/conf"
	"nsca_fast/stages/codec"
)

// BenchmarkHandoff: what one packet costs the whole pipeline (accept,
// read, decrypt, validate, emit into a FIFO) when packets trickle in, one
// at a time, as a fleet's clients send them: each op sends one XOR check
// and waits for its line to come out of the command file, so every stage
// is parked when the packet arrives and every hand-off wakes the next.
// "open-conn" sends on one connection kept open (20 checks a connection,
// and more); "conn-per-check" dials, reads the init packet and closes for
// each, as send_nsca run once per check does.
//
// Reported besides ns/op and allocs/op (the client's share included: it
// runs in this process): the process's CPU per packet and its context
// switches per packet (voluntary and not, from getrusage), which is what
// the -cpu flag changes (GOMAXPROCS; the daemon's governor keeps one P at
// such rates):
//
//	go test -run '^$' -bench Handoff -benchtime 5000x -cpu 1,2 ./stages
func BenchmarkHandoff(b *testing.B) {
	b.Run("open-conn", func(b *testing.B) { benchHandoff(b, false) })
	b.Run("conn-per-check", func(b *testing.B) { benchHandoff(b, true) })
}

func benchHandoff(b *testing.B, connPerCheck bool) {
	fifo, f := benchFIFO(b)
	defer f.Close()
	lines := bufio.NewScanner(f)
	ts := startServer(b, func(cfg *conf.Config) {
		cfg.CommandFile, cfg.AppendToFile = fifo, false
		cfg.DecryptionMethod = 1
		// open-conn sends b.N checks on one connection: at the default
		// cap (5000) validation closed it, and the benchmark waited for
		// the next check's line for ever.
		cfg.MaxChecksPerConnection = 0
	})
	defer ts.stop()
	var conn net.Conn
	var iv []byte
	dial := func() {
		c, init, err := dialFrom(ts.addr, "127.0.0.1")
		if err != nil {
			b.Fatal(err)
		}
		c.SetDeadline(time.Time{})
		conn, iv = c, init[:codec.IVSize]
	}
	if !connPerCheck {
		dial()
		defer conn.Close()
	}
	pkt := make([]byte, codec.Size)
	send := func(i int) {
		if connPerCheck {
			dial()
			defer conn.Close()
		}
		codec.Encode(pkt, codec.Result{Timestamp: uint32(time.Now().Unix()), Host: "trickle", Service: "svc", Output: fmt.Sprintf("check-%d", i)})
		codec.XOR(pkt, iv, []byte(testPassword), 0)
		if _, err := conn.Write(pkt); err != nil {
			b.Fatal(err)
		}
	}
	await := func(i int) {
		want := fmt.Sprintf(";check-%d", i)
		for lines.Scan() {
			if strings.HasSuffix(lines.Text(), want) {
				return
			}
		}
		b.Fatalf("the command file ended before check %d", i)
	}
	// One check first: the sink's open and the first allocations are no
	// packet's.
	send(-1)
	await(-1)
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		send(i)
		await(i)
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := syscall.TimevalToNsec(after.Utime) + syscall.TimevalToNsec(after.Stime) -
		syscall.TimevalToNsec(before.Utime) - syscall.TimevalToNsec(before.Stime)
	switches := after.Nvcsw + after.Nivcsw - before.Nvcsw - before.Nivcsw
	b.ReportMetric(float64(cpu)/1000/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(switches)/float64(b.N), "ctxsw/op")
}
