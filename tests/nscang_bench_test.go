package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ngLineCounter plays the core on a FIFO and counts the lines of the
// legacy clients and of the nsca-ng clients apart.
type ngLineCounter struct {
	legacy, ng atomic.Int64
	f          *os.File
}

func ngCountLines(t testing.TB, fifo string) *ngLineCounter {
	c := &ngLineCounter{f: openRDWR(t, fifo)}
	go func() {
		sc := bufio.NewScanner(c.f)
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.Contains(l, ";legacy"):
				c.legacy.Add(1)
			case strings.Contains(l, ";nsca-ng"):
				c.ng.Add(1)
			}
		}
	}()
	t.Cleanup(func() { c.f.Close() })
	return c
}

// ngLoad runs n loops of a client command until stop is closed; each run
// sends one session or connection of results.
func ngLoad(n int, stop chan struct{}, wg *sync.WaitGroup, once func() error) {
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				once()
			}
		}()
	}
}

// cpuOf is utime+stime of pid.
func cpuOf(t testing.TB, pid int) time.Duration {
	f, err := procStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	// procStat's fields start after the command: utime and stime are
	// fields 14 and 15 of /proc/PID/stat, 12 and 13 here.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100
}

// ngBenchSetup is what the nsca-ng benchmarks share: a phase's length
// (NSCA_NG_BENCH_SECONDS, default 10), the Debian programs, a directory,
// the FIFO and its line counter, and the identities file both servers
// read (one "bench" identity), with a free port for nsca-ng-server.
func ngBenchSetup(t *testing.T) (phase time.Duration, progs ngPrograms, dir, fifo string, lines *ngLineCounter, ids string, theirPort int) {
	t.Helper()
	phase = 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("NSCA_NG_BENCH_SECONDS")); err == nil && s > 0 {
		phase = time.Duration(s) * time.Second
	}
	progs = ngExtract(t, true)
	dir = t.TempDir()
	fifo = makeFIFO(t, dir)
	lines = ngCountLines(t, fifo)
	ids = filepath.Join(dir, "nsca-ng.cfg")
	theirPort = freePort(t)
	writeFile(t, ids, fmt.Sprintf("command_file = %q\nlisten = \"127.0.0.1:%d\"\nauthorize \"bench\" {\n\tpassword = \"bench-secret\"\n\tservices = \".*\"\n\thosts = \".*\"\n}\n",
		fifo, theirPort), 0o600)
	return
}

// TestNscaNGBench measures, on one machine and the same client load: the
// legacy port's throughput alone and while nsca-ng clients load the
// nsca-ng port (the ratio), and results per second and server CPU per
// result for nsca-ng clients, ours against nsca-ng's server. It prints
// figures for BENCHMARKS.md; it asserts nothing timed but a generous
// sanity bound. NSCA_NG_BENCH=1 runs it (NSCA_NG_BENCH_SECONDS, default 10,
// is each phase's length; NSCA_NG_BENCH_CLIENTS, default 2, how many
// nsca-ng clients run at once, each one session of 100 results after the
// other).
func TestNscaNGBench(t *testing.T) {
	if os.Getenv("NSCA_NG_BENCH") == "" {
		t.Skip("a benchmark: NSCA_NG_BENCH=1 runs it")
	}
	phase, progs, dir, fifo, lines, ids, theirPort := ngBenchSetup(t)
	d, ngPort, _ := ngStartDaemon(t, dir, fifo, ids, nil)

	const perRun, legacyLoops = 100, 2
	ngLoops := 2
	if n, err := strconv.Atoi(os.Getenv("NSCA_NG_BENCH_CLIENTS")); err == nil && n > 0 {
		ngLoops = n
	}
	legacyInput := strings.Repeat("legacy\tsvc\t0\tlegacy load\n", perRun)
	ngInput := strings.Repeat("nsca-ng\tsvc\t0\tnsca-ng load\x17", perRun)
	legacyOnce := func() error {
		_, err := Client{Password: "legacy-secret", Method: 1}.run(t, d.Port, legacyInput)
		return err
	}
	ngOnce := func(port int) func() error {
		return func() error {
			_, err := ngClient{bin: progs.client, identity: "bench", password: "bench-secret", port: port}.run(t, ngInput)
			return err
		}
	}
	// measure runs the loads for one phase and returns the lines of each
	// kind per second and the CPU pid used per nsca-ng line.
	measure := func(legacy bool, ngPort, pid int) (legacyRate, ngRate float64, cpuPerNG time.Duration) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if legacy {
			ngLoad(legacyLoops, stop, &wg, legacyOnce)
		}
		if ngPort != 0 {
			ngLoad(ngLoops, stop, &wg, ngOnce(ngPort))
		}
		time.Sleep(phase / 5) // warm up
		l0, n0, c0, t0 := lines.legacy.Load(), lines.ng.Load(), cpuOf(t, pid), time.Now()
		time.Sleep(phase)
		l1, n1, c1, el := lines.legacy.Load(), lines.ng.Load(), cpuOf(t, pid), time.Since(t0)
		close(stop)
		wg.Wait()
		legacyRate, ngRate = float64(l1-l0)/el.Seconds(), float64(n1-n0)/el.Seconds()
		if n1 > n0 {
			cpuPerNG = (c1 - c0) / time.Duration(n1-n0)
		}
		return
	}
	// nsca-ng's server runs throughout, on the same FIFO, so that the same
	// nsca-ng client load can be pointed at either server while the legacy
	// clients run: the clients' own CPU then weighs the same in both.
	their := ngServer(t, progs.server, ids, theirPort)
	pid, theirPID := d.Pid(), their.cmd.Process.Pid
	alone, _, _ := measure(true, 0, pid)
	besideOurs, ngOurs, _ := measure(true, ngPort, pid)
	besideTheirs, ngTheirs, _ := measure(true, theirPort, pid)
	alone2, _, _ := measure(true, 0, pid)
	_, ours, oursCPU := measure(false, ngPort, pid)
	_, theirs, theirCPU := measure(false, theirPort, theirPID)
	their.terminate(5 * time.Second)
	d.Stop()

	base := (alone + alone2) / 2
	t.Logf("legacy send_nsca, %d loops of %d checks per connection: alone %.0f/s and %.0f/s; beside %d nsca-ng clients on our port %.0f/s (ratio %.2f; nsca-ng %.0f/s), beside the same load on nsca-ng-server's port %.0f/s (ratio %.2f; nsca-ng %.0f/s); ours/theirs %.2f",
		legacyLoops, perRun, alone, alone2, ngLoops, besideOurs, besideOurs/base, ngOurs, besideTheirs, besideTheirs/base, ngTheirs, besideOurs/besideTheirs)
	t.Logf("nsca-ng clients alone, %d loops of %d results per session: nsca_fast %.0f results/s, %v CPU per result; nsca-ng-server %.0f results/s, %v CPU per result",
		ngLoops, perRun, ours, oursCPU, theirs, theirCPU)
	beside := besideOurs
	if base == 0 || ours == 0 || theirs == 0 {
		t.Fatalf("a phase delivered nothing")
	}
	// A sanity bound only: this machine is shared, and the clients run on
	// the same two cores as the servers.
	if beside/base < 0.2 {
		t.Errorf("legacy throughput fell to %.0f%% of its own beside nsca-ng clients", 100*beside/base)
	}
}

