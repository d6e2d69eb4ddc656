package emit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/internal/emittest"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/internal/testkit"
)

// checkedSink is a takerSink that can be checked: Check fails while it
// does.
type checkedSink struct{ takerSink }

func (c *checkedSink) Check() error {
	if c.fail.Load() {
		return errFailing
	}
	return nil
}

// running is an emitter over dests with its Health, fed through in.
type running struct {
	health *Health
	stats  *counters.Stats
	in     chan sink.Item
	done   chan struct{}
}

func startHealth(t *testing.T, dests []Destination) *running {
	t.Helper()
	r := &running{health: NewHealth(), stats: counters.NewStats(), in: make(chan sink.Item), done: make(chan struct{})}
	e := newEmitter(dests, r.stats, counters.NewRateLog(time.Second, 5))
	r.health.e.Store(e)
	e.start(context.Background(), r.in, r.done)
	t.Cleanup(func() {
		close(r.in)
		<-r.done
	})
	return r
}

// send hands n results to the emitter.
func (r *running) send(n int) {
	for _, it := range emittest.Items(n, 10) {
		r.in <- it
	}
}

// waitAccepting waits for Accepting to say want, and returns its error.
func (r *running) waitAccepting(t *testing.T, want bool, within time.Duration) error {
	t.Helper()
	var err error
	if !testkit.WaitFor(within, func() bool {
		var ok bool
		ok, err = r.health.Accepting()
		return ok == want
	}) {
		t.Fatalf("Accepting did not turn %v within %v (error: %v)", want, within, err)
	}
	return err
}

// A destination whose only sink fails is down, with the sink's error;
// without a sink to check, it is given results again after retryFirst,
// and up as soon as one is written; failing again, it waits longer.
func TestHealthDownUntilAWriteSucceeds(t *testing.T) {
	s := &takerSink{name: "remote"}
	r := startHealth(t, []Destination{{Name: "icinga2", Chain: []sink.Sink{s}, Capacity: 100}})
	if ok, err := r.health.Accepting(); !ok || err != nil {
		t.Fatalf("Accepting before any write = %v, %v", ok, err)
	}
	s.fail.Store(true)
	r.send(1)
	err := r.waitAccepting(t, false, 5*time.Second)
	if !errors.Is(err, ErrDown) || !strings.Contains(err.Error(), "icinga2") || !strings.Contains(err.Error(), errFailing.Error()) {
		t.Errorf("the reason %q does not name the destination and the sink's error", err)
	}
	time.Sleep(retryFirst / 2)
	if ok, _ := r.health.Accepting(); ok {
		t.Fatal("accepting again before retryFirst")
	}
	r.waitAccepting(t, true, 2*retryFirst) // the retry: results may come
	r.send(1)                              // and fail again: a longer wait
	r.waitAccepting(t, false, 5*time.Second)
	if o := r.health.e.Load().dests[0].chain.results.p.Load(); o == nil || o.wait != 2*retryFirst {
		t.Errorf("the second outage waits %v, want %v", o.wait, 2*retryFirst)
	}
	s.fail.Store(false)
	r.waitAccepting(t, true, 3*retryFirst)
	r.send(1)
	time.Sleep(50 * time.Millisecond)
	if ok, err := r.health.Accepting(); !ok || len(s.items()) != 1 {
		t.Errorf("after a write went through: Accepting = %v, %v; sink has %v", ok, err, s.items())
	}
}

// A destination whose sink can be checked comes back up once the check
// succeeds, without a result to try it.
func TestHealthCheckBringsItBack(t *testing.T) {
	s := &checkedSink{takerSink: takerSink{name: "file"}}
	r := startHealth(t, []Destination{{Name: "local", Chain: []sink.Sink{s}, Capacity: 100, Blocking: true}})
	s.fail.Store(true)
	r.send(3)
	r.waitAccepting(t, false, 5*time.Second)
	if o := r.health.e.Load().dests[0].chain.results.p.Load(); o.retryAt != 0 {
		t.Error("a checkable destination is given results to retry it")
	}
	time.Sleep(checkEvery + 200*time.Millisecond)
	if ok, _ := r.health.Accepting(); ok {
		t.Fatal("up again while its check fails")
	}
	s.fail.Store(false)
	r.waitAccepting(t, true, 2*checkEvery+time.Second)
	if len(s.items()) != 0 {
		t.Errorf("the sink was written to: %v", s.items())
	}
	if snap := r.stats.Snapshot(); snap.Dropped[counters.DropSink] != 3 {
		t.Errorf("dropped %v, want the 3 results", snap.Dropped)
	}
}

