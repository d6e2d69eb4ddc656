package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Run performs one benchmark run. Progress and warnings go to log.
func Run(o Options, log *os.File) (*Result, error) {
	cipher, err := NewCipher(o.Method, o.Password, o.Legacy)
	if err != nil {
		return nil, err
	}
	cipher.GoAES = o.GoAES
	r := &run{o: o, log: log, cipher: cipher, res: newResult(o, cipher),
		addr: net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), start: time.Now(), sent: new(times), recv: new(times)}
	if r.sink, err = OpenSink(o.FIFO, r.clock, r.recv); err != nil {
		return nil, err
	}
	r.sink.Start()
	defer r.sink.Close()
	if o.Spool != "" {
		defer r.sink.WatchSpool(o.Spool, 20*time.Millisecond)()
	}
	if err := r.watchServer(); err != nil {
		return nil, err
	}
	if o.Burst {
		r.slots = make(chan struct{}, runtime.GOMAXPROCS(0))
	}
	r.holdIdle()
	defer r.closeIdle()
	if o.Ahead {
		if r.prepared, err = prepareAhead(r.addr, cipher, o.Total, o.ChecksPerConn, o.Timeout, log); err != nil {
			return nil, err
		}
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	if err := r.drain(); err != nil {
		return nil, err
	}
	r.memory()
	r.count()
	r.costs()
	r.latency()
	return r.res, nil
}

// run is the state of one Run: the clients' counters, the measurements
// taken before and after the load, and the result being filled in.
type run struct {
	o      Options
	log    *os.File
	cipher Cipher
	res    *Result
	addr   string

	start      time.Time // the clock's zero
	sent, recv *times    // per check id: clock when sent, when its line was read
	sink       *Sink
	sampler    *RSSSampler
	idle       []*net.TCPConn
	prepared   []*preparedConn // --ahead's connections

	loadStart      time.Time
	loadStartClock int64
	lastLine       int64 // clock of the last line matched once the sink was drained
	sendEnd        time.Time
	deadline       time.Time // zero: none (--total only)
	before, after  usage
	wall           float64 // seconds from loadStart until the sink was drained

	nextID      atomic.Uint64
	sentCount   atomic.Uint64
	failed      atomic.Uint64
	dialErrors  atomic.Uint64
	connections atomic.Uint64
	firstErr    atomic.Pointer[string]
	nextPrep    atomic.Int64
	// slots bounds the --burst clients encrypting and writing at once to
	// GOMAXPROCS: the others wait parked, not runnable, so that the FIFO
	// reader is not queued behind thousands of goroutines for a P (which
	// would add seconds to the latencies it clocks).
	slots    chan struct{}
	childCPU atomic.Int64 // ns of CPU time of the --exec-client or --ng-client processes
}

// usage is the CPU time the server's tree, nsca-bench, the other processes
// and the machine had used at one moment.
type usage struct {
	server, self, busy, softirq time.Duration
	others                      map[int]uint64
}

func newResult(o Options, cipher Cipher) *Result {
	res := &Result{
		Workload: o.Workload, Daemon: o.Daemon, Method: o.Method, Algorithm: cipher.Algorithm,
		PacketSize: cipher.PacketSize(), ChecksPerConn: o.ChecksPerConn, Conns: o.Conns, Rate: o.Rate, Idle: o.Idle,
		ServerPID: o.ServerPID, Generator: "nsca-bench",
	}
	switch {
	case o.Ahead:
		res.Generator = "nsca-bench --ahead"
	case o.ExecClient != "":
		res.Generator = filepath.Base(o.ExecClient)
	case o.NGClient != "":
		res.Generator = "nsca-ng " + filepath.Base(o.NGClient)
	case o.NRDP != "":
		res.Generator = "nsca-bench NRDP"
		res.PacketSize = 0
	}
	return res
}

// clock is nanoseconds since the run began, never 0: 0 marks "not yet".
func (r *run) clock() int64 { return int64(time.Since(r.start)) + 1 }

// watchServer takes the server's memory at rest and starts sampling it.
func (r *run) watchServer() error {
	pid := r.o.ServerPID
	if pid <= 0 {
		return nil
	}
	if _, _, err := TreeCPU(pid); err != nil {
		return fmt.Errorf("--server-pid: %w", err)
	}
	before := treeMemory(pid, true)
	r.res.RSSBeforeKB, r.res.PSSBeforeKB = before.rss, before.pss
	r.sampler = StartRSSSampler(pid, 100*time.Millisecond)
	return nil
}

