package stage

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestShardedKeepsOrderPerKey: every item reaches one worker, the items of
// one key in the order they came, and done runs once all workers are done.
func TestShardedKeepsOrderPerKey(t *testing.T) {
	type item struct{ key, seq uint64 }
	in := make(chan item, 16)
	var mu sync.Mutex
	seen := map[uint64][]uint64{}
	worker := map[uint64]int{}
	done := make(chan struct{})
	Sharded(context.Background(), "test", in, 4, 16, func(v item) uint64 { return v.key },
		func(ctx context.Context, id int, in <-chan item) {
			for v := range in {
				mu.Lock()
				if w, ok := worker[v.key]; ok && w != id {
					t.Errorf("key %d handled by workers %d and %d", v.key, w, id)
				}
				worker[v.key] = id
				seen[v.key] = append(seen[v.key], v.seq)
				mu.Unlock()
			}
		}, func() { close(done) })
	for seq := uint64(0); seq < 100; seq++ {
		for key := uint64(0); key < 7; key++ {
			in <- item{key, seq}
		}
	}
	close(in)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("done did not run")
	}
	for key := uint64(0); key < 7; key++ {
		if len(seen[key]) != 100 {
			t.Fatalf("key %d: %d items, want 100", key, len(seen[key]))
		}
		for i, seq := range seen[key] {
			if seq != uint64(i) {
				t.Fatalf("key %d: item %d is seq %d", key, i, seq)
			}
		}
	}
}

// TestSendWatchesCancellation: a send on a full channel returns false once
// the pipeline is torn down instead of blocking.
func TestSendWatchesCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	full := make(chan int)
	res := make(chan bool)
	go func() { res <- Send(ctx, full, 1) }()
	cancel()
	select {
	case ok := <-res:
		if ok {
			t.Fatal("Send reported delivery on a channel nobody reads")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Send blocked after cancellation")
	}
}
