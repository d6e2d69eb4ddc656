package replay

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"nsca_fast/stages/emit/durable"
	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/queue"
)

// takeN is a remote destination that takes its first n results, then
// refuses every further one.
type takeN struct {
	name string
	n    int
	got  []string
}

func (s *takeN) Name() string { return s.name }
func (s *takeN) Close() error { return nil }
func (s *takeN) Write(items []sink.Item) (int, error) {
	k := max(0, min(len(items), s.n-len(s.got)))
	for _, it := range items[:k] {
		s.got = append(s.got, it.Result.Service)
	}
	if k < len(items) {
		return k, errors.New("down")
	}
	return k, nil
}

// queueServices queues n results named s0, s1, ... in dir; the record
// numbered bad does not decode.
func queueServices(t *testing.T, dir string, n, bad int) {
	t.Helper()
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i := range n {
		rec := durable.AppendRecord(nil, sink.Item{Time: int64(i), Result: codec.Result{Host: "h", Service: fmt.Sprintf("s%d", i), Output: "out"}})
		if i == bad {
			rec = []byte{99, 1, 2} // another version: skipped
		}
		if k, err := q.Append(rec); k != 1 || err != nil {
			t.Fatal(k, err)
		}
	}
}

// replayQueueOnce delivers the queue in dir to sinks in chunks of 3.
func replayQueueOnce(t *testing.T, dir string, sinks ...sink.Sink) Report {
	t.Helper()
	rep := Report{Delivered: map[string]int{}, Left: map[string]int{}, Refused: map[string]int{}}
	rq, err := openReplayQueue(dir)
	if err != nil {
		t.Fatal(err)
	}
	rq.chunk = 3
	rq.deliver(sinks, &tracker{rep: &rep}, &rep)
	return rep
}

// TestReplayQueueResumesInOrder: a queue is delivered in chunks, and a
// replay stops at the first result a destination did not take: what every
// destination took is acknowledged, the rest stays for the next replay,
// which resumes there; a record that does not decode is reported and passed
// over; the emptied queue's directory is removed.
func TestReplayQueueResumesInOrder(t *testing.T) {
	dir := t.TempDir() + "/gearman"
	queueServices(t, dir, 10, 2)
	if !isQueueDir(dir) || isQueueDir(t.TempDir()) {
		t.Fatalf("isQueueDir: the queue %v, an empty directory %v", isQueueDir(dir), isQueueDir(t.TempDir()))
	}

	// b goes down after 5 results: s0 s1 (bad) s3 | s4 s5 ...
	a, b := &takeN{name: "a", n: 100}, &takeN{name: "b", n: 5}
	rep := replayQueueOnce(t, dir, a, b)
	if rep.Acked != 6 || rep.QueueRemoved || len(rep.Skipped) != 1 {
		t.Errorf("first replay: acked %d, removed %v, skipped %v; want 6 (s0 s1, the bad record, s3 s4 s5), false, one", rep.Acked, rep.QueueRemoved, rep.Skipped)
	}
	if want := []string{"s0", "s1", "s3", "s4", "s5"}; !slices.Equal(b.got, want) {
		t.Errorf("b got %v, want %v", b.got, want)
	}
	// The third chunk (s6 s7 s8): a took it, b none; s9 was not read.
	if rep.Left["b"] != 4 || rep.Left["a"] != 1 {
		t.Errorf("left %v, want b 4 (s6 s7 s8, and s9 unread), a 1 (s9)", rep.Left)
	}

	// s6 s7 s8 were not acknowledged, so a gets them again: at least once.
	a2, b2 := &takeN{name: "a", n: 100}, &takeN{name: "b", n: 100}
	rep = replayQueueOnce(t, dir, a2, b2)
	if want := []string{"s6", "s7", "s8", "s9"}; !slices.Equal(b2.got, want) || !slices.Equal(a2.got, want) {
		t.Errorf("the second replay sent a %v, b %v; want %v to both", a2.got, b2.got, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) || rep.Acked != 4 || !rep.QueueRemoved {
		t.Errorf("after every record was taken: acked %d, removed %v, directory %v", rep.Acked, rep.QueueRemoved, err)
	}
}
