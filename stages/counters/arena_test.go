package counters

import (
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// countSome counts something in every row of st, keys of its own among them.
func countSome(t *testing.T, st *Stats) {
	t.Helper()
	for _, r := range rows {
		bump(t, st, r)
	}
	st.Emitted("fifo").Add(7)
	st.Dropped(DropBadCRC).Add(2)
	st.SecretMatches("password/XOR").Add(3)
	var b LatencyBatch
	b.Observe(300_000)
	b.Observe(2_000_000_000)
	st.Latency.Add(&b)
}

// TestArenaReadAsWritten: another reader of the arena's memory reads what
// the Stats counts there, scalars, keys and latency, as its own snapshot
// has it.
func TestArenaReadAsWritten(t *testing.T) {
	mem := make([]uint64, 4096)
	st := NewStatsIn(NewArena(mem))
	if !st.arena.Taken() {
		t.Fatal("the arena was not taken")
	}
	countSome(t, st)
	want := st.Snapshot()
	want.Durable = nil
	var got Snapshot
	if !ReadArena(mem, &got) {
		t.Fatal("ReadArena found no counters")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read from the arena:\n%+v\nwant the writer's snapshot:\n%+v", got, want)
	}
	// More counting shows at the next read, with no report in between.
	st.Received.Add(10)
	st.Emitted("fifo").Add(1)
	ReadArena(mem, &got)
	if got.Received != want.Received+10 || got.Emitted["fifo"] != want.Emitted["fifo"]+1 {
		t.Errorf("after counting more: received %d emitted %d, want %d and %d", got.Received, got.Emitted["fifo"], want.Received+10, want.Emitted["fifo"]+1)
	}
}

// TestArenaOneWriter: a second Stats on a taken arena counts on the heap,
// and never into the first one's cells.
func TestArenaOneWriter(t *testing.T) {
	mem := make([]uint64, 4096)
	a := NewArena(mem)
	first, second := NewStatsIn(a), NewStatsIn(a)
	if second.arena != nil {
		t.Fatal("a second Stats took a taken arena")
	}
	second.Received.Add(5)
	second.Emitted("fifo").Add(5)
	first.Received.Add(1)
	var got Snapshot
	ReadArena(mem, &got)
	if got.Received != 1 || got.Emitted["fifo"] != 0 {
		t.Errorf("the arena has received %d, emitted %v; want only the first Stats' 1 and nothing emitted", got.Received, got.Emitted)
	}
}

// TestArenaOtherLayout: memory that no Stats took, or that a binary of
// another layout wrote, reads as nothing.
func TestArenaOtherLayout(t *testing.T) {
	mem := make([]uint64, 4096)
	var s Snapshot
	if ReadArena(mem, &s) {
		t.Error("an untaken arena read as counters")
	}
	NewStatsIn(NewArena(mem)).Received.Add(1)
	mem[arenaLayout] ^= 2
	if ReadArena(mem, &s) || s.Received != 0 {
		t.Error("an arena of another layout read as counters")
	}
	if ReadArena(mem[:ArenaWords-1], &s) {
		t.Error("memory too small for the cells read as counters")
	}
}

// TestArenaFull: keys past the arena's room are counted on the heap; a
// read over the writer's last report keeps the report's values for them
// and takes the arena's for the rest.
func TestArenaFull(t *testing.T) {
	mem := make([]uint64, ArenaWords+2*(1+1+1)) // room for two short keys
	st := NewStatsIn(NewArena(mem))
	st.Emitted("a").Add(1)
	st.Emitted("b").Add(2)
	st.Emitted("c").Add(3)                                // no room
	st.Emitted(strings.Repeat("x", maxArenaKey+1)).Add(4) // too long
	if !st.arena.full {
		t.Error("the arena did not say it is full")
	}
	report := st.Snapshot()
	st.Emitted("a").Add(10)
	st.Emitted("c").Add(10)
	ReadArena(mem, &report)
	want := map[string]uint64{"a": 11, "b": 2, "c": 3, strings.Repeat("x", maxArenaKey+1): 4}
	if !reflect.DeepEqual(report.Emitted, want) {
		t.Errorf("emitted %v, want %v (c as last reported)", report.Emitted, want)
	}
}

// TestArenaReadWhileCounting: a reader running beside a writer that adds
// keys and counts never sees a key it did not write or a count going
// back.
func TestArenaReadWhileCounting(t *testing.T) {
	mem := make([]uint64, 1<<16)
	st := NewStatsIn(NewArena(mem))
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 2000 {
			st.SecretMatches("identity-" + strings.Repeat("k", i%40)).Add(1)
			st.Received.Add(1)
		}
		done.Store(true)
	}()
	var last uint64
	for !done.Load() {
		var s Snapshot
		ReadArena(mem, &s)
		for k := range s.SecretMatches {
			if !strings.HasPrefix(k, "identity-") || strings.Trim(k[len("identity-"):], "k") != "" {
				t.Fatalf("read a key never written: %q", k)
			}
		}
		if s.Received < last {
			t.Fatalf("received went back from %d to %d", last, s.Received)
		}
		last = s.Received
	}
	wg.Wait()
	var s Snapshot
	ReadArena(mem, &s)
	if s.Received != 2000 || len(s.SecretMatches) != 40 || sum(s.SecretMatches) != 2000 {
		t.Errorf("at the end: received %d, %d keys summing to %d; want 2000, 40, 2000", s.Received, len(s.SecretMatches), sum(s.SecretMatches))
	}
}
