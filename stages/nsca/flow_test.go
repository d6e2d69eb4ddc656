package nsca

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The global read budget holds readBudgetWork of decrypting: a slow cipher
// shrinks it, so that a backlog waits in the kernel rather than in our
// queues, and a fast one leaves it at its byte limit.
func TestReadBudgetFollowsTheDecryptCost(t *testing.T) {
	b := newFlow(2, 1, nil)
	if got := b.limit.Load(); got != readBudgetBytes {
		t.Fatalf("before any cost is known: limit %d, want %d", got, readBudgetBytes)
	}
	for range 50 {
		b.observe(4304, time.Millisecond) // 3DES: about 1 ms a packet
	}
	want := int64(readBudgetWork) * 2 / (int64(time.Millisecond) * 1024 / 4304) * 1024
	if got := b.limit.Load(); got < want*9/10 || got > want*11/10 {
		t.Fatalf("3DES-like cost: limit %d, want about %d (%d packets)", got, want, want/4304)
	}
	c := &clientConn{}
	b.take(c, int(want))
	if !b.spent() {
		t.Fatalf("%d bytes in flight under a limit of %d: not spent", want, b.limit.Load())
	}
	b.giveBack(c, int(want))
	for range 100 {
		b.observe(4304, 100*time.Millisecond) // very slow: far below the minimum
	}
	if got := b.limit.Load(); got != readBudgetMin {
		t.Fatalf("a very slow cipher: limit %d, want the minimum %d", got, readBudgetMin)
	}
	for range 100 {
		b.observe(4304, time.Microsecond) // native AES
	}
	if got := b.limit.Load(); got != readBudgetBytes {
		t.Fatalf("a fast cipher: limit %d, want %d", got, readBudgetBytes)
	}
	b.observe(100, time.Hour) // too short to time: ignored
	if got := b.limit.Load(); got != readBudgetBytes {
		t.Fatalf("a 100-byte sample moved the limit to %d", got)
	}
}

func TestReadBudgetIsSharedByTheWorkers(t *testing.T) {
	if got := newFlow(2, 2, nil).limit.Load(); got != readBudgetBytes/2 {
		t.Fatalf("nsca_workers=2: limit %d, want %d", got, readBudgetBytes/2)
	}
	b := newFlow(2, 4, nil)
	for range 100 {
		b.observe(4304, time.Microsecond)
	}
	if got := b.limit.Load(); got != readBudgetBytes/4 {
		t.Fatalf("nsca_workers=4, a fast cipher: limit %d, want %d", got, readBudgetBytes/4)
	}
	if got := newFlow(1, 1000, nil).limit.Load(); got != readBudgetMin {
		t.Fatalf("1,000 workers: limit %d, want the minimum %d", got, readBudgetMin)
	}
}

// A read that fills little of its buffer moves to the smallest class that
// holds it, so the budget counts about its bytes: a send_nsca packet read
// alone into libmcrypt's 64 KiB buffer would count 64 KiB, and five such
// connections would spend a 3DES budget. A buffer at most four times too large
// is kept, so XOR's 16 KiB reads are not copied.
func TestShrinkChunk(t *testing.T) {
	for _, tc := range []struct{ bufCap, n, wantCap int }{
		{64 << 10, 4304, 8 << 10},
		{64 << 10, 500, smallChunkSize},
		{64 << 10, 12000, chunkSize},
		{64 << 10, 30000, 64 << 10},
		{chunkSize, 4304, chunkSize},
		{chunkSize, 1000, smallChunkSize},
		{chunkSize, 5000, chunkSize},
		{2 << 10, 100, 2 << 10},
	} {
		b := getBuf(tc.bufCap)
		for i := range tc.n {
			b[i] = byte(i)
		}
		got := shrinkChunk(b, tc.n)
		if cap(got) != tc.wantCap || len(got) != tc.n {
			t.Errorf("%d bytes read into %d: len %d cap %d, want cap %d", tc.n, tc.bufCap, len(got), cap(got), tc.wantCap)
		}
		for i := range tc.n {
			if got[i] != byte(i) {
				t.Fatalf("%d bytes read into %d: byte %d is %d after the move", tc.n, tc.bufCap, i, got[i])
			}
		}
		putBuf(got)
	}
}

// A connection paused while the global budget was spent holds back the
// accept stage only until the global budget has room again, even if its
// own budget still keeps it paused: were accept to greet nobody until
// decrypt had consumed that connection's chunk, the CPUs would go idle
// while every client waited for an init packet.
func TestHeldBackEndsWithTheGlobalBudget(t *testing.T) {
	b := newFlow(1, 1, nil)
	b.limit.Store(readBudgetMin)
	r, err := newReader(readConfig{flow: b}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := r.epoll.Add(fds[0]); err != nil {
		t.Fatal(err)
	}
	c, other := &clientConn{read: connRead{fd: fds[0], reader: r}}, &clientConn{}
	b.take(c, readBudgetPerConn) // c's own budget is spent
	b.take(other, readBudgetMin) // and so is the global one
	r.pause(c)
	if !b.behind() {
		t.Fatal("with the global budget spent and a connection held back, accept is not behind")
	}
	b.giveBack(other, readBudgetMin)
	r.resume()
	if b.behind() {
		t.Fatalf("the global budget has room (%d of %d) but accept is still held back by %d connections", b.inflight.Load(), b.limit.Load(), b.heldBack.Load())
	}
	if _, still := r.paused[c]; !still {
		t.Fatal("c was resumed although its own budget is spent")
	}
	b.giveBack(c, readBudgetPerConn)
	r.resume()
	if _, still := r.paused[c]; still || b.heldBack.Load() != 0 {
		t.Fatalf("after its chunk was consumed: paused %v, held back %d", still, b.heldBack.Load())
	}
}

// waitRoomAsync runs f.waitRoom in a goroutine and returns its result channel.
func waitRoomAsync(ctx context.Context, f *flow, stop <-chan struct{}) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- f.waitRoom(ctx, stop) }()
	return done
}