// treeCPU is utime+stime of pid and of its live descendants, with what
// its waited-for children used: a server's whole process tree.
func treeCPU(t testing.TB, pid int) time.Duration {
	f, err := procStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	var ticks int64
	// Fields 14 to 17 of /proc/PID/stat (utime, stime, cutime, cstime)
	// are 12 to 15 here.
	for _, s := range f[11:15] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	cpu := time.Duration(ticks) * time.Second / 100
	for _, k := range childPIDs(pid) {
		cpu += treeCPU(t, k)
	}
	return cpu
}

// treeSwitches is the context switches, voluntary or not, of the threads
// of pid and of its live descendants. Per result they show whether a
// change makes a server sleep and wake less often (the idle path costs
// Go more than libev), which CPU per result alone, drifting with the
// shared machine's load, does not tell apart from noise.
func treeSwitches(pid int) int64 {
	var n int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		tid, err := strconv.Atoi(filepath.Base(task))
		if err != nil {
			continue
		}
		for _, field := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
			if f := procStatus(tid, field); len(f) > 0 {
				k, _ := strconv.ParseInt(f[0], 10, 64)
				n += k
			}
		}
	}
	for _, k := range childPIDs(pid) {
		n += treeSwitches(k)
	}
	return n
}

// ngShape is one client load of TestNscaNGBenchShapes: clients loops of
// the real send_nsca, each sending sessions of perSession results.
type ngShape struct {
	name                string
	clients, perSession int
}

// ngShapes are the two loads, their sizes from the environment:
// many results per session, and one result per connection (handshakes).
// NSCA_NG_BENCH_SHAPES ("a" or "b", default both) keeps some: a change
// that concerns one shape is measured in more rounds in the same time.
func ngShapes() []ngShape {
	env := func(name string, def int) int {
		if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
			return n
		}
		return def
	}
	all := []ngShape{
		{"(a) many results per session", env("NSCA_NG_BENCH_A_CLIENTS", 8), env("NSCA_NG_BENCH_A_RESULTS", 500)},
		{"(b) one result per connection", env("NSCA_NG_BENCH_B_CLIENTS", 100), env("NSCA_NG_BENCH_B_RESULTS", 1)},
	}
	only := os.Getenv("NSCA_NG_BENCH_SHAPES")
	if only == "" {
		return all
	}
	var kept []ngShape
	for _, sh := range all {
		if strings.Contains(only, sh.name[1:2]) {
			kept = append(kept, sh)
		}
	}
	return kept
}

