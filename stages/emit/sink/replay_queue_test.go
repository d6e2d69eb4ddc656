package sink

import (
	"fmt"
	"os"
	"testing"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/queue"
)

// TestReplayQueueAcksTakenPrefix: a replayed queue keeps every record from
// the first one a destination did not take, so that the next replay
// resumes there in order; a record that does not decode is reported and
// passed over; an emptied queue's directory is removed.
func TestReplayQueueAcksTakenPrefix(t *testing.T) {
	dir := t.TempDir() + "/gearman"
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		rec := appendRecord(nil, Item{Time: int64(i), Result: codec.Result{Host: "h", Service: fmt.Sprintf("s%d", i), Output: "out"}})
		if i == 2 {
			rec = []byte{99, 1, 2} // another version: skipped
		}
		if n, err := q.Append(rec); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	q.Close()
	if !isQueueDir(dir) || isQueueDir(t.TempDir()) {
		t.Fatalf("isQueueDir: the queue %v, an empty directory %v", isQueueDir(dir), isQueueDir(t.TempDir()))
	}

	var rep ReplayReport
	items, rq, err := readQueue(dir, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 5 || len(rep.Skipped) != 1 || items[2].Result.Service != "s3" {
		t.Fatalf("read %d items (third %q), skipped %v; want 5, s3, one skipped", len(items), items[2].Result.Service, rep.Skipped)
	}
	// Two destinations: both took the first three results, one the fourth.
	taken := []int{2, 2, 2, 1, 2}
	if err := rq.finish(taken, 2, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Acked != 4 || rep.QueueRemoved {
		t.Errorf("acked %d, removed %v; want 4 (two results, the bad record, one more), false", rep.Acked, rep.QueueRemoved)
	}

	rep = ReplayReport{}
	items, rq, err = readQueue(dir, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].Result.Service != "s4" || items[1].Result.Service != "s5" {
		t.Fatalf("the second replay read %d items, want s4 and s5", len(items))
	}
	if err := rq.finish([]int{1, 1}, 1, &rep); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) || rep.Acked != 2 || !rep.QueueRemoved {
		t.Errorf("after every record was taken: acked %d, removed %v, directory %v", rep.Acked, rep.QueueRemoved, err)
	}
}