// waitedUntil fails t unless the wait has ended with want within a bound
// generous for a loaded machine.
func waitedUntil(t *testing.T, done <-chan bool, want bool, what string) {
	t.Helper()
	select {
	case got := <-done:
		if got != want {
			t.Fatalf("%s: waitRoom returned %v, want %v", what, got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: waitRoom still waits after 5 s", what)
	}
}

// stillWaits fails t if the wait ended within a short while.
func stillWaits(t *testing.T, done <-chan bool, what string) {
	t.Helper()
	select {
	case got := <-done:
		t.Fatalf("%s: waitRoom returned %v while the flow is behind", what, got)
	case <-time.After(20 * time.Millisecond):
	}
}

// Accept waits at the gate without polling: with the fallback recheck an
// hour long, only the events that open the gate end the wait, each of
// them, and nothing else does.
func TestWaitRoomIsWokenByWhatOpensTheGate(t *testing.T) {
	ctx := context.Background()
	f := newFlow(1, 1, nil)
	f.recheck = time.Hour
	waitedUntil(t, waitRoomAsync(ctx, f, nil), true, "nothing in flight")

	c := &clientConn{}
	f.take(c, int(f.limit.Load()))
	done := waitRoomAsync(ctx, f, nil)
	stillWaits(t, done, "global budget spent")
	f.giveBack(c, int(f.limit.Load()))
	waitedUntil(t, done, true, "budget given back")

	f.saturate(true)
	f.saturate(true)
	done = waitRoomAsync(ctx, f, nil)
	stillWaits(t, done, "two readers saturated")
	f.saturate(false)
	stillWaits(t, done, "one reader still saturated")
	f.saturate(false)
	waitedUntil(t, done, true, "no reader saturated")

	f.take(c, int(f.limit.Load()))
	f.pause(c)
	f.giveBack(c, int(f.limit.Load()))
	if f.heldBack.Load() != 1 {
		t.Fatalf("a connection paused while the budget was spent: held back %d, want 1", f.heldBack.Load())
	}
	done = waitRoomAsync(ctx, f, nil)
	stillWaits(t, done, "a connection held back")
	f.release(c)
	waitedUntil(t, done, true, "the held-back connection released")
	f.unpause(c)
	if f.heldBack.Load() != 0 || c.flow.paused.Load() {
		t.Fatalf("after unpause: held back %d, paused %v", f.heldBack.Load(), c.flow.paused.Load())
	}

	for range 50 {
		f.observe(4304, 100*time.Millisecond) // the limit shrinks to its minimum
	}
	f.take(c, readBudgetMin)
	done = waitRoomAsync(ctx, f, nil)
	stillWaits(t, done, "the shrunk budget spent")
	for range 100 {
		f.observe(4304, time.Microsecond)
	}
	waitedUntil(t, done, true, "the limit grew back")
	f.giveBack(c, readBudgetMin)
}

// Stopping the accept stage (stop closed, or the pipeline's context
// cancelled) ends a wait at once, whatever the budget.
func TestWaitRoomEndsWithStop(t *testing.T) {
	f := newFlow(1, 1, nil)
	f.recheck = time.Hour
	f.take(&clientConn{}, int(f.limit.Load()))
	stop := make(chan struct{})
	done := waitRoomAsync(context.Background(), f, stop)
	stillWaits(t, done, "budget spent")
	close(stop)
	waitedUntil(t, done, false, "stop closed")

	ctx, cancel := context.WithCancel(context.Background())
	done = waitRoomAsync(ctx, f, nil)
	stillWaits(t, done, "budget spent")
	cancel()
	waitedUntil(t, done, false, "context cancelled")
	if n := f.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters counted after every wait ended", n)
	}
}

// The queue ahead drains without telling the flow, so a wait for it
// alone ends by the recheck: soon after the queue has room, not before.
func TestWaitRoomRechecksAFullQueue(t *testing.T) {
	queue := make(chan int, 1)
	queue <- 1
	f := newFlow(1, 1, func() bool { return len(queue) == cap(queue) })
	if !f.behind() {
		t.Fatal("a full queue ahead: not behind")
	}
	done := waitRoomAsync(context.Background(), f, nil)
	stillWaits(t, done, "queue full")
	<-queue
	waitedUntil(t, done, true, "queue drained")
}

// Many accept goroutines (one per listening socket) wait at once, and one
// opening wakes all of them.
func TestWaitRoomWakesEveryWaiter(t *testing.T) {
	f := newFlow(1, 1, nil)
	f.recheck = time.Hour
	c := &clientConn{}
	f.take(c, int(f.limit.Load()))
	var dones []<-chan bool
	for range 4 {
		dones = append(dones, waitRoomAsync(context.Background(), f, nil))
	}
	for _, d := range dones {
		stillWaits(t, d, "budget spent")
	}
	f.giveBack(c, int(f.limit.Load()))
	for _, d := range dones {
		waitedUntil(t, d, true, "budget given back")
	}
}
