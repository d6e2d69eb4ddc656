package nscang

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"nsca_fast/stages/intake"
)

// TestNGPipelinedPushes: a client that sends its requests and their data
// without waiting for the answers (as nsca-ng's protocol lets it, and as
// BenchmarkNGResultHandoff does) has each command taken whole, though
// the next request came in the same read behind it.
func TestNGPipelinedPushes(t *testing.T) {
	needOpenSSL(t)
	out := make(chan intake.Submission, 8)
	addr, stop, closed, _ := ngStartTest(t, out)
	cmd := aliceClient(addr)
	var input strings.Builder
	input.WriteString("MOIN 1 pipelined\r\n")
	for i := 0; i < 5; i++ {
		c := fmt.Sprintf("[1700000000] PROCESS_SERVICE_CHECK_RESULT;web%d;disk;0;disk ok\n", i)
		fmt.Fprintf(&input, "PUSH %d\r\n%s", len(c), c)
	}
	input.WriteString("QUIT\r\n")
	cmd.Stdin = strings.NewReader(input.String())
	if err := cmd.Start(); err != nil {
		t.Skipf("openssl s_client: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for i := 0; i < 5; i++ {
		select {
		case p := <-out:
			if p.Kind != intake.KindResult || p.Result.Host != fmt.Sprintf("web%d", i) || p.Result.Output != "disk ok" {
				t.Fatalf("push %d: submission %+v", i, p)
			}
			p.Source.Outcomes.Taken(&p)
		case <-time.After(5 * time.Second):
			t.Fatalf("push %d did not reach the validate stage's input", i)
		}
	}
	close(stop)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not finish after stop")
	}
}