// holdIdle opens --idle connections and takes the server's RSS with them.
func (r *run) holdIdle() {
	r.idle = openIdle(r.addr, r.o.Idle, r.o.Timeout, r.log)
	r.res.IdleOpened = len(r.idle)
	if r.o.ServerPID > 0 && r.o.Idle > 0 {
		time.Sleep(300 * time.Millisecond)
		r.res.RSSIdleKB, _, _ = TreeRSS(r.o.ServerPID)
	}
}

func (r *run) closeIdle() {
	for _, c := range r.idle {
		c.Close()
	}
}

// load sends the checks, by the --exec-client program, on the --ahead
// connections, or by --conns live clients (NSCA, --ng-client or --nrdp),
// and returns when all are sent.
func (r *run) load() error {
	if r.o.ServerPID > 0 {
		r.before.server, _, _ = TreeCPU(r.o.ServerPID)
	}
	r.before.self = selfCPU()
	r.before.others = OthersCPU(r.o.ServerPID)
	r.before.busy, r.before.softirq = machineCPU()
	r.loadStart = time.Now()
	r.loadStartClock = r.clock()
	if r.o.Duration > 0 {
		r.deadline = r.loadStart.Add(r.o.Duration)
	}
	if r.o.ExecClient != "" {
		if err := r.execLoad(); err != nil {
			return err
		}
	}
	if r.prepared != nil {
		r.nextID.Store(r.o.Total)
	}
	var nrdp *http.Client
	if r.o.NRDP != "" {
		nrdp = nrdpClient(r.o.Conns, r.o.Timeout)
	}
	var wg sync.WaitGroup
	for w := range r.o.Conns {
		if r.o.ExecClient != "" {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case r.prepared != nil:
				r.sendPrepared()
			case r.o.NGClient != "":
				r.sendNG(w)
			case nrdp != nil:
				r.sendNRDP(w, nrdp)
			default:
				r.sendLive(w)
			}
		}()
	}
	wg.Wait()
	r.sendEnd = time.Now()
	r.res.SendSeconds = r.sendEnd.Sub(r.loadStart).Seconds()
	r.res.Sent = r.sentCount.Load()
	return nil
}

// execLoad runs the --exec-client program and takes its counts.
func (r *run) execLoad() error {
	sent, errs, conns, cpu, err := runExecClient(r.o, r.cipher, r.log)
	r.childCPU.Add(int64(cpu))
	r.connections.Store(conns)
	if err != nil {
		return err
	}
	r.sentCount.Store(sent)
	r.failed.Store(errs)
	r.nextID.Store(sent)
	return nil
}

// sendPrepared sends --ahead's connections, the next one not yet taken
// each time, until none is left.
func (r *run) sendPrepared() {
	for {
		i := int(r.nextPrep.Add(1) - 1)
		if i >= len(r.prepared) {
			return
		}
		r.connections.Add(1)
		n, err := r.prepared[i].send(r.sent, r.clock)
		r.sentCount.Add(uint64(n))
		if err != nil {
			r.failed.Add(1)
			r.noteErr(err)
		}
	}
}

// sendLive is client w: a connection at a time, each with the next
// --checks-per-conn ids, until the ids or the time run out. With --burst
// the connection is opened at its first check's turn.
func (r *run) sendLive(w int) {
	for n := uint64(0); ; n++ {
		first, count := r.take()
		if count == 0 {
			return
		}
		var cc *ClientConn
		if r.o.Burst {
			if !r.pace(first) {
				return
			}
			if cc = r.arrive(uint64(w)<<40|n, count); cc == nil {
				continue
			}
		} else if cc = r.dial(uint64(w)<<40 | n); cc == nil {
			return
		}
		r.connections.Add(1)
		for id := first; id < first+count; id++ {
			if r.pastDeadline() || !r.pace(id) {
				break
			}
			if r.slots != nil {
				r.slots <- struct{}{}
			}
			err := cc.Send(ResultFor(id))
			now := r.clock()
			if r.slots != nil {
				<-r.slots
			}
			if err != nil {
				r.failed.Add(1)
				r.noteErr(err)
				break
			}
			r.sent.set(id, now)
			r.sentCount.Add(1)
		}
		cc.Close()
	}
}

