package nscang

import (
	"bufio"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"nsca_fast/stages/intake"
)

// BenchmarkNGResultHandoff is one session's path per check result, in this
// process: PUSH and its OKAY, the record read and decrypted, the result
// parsed and handed to the validate stage's queue, its acknowledgment
// (Taken, as validate gives it once emit has it) back to the session's
// goroutine, and the OKAY encrypted and written. The client is a real
// openssl s_client in its own process, sending every result at once: the
// session still takes them one at a time. cpu-ns/op is this process's
// CPU (user and system) per result, which ns/op, the time per result,
// exceeds when the client's own CPU holds the session up.
func BenchmarkNGResultHandoff(b *testing.B) {
	needOpenSSL(b)
	out := make(chan intake.Submission, 64)
	addr, stop, closed, env := ngStartTest(b, out)
	taken := make(chan struct{})
	var consumed atomic.Int64
	go func() {
		// The validate stage, as far as a session sees it: every result
		// is taken.
		for s := range out {
			s.Source.Outcomes.Taken(&s)
			if consumed.Add(1) == int64(b.N) {
				close(taken)
			}
		}
	}()

	cmd := aliceClient(addr)
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Skipf("openssl s_client: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	replies := bufio.NewScanner(stdout)
	in.Write([]byte("MOIN 1 bench\r\n"))
	if !replies.Scan() || !strings.HasPrefix(replies.Text(), "MOIN") {
		b.Fatalf("no MOIN reply: %q", replies.Text())
	}
	go func() {
		for replies.Scan() {
		}
	}()
	command := "[1700000000] PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;disk ok\n"
	push := fmt.Sprintf("PUSH %d\r\n%s", len(command), command)
	input := []byte(strings.Repeat(push, b.N))

	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	go in.Write(input)
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		b.Fatalf("%d results not taken within 10 s: %d received, %d taken", b.N, env.Stats.Received.Load(), consumed.Load())
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	in.Write([]byte("QUIT\r\n"))
	close(stop)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		b.Fatal("the listener did not finish after stop")
	}
}

// processCPU is the user and system CPU this process used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