// A failing sink whose fallback takes the results leaves the destination
// up; any destination down makes Accepting false.
func TestHealthFallbackAndAnyDestination(t *testing.T) {
	failing := &takerSink{name: "fifo"}
	failing.fail.Store(true)
	fallback := &takerSink{name: "spool"}
	alone := &takerSink{name: "icinga2"}
	r := startHealth(t, []Destination{
		{Name: "local", Chain: []sink.Sink{failing, fallback}, Capacity: 100},
		{Name: "icinga2", Chain: []sink.Sink{alone}, Capacity: 100},
	})
	r.send(5)
	if !testkit.WaitFor(5*time.Second, func() bool { return len(fallback.items()) == 5 && len(alone.items()) == 5 }) {
		t.Fatal("the results did not arrive")
	}
	if ok, err := r.health.Accepting(); !ok {
		t.Fatalf("down while the fallback takes the results: %v", err)
	}
	alone.fail.Store(true)
	r.send(1)
	err := r.waitAccepting(t, false, 5*time.Second)
	if !strings.Contains(err.Error(), "destination icinga2") {
		t.Errorf("the reason %q does not name destination icinga2", err)
	}
}

// AcceptingCommands is false without a destination that writes commands,
// and follows the command file's outages.
func TestHealthCommands(t *testing.T) {
	spoolOnly := startHealth(t, []Destination{{Name: "local", Chain: []sink.Sink{sink.NewSpool(t.TempDir(), 0)}, Capacity: 100}})
	if ok, err := spoolOnly.health.AcceptingCommands(); ok || !errors.Is(err, ErrNoCommandSink) {
		t.Errorf("AcceptingCommands with a spool only = %v, %v", ok, err)
	}
	if ok, err := spoolOnly.health.Accepting(); !ok {
		t.Errorf("Accepting with a spool = %v, %v", ok, err)
	}
	cmd := &checkedSink{takerSink: takerSink{name: "fifo", takes: true}}
	spool := &takerSink{name: "spool"}
	r := startHealth(t, []Destination{{Name: "local", Chain: []sink.Sink{cmd, spool}, Capacity: 100, Blocking: true}})
	if ok, err := r.health.AcceptingCommands(); !ok {
		t.Fatalf("AcceptingCommands with a command file = %v, %v", ok, err)
	}
	cmd.fail.Store(true)
	r.in <- sink.Item{Time: 1, Command: "DISABLE_NOTIFICATIONS"}
	r.send(1)
	if !testkit.WaitFor(5*time.Second, func() bool { ok, _ := r.health.AcceptingCommands(); return !ok }) {
		t.Fatal("AcceptingCommands stayed true with the command file failing")
	}
	if ok, err := r.health.Accepting(); !ok {
		t.Errorf("results are down too, though the spool takes them: %v", err)
	}
	cmd.fail.Store(false)
	if !testkit.WaitFor(3*checkEvery, func() bool { ok, _ := r.health.AcceptingCommands(); return ok }) {
		t.Error("AcceptingCommands did not recover once the command file's check succeeded")
	}
}

// Against a real full file system: a regular command file on a full tmpfs
// without a spool or dump file turns the destination down, and freeing
// space brings it back up through the command file's check alone.
func TestHealthFullTmpfs(t *testing.T) {
	dir := emittest.SmallFS(t, "size=256k")
	path := filepath.Join(dir, "nagios.cmd")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := sink.NewCommandFile(path, true, false)
	r := startHealth(t, []Destination{{Name: "local", Chain: []sink.Sink{c}, Capacity: 1000, Blocking: true}})
	sent := 0
	for ; sent < 5000; sent++ {
		if ok, _ := r.health.Accepting(); !ok {
			break
		}
		r.in <- emittest.Item(1762153445, fmt.Sprintf("host%d", sent), "disk", 0, strings.Repeat("x", 500))
	}
	err := r.waitAccepting(t, false, 5*time.Second)
	if !strings.Contains(err.Error(), "no space") {
		t.Errorf("the reason %q is not the full disk", err)
	}
	t.Logf("down after %d results: %v", sent, err)
	time.Sleep(checkEvery + 200*time.Millisecond)
	if ok, _ := r.health.Accepting(); ok {
		t.Fatal("up again while the file system is still full")
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	r.waitAccepting(t, true, 2*checkEvery+time.Second)
	r.send(3)
	time.Sleep(100 * time.Millisecond)
	if ok, err := r.health.Accepting(); !ok {
		t.Errorf("down again after space was freed: %v", err)
	}
	if got, _ := os.ReadFile(path); strings.Count(string(got), "\n") != 3 {
		t.Errorf("the command file holds %d lines after the recovery, want 3", strings.Count(string(got), "\n"))
	}
}

// A destination whose queue is full and whose overflow fails is down
// until its queue has room again.
func TestHealthOverflow(t *testing.T) {
	stalled := &memorySink{name: "stalled", gate: make(chan struct{})}
	overflow := &takerSink{name: "spool"}
	overflow.fail.Store(true)
	r := startHealth(t, []Destination{
		{Name: "icinga2", Chain: []sink.Sink{stalled}, Overflow: []sink.Sink{overflow}, Capacity: 10},
		{Name: "gearman", Chain: []sink.Sink{&takerSink{name: "gearman"}}, Capacity: 1000},
	})
	for range 20 {
		r.send(1)
	}
	err := r.waitAccepting(t, false, 5*time.Second)
	if !strings.Contains(err.Error(), "icinga2's overflow") {
		t.Errorf("the reason %q does not name the overflow", err)
	}
	close(stalled.gate)
	r.waitAccepting(t, true, 5*time.Second)
}