// TestNscaNGBenchShapes measures server CPU and context switches per
// delivered result and results per second with the real nsca-ng client,
// in the shapes of ngShapes, for the servers on one FIFO: ours, ours with
// GOMAXPROCS=1 (what a governor that lowers it at low load gives), and
// nsca-ng-server;
// it prints ours/theirs. CPU is the server's process tree's utime+stime
// over a phase (NSCA_NG_BENCH_SECONDS, default 10, after a fifth of it to
// warm up) divided by the results the FIFO got meanwhile;
// NSCA_NG_BENCH_ROUNDS (default 1) repeats the phases, each round with
// another server first, and sums them. NSCA_NG_BENCH_BEFORE names another
// nsca binary (a build before a change) to measure beside them, or a
// script that execs one, as with GODEBUG settings to try: the PID stays
// the daemon's.
// NSCA_NG_BENCH=1 runs it; it asserts only that every phase delivered.
func TestNscaNGBenchShapes(t *testing.T) {
	if os.Getenv("NSCA_NG_BENCH") == "" {
		t.Skip("a benchmark: NSCA_NG_BENCH=1 runs it")
	}
	phase, progs, _, fifo, lines, ids, theirPort := ngBenchSetup(t)
	type server struct {
		name      string
		port, pid int
	}
	ours, oursPort, _ := ngStartDaemonWith(t, fifo, ids, nil, daemonOpts{dir: t.TempDir()})
	ours1, ours1Port, _ := ngStartDaemonWith(t, fifo, ids, nil, daemonOpts{dir: t.TempDir(), env: []string{"GOMAXPROCS=1"}})
	servers := []server{{"nsca_fast", oursPort, ours.Pid()}, {"nsca_fast GOMAXPROCS=1", ours1Port, ours1.Pid()}}
	// Another build of ours, measured in the same rounds: a change's
	// effect is then seen beside the noise of this shared machine.
	if bin := os.Getenv("NSCA_NG_BENCH_BEFORE"); bin != "" {
		before, beforePort, _ := ngStartDaemonWith(t, fifo, ids, nil, daemonOpts{dir: t.TempDir(), bin: bin})
		servers = append(servers, server{"nsca_fast before", beforePort, before.Pid()})
	}
	their := ngServer(t, progs.server, ids, theirPort)
	servers = append(servers, server{"nsca-ng-server", theirPort, their.cmd.Process.Pid})

	// measure runs one phase of sh against srv and returns the results
	// delivered and what its process tree used meanwhile.
	measure := func(sh ngShape, srv server) (p ngPhase) {
		input := strings.Repeat("nsca-ng\tsvc\t0\tnsca-ng load\x17", sh.perSession)
		c := ngClient{bin: progs.client, identity: "bench", password: "bench-secret", port: srv.port}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		ngLoad(sh.clients, stop, &wg, func() error { _, err := c.run(t, input); return err })
		time.Sleep(phase / 5)
		n0, c0, s0, t0 := lines.ng.Load(), treeCPU(t, srv.pid), treeSwitches(srv.pid), time.Now()
		time.Sleep(phase)
		n1, c1, s1, el := lines.ng.Load(), treeCPU(t, srv.pid), treeSwitches(srv.pid), time.Since(t0)
		close(stop)
		wg.Wait()
		if n1 == n0 {
			t.Errorf("%s, %s: no result delivered in %v", sh.name, srv.name, el)
		}
		return ngPhase{results: n1 - n0, switches: s1 - s0, cpu: c1 - c0, elapsed: el}
	}
	// Each round puts another server first: the machine's load drifts,
	// and the totals of every round weigh the servers alike.
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("NSCA_NG_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for _, sh := range ngShapes() {
		sums := make([]ngPhase, len(servers))
		for r := 0; r < rounds; r++ {
			for k := range servers {
				i := (r + k) % len(servers)
				p := measure(sh, servers[i])
				sums[i].add(p)
				t.Logf("%s, %d clients x %d results per session, round %d: %-22s %s",
					sh.name, sh.clients, sh.perSession, r+1, servers[i].name, p)
			}
		}
		theirs := sums[len(sums)-1].cpuPerResult()
		for i, srv := range servers {
			t.Logf("%s, all rounds: %-22s %s, ours/theirs %.2f", sh.name, srv.name, sums[i], sums[i].cpuPerResult()/theirs)
		}
	}
}

// ngPhase is what a server did in one phase of TestNscaNGBenchShapes, or
// in the sum of its rounds.
type ngPhase struct {
	results, switches int64
	cpu, elapsed      time.Duration
}

func (p *ngPhase) add(q ngPhase) {
	p.results, p.switches, p.cpu, p.elapsed = p.results+q.results, p.switches+q.switches, p.cpu+q.cpu, p.elapsed+q.elapsed
}

// cpuPerResult is the phase's CPU per result, in µs.
func (p ngPhase) cpuPerResult() float64 { return perResult(p.cpu, p.results) }

func (p ngPhase) String() string {
	var sw float64
	if p.results > 0 {
		sw = float64(p.switches) / float64(p.results)
	}
	return fmt.Sprintf("%7.0f results/s, %6.1f µs CPU per result, %5.2f context switches per result",
		float64(p.results)/p.elapsed.Seconds(), p.cpuPerResult(), sw)
}

// perResult is cpu divided among n results, in µs.
func perResult(cpu time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu) / float64(time.Microsecond) / float64(n)
}
