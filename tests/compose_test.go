package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSinksCompose: the command file, Gearman and Icinga 2 at once, and
// Icinga hangs (its processes stopped with SIGSTOP, so connections are
// accepted by the kernel and never answered). The FIFO and Gearman get
// every result while Icinga is still hung; Icinga's destination queues what
// fits in icinga2_queue_size and sends the rest to its fallback at once;
// once Icinga runs again, what was queued arrives there. No result is lost
// or delivered twice on Icinga's side.
func TestSinksCompose(t *testing.T) {
	const n = 40
	var services []string
	for i := 1; i <= n; i++ {
		services = append(services, fmt.Sprintf("cmp%02d", i))
	}
	i2 := startIcinga2(t, Icinga2Host{Name: "cmp-host", Services: services})
	g := gmStartGearmand(t, 0)
	dir := t.TempDir()
	fifo := makeFIFO(t, dir)
	reader := openFIFOReader(t, fifo)
	dump := filepath.Join(dir, "dump")
	d := startDaemon(t, i2Config(i2, dump, Config{
		"password": "compose", "decryption_method": "1",
		"command_file": fifo, "gearman_server": g.addr, "gearman_encryption": "0",
		"icinga2_queue_size": "5", "icinga2_timeout": "60", "icinga2_retries": "0", "icinga2_fallback": "dump",
		"stats_interval": "5", // the test waits for the line that counts every fallback
	}))

	paused := false
	resume := func() {
		if paused {
			syscall.Kill(-i2.pgid, syscall.SIGCONT)
			paused = false
		}
	}
	// Registered after the daemon, so it runs before the daemon is
	// stopped: a hung Icinga would hold up its drain.
	t.Cleanup(resume)
	if err := syscall.Kill(-i2.pgid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping icinga2's process group %d: %v", i2.pgid, err)
	}
	paused = true

	cl := Client{Password: "compose", Method: 1}
	start := now()
	var want []string
	output := func(i int) string { return fmt.Sprintf("compose %d", i) }
	for conn := range n / 4 {
		var input strings.Builder
		for i := conn*4 + 1; i <= conn*4+4; i++ {
			fmt.Fprintf(&input, "cmp-host\t%s\t%d\t%s\x17", services[i-1], i%4, output(i))
			want = append(want, fmt.Sprintf("PROCESS_SERVICE_CHECK_RESULT;cmp-host;%s;%d;%s", services[i-1], i%4, output(i)))
		}
		cl.send(t, d.Port, input.String(), 4)
	}

	// While Icinga is hung: the FIFO and Gearman have everything.
	got := stripTimes(t, reader.Collect(t, n), start, now())
	slices.Sort(got)
	assertLines(t, got, want)
	w := gmNewWorker(t, g.addr, "check_results")
	jobs := gmOpen(t, nil, w.collect(n), start, now())
	for i := 1; i <= n; i++ {
		text := gmResult("cmp-host", services[i-1], i%4, output(i))
		if !slices.Contains(jobs, text) {
			t.Errorf("gearman has no job %q", text)
		}
	}
	// Icinga's destination: at most its queue (5, plus the rest of the
	// last batch let in) waits; the others went to the dump file at once.
	overflowed := waitFileLines(t, dump, n-8)
	if len(overflowed) >= n {
		t.Fatalf("all %d results are in the dump file while Icinga hangs: nothing waited in its queue", len(overflowed))
	}
	inDump := map[string]bool{}
	for _, l := range stripTimes(t, overflowed, start, now()) {
		f := strings.Split(l, ";")
		if len(f) < 3 {
			t.Fatalf("dump line %q", l)
		}
		inDump[f[2]] = true
	}
	// The statistics count them as icinga2's fallbacks.
	d.waitLog(regexp.MustCompile(fmt.Sprintf(`statistics: .*fell_back\{[^}]*icinga2=%d\b`, len(inDump))), 2*statsEvery)

	resume()
	for i := 1; i <= n; i++ {
		svc := services[i-1]
		if inDump[svc] {
			if _, out, _, _ := i2.Service(t, "cmp-host", svc); out == output(i) {
				t.Errorf("%s is both in the dump file and in Icinga", svc)
			}
			continue
		}
		if state, _ := i2.WaitService(t, "cmp-host", svc, output(i), 30*time.Second); state != i%4 {
			t.Errorf("%s: state %d in Icinga, want %d", svc, state, i%4)
		}
	}
	t.Logf("while Icinga hung: %d results overflowed to the dump file, %d waited in its queue and arrived once it ran again", len(inDump), n-len(inDump))
}
