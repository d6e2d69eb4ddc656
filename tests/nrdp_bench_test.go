package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestNRDPBench measures results per second and server CPU per result for
// NRDP clients posting batches of 1 and of 100 results, each client one
// request after the other on a kept-alive connection. It prints figures
// for BENCHMARKS.md and asserts nothing timed. NRDP_BENCH=1 runs it
// (NRDP_BENCH_SECONDS, default 5, each phase's length;
// NRDP_BENCH_CLIENTS, default 2). With NRDP_BENCH_URL, NRDP_BENCH_TOKEN
// and NRDP_BENCH_PID it measures that server instead (the real NRDP under
// php -S, say), whose process is NRDP_BENCH_PID.
func TestNRDPBench(t *testing.T) {
	if os.Getenv("NRDP_BENCH") == "" {
		t.Skip("NRDP_BENCH=1 runs the NRDP bench")
	}
	seconds, err := strconv.Atoi(os.Getenv("NRDP_BENCH_SECONDS"))
	if err != nil || seconds < 1 {
		seconds = 5
	}
	clients, err := strconv.Atoi(os.Getenv("NRDP_BENCH_CLIENTS"))
	if err != nil || clients < 1 {
		clients = 2
	}
	target, token := os.Getenv("NRDP_BENCH_URL"), os.Getenv("NRDP_BENCH_TOKEN")
	pid, _ := strconv.Atoi(os.Getenv("NRDP_BENCH_PID"))
	name := "nsca_fast"
	if target == "" {
		dir := t.TempDir()
		fifo := makeFIFO(t, dir)
		drain := openRDWR(t, fifo) // the core: read and forget
		go func() {
			buf := make([]byte, 1<<16)
			for {
				if _, err := drain.Read(buf); err != nil {
					return
				}
			}
		}()
		port := freePort(t)
		d := startDaemonWith(t, Config{"command_file": fifo, "password": "x", "nrdp_listen": "127.0.0.1:" + strconv.Itoa(port),
			"nrdp_tokens": "bench-token"}, daemonOpts{dir: dir})
		target, token, pid = "http://127.0.0.1:"+strconv.Itoa(port)+"/nrdp/", "bench-token", d.Pid()
		waitFor(5*time.Second, func() bool { _, err := http.Get(target); return err == nil })
	} else {
		name = target
	}
	for _, batch := range []int{1, 100} {
		results, cpu, elapsed := nrdpLoad(t, target, token, pid, batch, clients, time.Duration(seconds)*time.Second)
		if results == 0 {
			t.Fatalf("%s, %d per request: no result was taken", name, batch)
		}
		t.Logf("%s: %d results per request, %d clients: %.0f results/s, %.1f µs server CPU per result (%d results in %v, CPU %v)",
			name, batch, clients, float64(results)/elapsed.Seconds(), float64(cpu.Microseconds())/float64(results), results, elapsed.Round(time.Millisecond), cpu)
	}
}

// nrdpLoad has clients post batches of batch results to target for d and
// returns how many results the answers said were processed, the server's
// CPU time meanwhile and the time taken.
func nrdpLoad(t *testing.T, target, token string, pid, batch, clients int, d time.Duration) (int64, time.Duration, time.Duration) {
	checks := make([]string, batch)
	for i := range checks {
		checks[i] = nrdpCheck("service", fmt.Sprintf("bench%d", i), "load", "0", "OK - load average: 0.01, 0.02, 0.03|load1=0.010;5;10;0")
	}
	body := url.Values{"token": {token}, "cmd": {"submitcheck"}, "XMLDATA": {nrdpXML(checks...)}}.Encode()
	want := "<output>" + strconv.Itoa(batch) + " checks processed</output>"
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var taken atomic.Int64
	var wg sync.WaitGroup
	cpu0, start := cpuOf(t, pid), time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				resp, err := client.Post(target, "application/x-www-form-urlencoded", strings.NewReader(body))
				if err != nil {
					t.Errorf("post: %v", err)
					return
				}
				var b strings.Builder
				_, err = io.Copy(&b, resp.Body)
				resp.Body.Close()
				if err == nil && strings.Contains(b.String(), want) {
					taken.Add(int64(batch))
				}
			}
		}()
	}
	wg.Wait()
	return taken.Load(), cpuOf(t, pid) - cpu0, time.Since(start)
}
