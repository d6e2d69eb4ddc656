package stages

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The global read budget holds readBudgetWork of decrypting: a slow cipher
// shrinks it, so that a backlog waits in the kernel rather than in our
// queues, and a fast one leaves it at its byte limit.
func TestReadBudgetFollowsTheDecryptCost(t *testing.T) {
	b := newReadBudget(2, 1)
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
	c := &Conn{}
	b.take(c, int(want))
	if !b.spent() {
		t.Fatalf("%d bytes in flight under a limit of %d: not spent", want, b.limit.Load())
	}
	b.release(c, int(want))
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
	if got := newReadBudget(2, 2).limit.Load(); got != readBudgetBytes/2 {
		t.Fatalf("nsca_workers=2: limit %d, want %d", got, readBudgetBytes/2)
	}
	b := newReadBudget(2, 4)
	for range 100 {
		b.observe(4304, time.Microsecond)
	}
	if got := b.limit.Load(); got != readBudgetBytes/4 {
		t.Fatalf("nsca_workers=4, a fast cipher: limit %d, want %d", got, readBudgetBytes/4)
	}
	if got := newReadBudget(1, 1000).limit.Load(); got != readBudgetMin {
		t.Fatalf("1,000 workers: limit %d, want the minimum %d", got, readBudgetMin)
	}
}

// A read that fills little of its buffer moves to the smallest class that
// holds it, so the budget counts about its bytes: a send_nsca packet read
// alone into libmcrypt's 64 KiB buffer counted 64 KiB, and five such
// connections spent a 3DES budget. A buffer at most four times too large
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
// own budget still keeps it paused: accept used to greet nobody until
// decrypt had consumed that connection's chunk, and the CPUs went idle
// while every client waited for an init packet.
func TestHeldBackEndsWithTheGlobalBudget(t *testing.T) {
	b := newReadBudget(1, 1)
	b.limit.Store(readBudgetMin)
	r, err := newReader(ReadConfig{budget: b}, nil, nil)
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
	if err := r.epoll.add(fds[0]); err != nil {
		t.Fatal(err)
	}
	c, other := &Conn{fd: fds[0], reader: r}, &Conn{}
	b.take(c, readBudgetPerConn) // c's own budget is spent
	b.take(other, readBudgetMin) // and so is the global one
	r.pause(c)
	if !b.behind() {
		t.Fatal("with the global budget spent and a connection held back, accept is not behind")
	}
	b.release(other, readBudgetMin)
	r.resume()
	if b.behind() {
		t.Fatalf("the global budget has room (%d of %d) but accept is still held back by %d connections", b.inflight.Load(), b.limit.Load(), b.heldBack.Load())
	}
	if _, still := r.paused[c]; !still {
		t.Fatal("c was resumed although its own budget is spent")
	}
	b.release(c, readBudgetPerConn)
	r.resume()
	if _, still := r.paused[c]; still || b.heldBack.Load() != 0 {
		t.Fatalf("after its chunk was consumed: paused %v, held back %d", still, b.heldBack.Load())
	}
}
