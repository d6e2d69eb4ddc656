package stages

import (
	"maps"
	"slices"
	"testing"

	"nsca_fast/stages/counters"
)

// TestSnapshotIntoQueues: a running server's snapshot shows every queue
// between stages and each destination's, and a snapshot reused from
// another server (a reload) loses the queues that server had and this one
// does not.
func TestSnapshotIntoQueues(t *testing.T) {
	ts := startServer(t, nil)
	var snap counters.Snapshot
	snap.Queues = map[string]int64{"destination_gone": 7}
	ts.srv.SnapshotInto(&snap)
	got := slices.Sorted(maps.Keys(snap.Queues))
	want := append(slices.Clone(stageQueues[:]), "destination_local")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("queues in the snapshot %v, want %v", got, want)
	}
	ts.srv.SnapshotInto(&snap)
	if got2 := slices.Sorted(maps.Keys(snap.Queues)); !slices.Equal(got2, want) {
		t.Errorf("queues in the second snapshot %v, want %v", got2, want)
	}
}
