package emit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/internal/testkit"
)

// memorySink records what it is given; with gate set, every Write waits
// for the gate to close first (a stalled remote engine); with fail set,
// it takes nothing.
type memorySink struct {
	name string
	gate chan struct{}
	fail bool
	mu   sync.Mutex
	got  []string
}

func (m *memorySink) Name() string { return m.name }
func (m *memorySink) Close() error { return nil }
func (m *memorySink) Write(items []sink.Item) (int, error) {
	if m.gate != nil {
		<-m.gate
	}
	if m.fail {
		return 0, errors.New("refused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		m.got = append(m.got, it.Result.Host)
	}
	return len(items), nil
}

func (m *memorySink) hosts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.got...)
}

func feed(n int) chan sink.Item {
	in := make(chan sink.Item, n)
	for i := range n {
		in <- sink.Item{Result: codec.Result{Host: fmt.Sprintf("h%03d", i)}}
	}
	close(in)
	return in
}

// A stalled destination overflows into its fallback once its queue is
// full, and the others get every result without waiting for it.
func TestEmitterStalledDestinationOverflows(t *testing.T) {
	fast := &memorySink{name: "fast"}
	stalled := &memorySink{name: "stalled", gate: make(chan struct{})}
	stalledFallback := &memorySink{name: "stalled-fallback"}
	overflow := &memorySink{name: "stalled-overflow"}
	stats := counters.NewStats()
	e := newEmitter([]Destination{
		{Name: "local", Chain: []sink.Sink{fast}, Capacity: 10, Blocking: true},
		{Name: "remote", Chain: []sink.Sink{stalled, stalledFallback}, Overflow: []sink.Sink{overflow}, Capacity: 10},
	}, stats, counters.NewRateLog(time.Second, 5))
	const n = 300
	stats.Received.Add(n)
	done := make(chan struct{})
	e.start(context.Background(), feed(n), done)
	if !testkit.WaitFor(5*time.Second, func() bool { return len(fast.hosts()) == n }) {
		t.Fatalf("the fast destination got %d of %d results while the other was stalled", len(fast.hosts()), n)
	}
	close(stalled.gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the emitter did not finish")
	}
	remote := len(stalled.hosts()) + len(overflow.hosts())
	if remote != n || len(overflow.hosts()) == 0 || len(stalled.hosts()) > 10+maxBatch {
		t.Errorf("stalled sink got %d, its overflow %d; want %d in all, most in the overflow", len(stalled.hosts()), len(overflow.hosts()), n)
	}
	snap := stats.Snapshot()
	if snap.FellBack["remote"] != uint64(len(overflow.hosts())) {
		t.Errorf("fell back from remote = %d, want %d", snap.FellBack["remote"], len(overflow.hosts()))
	}
	if snap.Queued() != 0 || snap.Finished != n {
		t.Errorf("queued=%d finished=%d after the drain, want 0 and %d", snap.Queued(), snap.Finished, n)
	}
}

// A destination whose sink fails hands the results to its fallback and
// counts them; what no sink takes is dropped and counted.
func TestEmitterFallbackAndDrop(t *testing.T) {
	dead := &memorySink{name: "dead", fail: true}
	fallback := &memorySink{name: "dump"}
	deadAlone := &memorySink{name: "dead-alone", fail: true}
	stats := counters.NewStats()
	e := newEmitter([]Destination{
		{Name: "a", Chain: []sink.Sink{dead, fallback}, Capacity: 1000},
		{Name: "b", Chain: []sink.Sink{deadAlone}, Capacity: 1000},
	}, stats, counters.NewRateLog(time.Second, 5))
	stats.Received.Add(20)
	done := make(chan struct{})
	e.start(context.Background(), feed(20), done)
	<-done
	snap := stats.Snapshot()
	if len(fallback.hosts()) != 20 || snap.Emitted["dump"] != 20 || snap.FellBack["dead"] != 20 || snap.SinkErrors["dead"] == 0 {
		t.Errorf("fallback got %d; emitted %v, fell back %v, errors %v", len(fallback.hosts()), snap.Emitted, snap.FellBack, snap.SinkErrors)
	}
	if snap.Dropped[counters.DropSink] != 20 || snap.FellBack["dead-alone"] != 0 {
		t.Errorf("dropped %v, fell back %v; want 20 sink_failed from the destination without a fallback", snap.Dropped, snap.FellBack)
	}
	if snap.Queued() != 0 {
		t.Errorf("queued=%d after the drain", snap.Queued())
	}
}

