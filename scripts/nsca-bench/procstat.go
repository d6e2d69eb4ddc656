package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procInfo is what one /proc/<pid>/stat says.
type procInfo struct {
	pid, ppid int
	// ticks is utime+stime+cutime+cstime: the process's own CPU time and
	// that of the children it has reaped, so a forking server (stock's
	// --daemon reaps a child per connection) keeps its children's CPU time
	// after they are gone.
	ticks uint64
	own   uint64 // utime+stime alone
}

func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// The command name is in parentheses and may contain anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 15 {
		return procInfo{}, false
	}
	num := func(n int) uint64 {
		v, _ := strconv.ParseUint(string(f[n-3]), 10, 64)
		return v
	}
	return procInfo{pid: pid, ppid: int(num(4)), ticks: num(14) + num(15) + num(16) + num(17), own: num(14) + num(15)}, true
}

// tree returns root and all its descendants, with their stat.
func tree(root int) []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procInfo{}
	var rootInfo procInfo
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readStat(pid)
		if !ok {
			continue
		}
		if pid == root {
			rootInfo, found = p, true
		}
		children[p.ppid] = append(children[p.ppid], p)
	}
	if !found {
		return nil
	}
	out := []procInfo{rootInfo}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}

// OthersCPU returns the own CPU time (utime+stime, in ticks) of every live
// process outside root's tree and other than nsca-bench itself: what the
// rest of the machine (other people's tests) takes from the daemon and the
// generator. Processes that end between two calls are missed.
func OthersCPU(root int) map[int]uint64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	skip := map[int]bool{os.Getpid(): true}
	if root > 0 {
		for _, p := range tree(root) {
			skip[p.pid] = true
		}
	}
	out := map[int]uint64{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skip[pid] {
			continue
		}
		if p, ok := readStat(pid); ok {
			out[pid] = p.own
		}
	}
	return out
}

// othersSince is the CPU time the processes of now used since before (a
// process absent from before counts whole: it began during the run).
func othersSince(before, now map[int]uint64) time.Duration {
	var t uint64
	for pid, v := range now {
		if b, ok := before[pid]; ok && b <= v {
			t += v - b
		} else if !ok {
			t += v
		}
	}
	return time.Duration(t) * time.Second / clockTicks
}

// TreeCPU is the CPU time used so far by root and its descendants (live or
// reaped by a process of the tree), and how many processes there are.
func TreeCPU(root int) (time.Duration, int, error) {
	ps := tree(root)
	if len(ps) == 0 {
		return 0, 0, fmt.Errorf("process %d not found", root)
	}
	var t uint64
	for _, p := range ps {
		t += p.ticks
	}
	return time.Duration(t) * time.Second / clockTicks, len(ps), nil
}

// memInfo reads VmRSS and VmHWM (kB) of one process.
func memInfo(pid int) (rss, hwm uint64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) >= 2 {
			*dst, _ = strconv.ParseUint(string(f[1]), 10, 64)
		}
	}
	return rss, hwm
}

// TreeRSS sums VmRSS and VmHWM (kB) over root and its descendants.
func TreeRSS(root int) (rss, hwm uint64, procs int) {
	m := treeMemory(root, false)
	return m.rss, m.hwm, m.procs
}

// treeMem is the memory of a process tree (kB), summed over its processes.
type treeMem struct {
	rss, hwm, pss uint64
	procs         int
}

// treeMemory sums VmRSS, VmHWM and, withPSS (a read of each process's
// smaps_rollup more), PSS over root and its descendants in one walk of
// /proc.
func treeMemory(root int, withPSS bool) (m treeMem) {
	for _, p := range tree(root) {
		r, h := memInfo(p.pid)
		m.rss += r
		m.hwm += h
		if withPSS {
			m.pss += pss(p.pid)
		}
		m.procs++
	}
	return m
}

// pss reads the proportional set size (kB) of one process: its private
// pages plus its share of pages it shares (the binary's and libraries'
// text, mapped by every worker). Summed over a tree it is the memory the
// tree takes, where summed VmRSS counts each shared page once per process.
func pss(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(line); len(f) >= 2 && string(f[0]) == "Pss:" {
			n, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return n
		}
	}
	return 0
}

// RSSSample is the process tree's summed VmRSS (and PSS) at one moment.
type RSSSample struct {
	At    time.Duration // since the sampler started
	KB    uint64
	PSSKB uint64
	Procs int
}

// RSSSampler samples the tree's RSS every interval until Stop.
type RSSSampler struct {
	root     int
	interval time.Duration
	start    time.Time
	mu       sync.Mutex
	samples  []RSSSample
	maxProcs int
	stop     chan struct{}
	done     chan struct{}
}

// StartRSSSampler begins sampling root's process tree at once.
func StartRSSSampler(root int, interval time.Duration) *RSSSampler {
	s := &RSSSampler{root: root, interval: interval, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *RSSSampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			s.sample()
			return
		case <-t.C:
		}
	}
}

func (s *RSSSampler) sample() {
	m := treeMemory(s.root, true)
	if m.procs == 0 {
		return
	}
	s.mu.Lock()
	s.samples = append(s.samples, RSSSample{At: time.Since(s.start), KB: m.rss, PSSKB: m.pss, Procs: m.procs})
	s.maxProcs = max(s.maxProcs, m.procs)
	s.mu.Unlock()
}

// Stop takes a last sample and returns all of them.
func (s *RSSSampler) Stop() []RSSSample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// machineCPU returns the CPU time all CPUs spent busy (not idle or waiting
// for I/O) and the time they spent in softirq, from /proc/stat.
func machineCPU() (busy, softirq time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 8 || string(f[0]) != "cpu" {
		return 0, 0
	}
	var total uint64
	var v [10]uint64
	for i := 1; i < len(f) && i <= 8; i++ { // guest time is already in user
		v[i], _ = strconv.ParseUint(string(f[i]), 10, 64)
		total += v[i]
	}
	idle := v[4] + v[5]
	tick := func(n uint64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	return tick(total - idle), tick(v[7])
}

// loadAvg returns the 1-minute load average, 0 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}