// dial connects, retrying every 10 ms until it succeeds or the deadline
// passes (nil).
func (r *run) dial(seed uint64) *ClientConn {
	for {
		cc, err := Dial(r.addr, r.cipher, seed, r.o.Timeout)
		if err == nil {
			return cc
		}
		r.dialErrors.Add(1)
		r.noteErr(err)
		if r.pastDeadline() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// arrive is --burst's connect: once, as a send_nsca client of a fleet does
// at its turn. When it fails, the count checks it was to send are lost:
// they count as sent and failed, and nil is returned.
func (r *run) arrive(seed, count uint64) *ClientConn {
	cc, err := Dial(r.addr, r.cipher, seed, r.o.Timeout)
	if err != nil {
		r.dialErrors.Add(1)
		r.failed.Add(1)
		r.sentCount.Add(count)
		r.noteErr(err)
		return nil
	}
	return cc
}

func (r *run) pastDeadline() bool {
	return !r.deadline.IsZero() && !time.Now().Before(r.deadline)
}

func (r *run) noteErr(err error) {
	s := err.Error()
	if r.firstErr.CompareAndSwap(nil, &s) {
		fmt.Fprintf(r.log, "nsca-bench: first error: %v\n", err)
	}
}

// take reserves the ids of the next connection's checks, before it is
// opened, so that no connection is opened only to find nothing to send.
func (r *run) take() (first, n uint64) {
	if r.pastDeadline() {
		return 0, 0
	}
	k := uint64(r.o.ChecksPerConn)
	first = r.nextID.Add(k) - k
	limit := maxIDs
	if r.o.Total > 0 {
		limit = r.o.Total
	}
	if first >= limit {
		return 0, 0
	}
	return first, min(k, limit-first)
}

// pace waits for id's turn at --rate; false if that is past the deadline.
func (r *run) pace(id uint64) bool {
	if r.o.Rate <= 0 {
		return true
	}
	at := r.loadStart.Add(time.Duration(float64(id) / r.o.Rate * float64(time.Second)))
	if !r.deadline.IsZero() && at.After(r.deadline) {
		return false
	}
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
	return true
}

// drain waits for the lines of the checks sent, then takes the CPU times
// after the load: the server's once it has finished with the connections.
func (r *run) drain() error {
	if !r.sink.WaitFor(r.res.Sent, r.o.Quiet) {
		fmt.Fprintf(r.log, "nsca-bench: only %d of %d checks delivered after %v without a new line\n", r.sink.Delivered.Load(), r.res.Sent, r.o.Quiet)
	}
	r.lastLine = r.sink.LastRecv.Load()
	r.after.self = selfCPU() + time.Duration(r.childCPU.Load())
	r.after.busy, r.after.softirq = machineCPU()
	r.after.others = OthersCPU(r.o.ServerPID)
	r.wall = time.Since(r.loadStart).Seconds()
	if r.o.ServerPID > 0 {
		// Let the server finish with the connections that just closed (stock's
		// children exit and are reaped) before reading its CPU time.
		time.Sleep(r.o.Settle)
		cpu, procs, err := TreeCPU(r.o.ServerPID)
		if err != nil {
			return fmt.Errorf("server process after the run: %w", err)
		}
		r.after.server = cpu
		r.res.ServerProcs = procs
		r.res.ServerCPUSec = (r.after.server - r.before.server).Seconds()
	}
	r.res.IdleOpenAtEnd = countOpen(r.idle)
	return nil
}

// memory stops the sampler and takes the peaks and the RSS 1 s into the
// load and at its end.
func (r *run) memory() {
	if r.sampler == nil {
		return
	}
	res := r.res
	samples := r.sampler.Stop()
	loadAt := r.loadStart.Sub(r.sampler.start)
	endAt := r.sendEnd.Sub(r.sampler.start)
	for _, s := range samples {
		res.RSSPeakKB = max(res.RSSPeakKB, s.KB)
		res.PSSPeakKB = max(res.PSSPeakKB, s.PSSKB)
		res.ServerMaxProcs = max(res.ServerMaxProcs, s.Procs)
		if s.At >= loadAt+time.Second && res.RSSFirstKB == 0 {
			res.RSSFirstKB = s.KB
		}
		if s.At <= endAt {
			res.RSSLastKB = s.KB
		}
	}
	if res.RSSFirstKB == 0 && len(samples) > 0 {
		res.RSSFirstKB = samples[len(samples)-1].KB
	}
	_, res.HWMSumKB, _ = TreeRSS(r.o.ServerPID)
}

// count takes the clients' and the sink's counts, and the rate from the
// first send to the last line.
func (r *run) count() {
	res, sink := r.res, r.sink
	res.Delivered = sink.Delivered.Load()
	res.Failed, res.DialErrors, res.Connections = r.failed.Load(), r.dialErrors.Load(), r.connections.Load()
	res.Duplicates, res.Unknown, res.Mismatched = sink.Duplicates.Load(), sink.Unknown.Load(), sink.Mismatched.Load()
	res.FloorLines = sink.Floor.Load()
	res.FirstBad = sink.FirstBad()
	res.SinkFullReads = sink.FullReads.Load()
	if r.lastLine > r.loadStartClock {
		res.ElapsedSeconds = float64(r.lastLine-r.loadStartClock) / 1e9
		res.ChecksPerSec = float64(res.Delivered) / res.ElapsedSeconds
	}
}

// costs shares the CPU time used during the run out: the machine's cores,
// the other processes', nsca-bench's and the server's per check.
func (r *run) costs() {
	res, wall, self := r.res, r.wall, r.after.self-r.before.self
	res.MachineBusyCores = (r.after.busy - r.before.busy).Seconds() / wall
	res.LoadAvg = loadAvg()
	res.OtherProcsCores = othersSince(r.before.others, r.after.others).Seconds() / wall
	res.SoftirqCores = (r.after.softirq - r.before.softirq).Seconds() / wall
	res.OtherCores = res.MachineBusyCores - self.Seconds()/wall - res.ServerCPUSec/wall
	if res.Sent > 0 {
		res.ClientCPUUsPerCheck = float64(self) / 1e3 / float64(res.Sent)
	}
	if res.Delivered > 0 && r.o.ServerPID > 0 {
		res.CPUUsPerCheck = res.ServerCPUSec * 1e6 / float64(res.Delivered)
		if res.Connections > 0 {
			res.CPUUsPerConn = res.ServerCPUSec * 1e6 / float64(res.Connections)
		}
	}
}

// latency takes the percentiles of last byte written to line read over
// the checks that were both.
func (r *run) latency() {
	issued := min(r.nextID.Load(), maxIDs)
	if r.o.Total > 0 {
		issued = min(issued, r.o.Total)
	}
	lat := make([]int64, 0, r.res.Delivered)
	for id := range issued {
		s, rc := r.sent.get(id), r.recv.get(id)
		if s != 0 && rc != 0 {
			// The line may be read before the writer's clock call returned.
			lat = append(lat, max(rc-s, 0))
		}
	}
	if len(lat) == 0 {
		lat = latencyByOrder(r.sent, issued, r.sink.FloorArrivals())
		r.res.LatencyByOrder = len(lat) > 0
	}
	r.res.LatencyP50Ms, r.res.LatencyP99Ms, r.res.LatencyMaxMs = percentilesMs(lat)
}

// latencyByOrder estimates the latencies of lines that carry no id
// (floor_server's): the k-th line read is taken for the k-th check sent,
// which holds while the server handles checks in the order they arrive
// (one check per connection, arrivals spread out, as in --burst).
func latencyByOrder(sent *times, issued uint64, arrivals []int64) []int64 {
	var at []int64
	for id := range issued {
		if s := sent.get(id); s != 0 {
			at = append(at, s)
		}
	}
	slices.Sort(at)
	slices.Sort(arrivals)
	lat := make([]int64, 0, min(len(at), len(arrivals)))
	for i := range min(len(at), len(arrivals)) {
		lat = append(lat, max(arrivals[i]-at[i], 0))
	}
	return lat
}

func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentilesMs returns p50, p99 and max of nanosecond samples, in ms.
func percentilesMs(ns []int64) (p50, p99, pmax float64) {
	if len(ns) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ns)
	at := func(q float64) float64 {
		i := int(q*float64(len(ns))+0.5) - 1
		i = min(max(i, 0), len(ns)-1)
		return float64(ns[i]) / 1e6
	}
	return at(0.50), at(0.99), float64(ns[len(ns)-1]) / 1e6
}