// Once the drain is aborted, results still queued for a remote destination
// skip its (hung) sink and go to its fallback.
func TestEmitterAbortSkipsRemote(t *testing.T) {
	hung := &memorySink{name: "hung", gate: make(chan struct{})}
	fallback := &memorySink{name: "dump"}
	stats := counters.NewStats()
	e := newEmitter([]Destination{
		// Room for the ten single-result batches the loop below queues.
		{Name: "remote", Chain: []sink.Sink{hung, fallback}, Capacity: 16 * maxBatch, Remote: true},
	}, stats, counters.NewRateLog(time.Second, 5))
	ctx, abort := context.WithCancel(context.Background())
	in := make(chan sink.Item)
	done := make(chan struct{})
	e.start(ctx, in, done)
	in <- sink.Item{Result: codec.Result{Host: "first"}}
	// The first result is inside the hung sink's Write; the rest queue.
	d := e.dests[0]
	if !testkit.WaitFor(5*time.Second, func() bool { return d.queued.Load() == 1 && len(d.queue) == 0 }) {
		t.Fatal("the first result was not taken off the queue")
	}
	for i := range 10 {
		in <- sink.Item{Result: codec.Result{Host: fmt.Sprintf("q%d", i)}}
	}
	close(in)
	abort()
	close(hung.gate) // the hung Write returns (here: delivering its one result)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the emitter did not finish after the abort")
	}
	if got := len(fallback.hosts()); got != 10 || len(hung.hosts()) != 1 {
		t.Errorf("after the abort: fallback got %d, hung sink %d; want 10 and 1", got, len(hung.hosts()))
	}
	if fb := stats.Snapshot().FellBack["hung"]; fb != 10 {
		t.Errorf("fell back from the hung sink: %d, want 10", fb)
	}
}

// The local destination alone is served without a dispatcher: every result
// reaches its sink in order, the batch being written counts in its queue,
// and while its sink stalls the stage takes no more than in holds.
func TestEmitterAloneServesInOrder(t *testing.T) {
	stalled := &memorySink{name: "fifo", gate: make(chan struct{})}
	stats := counters.NewStats()
	e := newEmitter([]Destination{{Name: "local", Chain: []sink.Sink{stalled}, Capacity: 4, Blocking: true}},
		stats, counters.NewRateLog(time.Second, 5))
	in := make(chan sink.Item, 4)
	done := make(chan struct{})
	e.start(context.Background(), in, done)
	in <- sink.Item{Result: codec.Result{Host: "h000"}}
	d := e.dests[0]
	if !testkit.WaitFor(5*time.Second, func() bool { return d.queued.Load() == 1 && len(in) == 0 }) {
		t.Fatal("the first result was not taken into a write")
	}
	for i := 1; i <= cap(in); i++ {
		in <- sink.Item{Result: codec.Result{Host: fmt.Sprintf("h%03d", i)}}
	}
	select {
	case in <- sink.Item{Result: codec.Result{Host: "over"}}:
		t.Fatal("the stage took more than in holds while its sink stalled")
	default:
	}
	close(in)
	close(stalled.gate)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the emitter did not finish")
	}
	got := stalled.hosts()
	if len(got) != cap(in)+1 {
		t.Fatalf("the sink got %v", got)
	}
	for i, h := range got {
		if h != fmt.Sprintf("h%03d", i) {
			t.Fatalf("out of order: %v", got)
		}
	}
	if d.queued.Load() != 0 {
		t.Errorf("queued=%d after the drain", d.queued.Load())
	}
}
