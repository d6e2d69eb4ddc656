package nsca

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/frontend"
	"nsca_fast/stages/rawsys"
	"nsca_fast/stages/stage"
)

// readConfig are the read stage's settings.
type readConfig struct {
	// Readers is how many epoll loops share the connections.
	Readers int
	// Timeout closes a connection that delivers less than one legacy packet's
	// worth of bytes (720) within this long: idle clients, stalled clients and
	// slowloris alike. Stock's equivalent is its 10 s socket timeout.
	Timeout time.Duration
	// Grace is how long a connection may stay silent once accepting has
	// stopped: a client still sending goes on (it may be in the middle of a
	// packet), bounded by the larger of Grace and Timeout from the start of
	// the drain; an idle one is closed.
	Grace time.Duration
	// admission lets in the client a PROXY header names; shared with the
	// accept stage.
	admission *admission

	// flow bounds what is read ahead of the decrypt stage, which gives it
	// back, and gates the accept stage. Nil: startRead makes its own.
	flow *flow
	// ChunkSize is the largest read, chunkSize when 0: one hand-off to
	// decrypt per chunk, so a slow cipher (libmcrypt's) gets larger ones,
	// a connection's whole burst.
	ChunkSize int

	// intake, when set, is how the accept stage hands connections over
	// without a channel: startRead fills it with its readers.
	intake *readIntake
}

// readIntake hands a new connection straight to a reader: registering it
// with the reader's epoll set is all the hand-off there is, and no
// goroutine wakes for it (the next thing to happen on a new connection is
// an epoll event anyway). Connections taken over from elsewhere (inetd's)
// still come through startRead's channel.
type readIntake struct {
	mu      sync.Mutex
	readers []*reader
	next    int
}

// register gives c to the readers in turn; false means none takes it (the
// read stage is not running or has ended), and c is still the caller's.
func (in *readIntake) register(c *clientConn) bool {
	in.mu.Lock()
	if len(in.readers) == 0 {
		in.mu.Unlock()
		return false
	}
	r := in.readers[in.next%len(in.readers)]
	in.next++
	in.mu.Unlock()
	return r.register(c)
}

// minProgress is the least a client must send per Timeout to stay connected.
const minProgress = codec.LegacySize

// reader multiplexes many connections on one epoll instance in one
// goroutine, so 10,000 open connections cost 10,000 small structs, not
// 10,000 goroutines.
type reader struct {
	cfg    readConfig
	stats  *counters.Stats
	log    *counters.RateLog
	epoll  *frontend.EpollSet
	wakefd int
	flow   *flow
	// paused are the connections not polled for want of budget; only the
	// loop goroutine touches it.
	paused map[*clientConn]struct{}
	// saturated is set while epoll reports more ready connections than the
	// reader takes in one round; the loop goroutine owns it and counts it
	// in flow.saturate.
	saturated bool

	mu       sync.Mutex
	conns    connTable
	closeQ   []*clientConn
	draining bool
	exited   bool // the loop has ended and wakefd is closed

	// now is the loop's clock, taken once per epoll_wait, so marking a
	// connection active costs no clock read per read.
	now int64
	// readAt is when the last epoll_wait returned ready sockets: the
	// read time of the chunks its round forwards, for the latency
	// histogram.
	readAt int64
}

// requestClose asks the connection's reader to close it. It never blocks,
// because the stages that call it are downstream of the reader, and a
// blocking call back upstream could deadlock a full pipeline.
func (c *clientConn) requestClose() {
	r := c.read.reader
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeQ = append(r.closeQ, c)
	r.wakeLocked()
}

// wake interrupts the reader's epoll_wait from another goroutine.
func (r *reader) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wakeLocked()
}

// wakeLocked interrupts the reader's epoll_wait. It runs under r.mu, so it
// cannot write to the eventfd after the reader closed it (and the number
// went to another file).
func (r *reader) wakeLocked() {
	if r.exited {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	rawsys.Write(r.wakefd, one[:])
}

// startRead runs n readers. Each takes new connections from in, reads what
// they send and forwards it, in order, as chunks to out, which it closes
// once every reader has finished: after in is closed and the open
// connections have ended or used up their grace.
func startRead(ctx context.Context, in <-chan *clientConn, out *stage.Shards[chunk], cfg readConfig, env stage.Env) error {
	n := max(cfg.Readers, 1)
	if cfg.flow == nil {
		cfg.flow = newFlow(1, 1, nil)
	}
	readers := make([]*reader, 0, n)
	for range n {
		r, err := newReader(cfg, env.Stats, env.Log)
		if err != nil {
			for _, r := range readers {
				r.close()
			}
			return err
		}
		readers = append(readers, r)
	}
	if cfg.intake != nil {
		cfg.intake.mu.Lock()
		cfg.intake.readers = readers
		cfg.intake.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, r := range readers {
		stage.Go(ctx, &wg, "read", func(ctx context.Context) { r.loop(ctx, out) })
		stage.Go(ctx, &wg, "read", func(ctx context.Context) { r.adopt(in) })
	}
	go func() {
		wg.Wait()
		for _, r := range readers {
			r.close()
		}
		out.Close()
	}()
	return nil
}

// newReader makes a reader's epoll instance and its wake-up eventfd.
func newReader(cfg readConfig, stats *counters.Stats, log *counters.RateLog) (*reader, error) {
	cfg.ChunkSize = cmp.Or(cfg.ChunkSize, chunkSize)
	r := &reader{cfg: cfg, stats: stats, log: log, wakefd: -1, flow: cfg.flow, paused: map[*clientConn]struct{}{}}
	var err error
	if r.epoll, err = frontend.NewEpollSet(); err == nil {
		if r.wakefd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err == nil {
			err = r.epoll.Add(r.wakefd)
		}
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("nsca: read: %w", err)
	}
	r.flow.register(r)
	return r, nil
}

// close releases the reader's descriptors once its loop has ended (or
// never started); under r.mu, so no wake-up can write to a closed eventfd.
func (r *reader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exited {
		return
	}
	r.exited = true
	if r.epoll != nil {
		r.epoll.Close()
	}
	if r.wakefd >= 0 {
		unix.Close(r.wakefd)
	}
}

// adopt registers the connections sent on in with this reader's epoll
// instance. The adopters of all readers compete for in, which spreads
// connections over the readers that are least busy taking them. in closes
// when accepting stops: that starts the drain.
func (r *reader) adopt(in <-chan *clientConn) {
	for c := range in {
		if !r.register(c) {
			rawsys.Close(c.read.fd)
			r.stats.Open.Add(-1)
		}
	}
	r.mu.Lock()
	r.draining = true
	r.wakeLocked()
	r.mu.Unlock()
}

// register has this reader serve c; false once its loop has ended.
func (r *reader) register(c *clientConn) bool {
	c.read.reader = r
	c.read.windowStart = time.Now().UnixNano()
	c.read.lastActive = c.read.windowStart
	r.mu.Lock()
	if r.exited {
		r.mu.Unlock()
		return false
	}
	r.conns.put(c)
	r.mu.Unlock()
	if err := r.epoll.Add(c.read.fd); err != nil {
		glog.Errorf("read: epoll_ctl add %s: %v", c.Peer, err)
		c.requestClose()
	}
	return true
}

func (r *reader) loop(ctx context.Context, out *stage.Shards[chunk]) {
	events := make([]unix.EpollEvent, 256)
	lastScan := time.Now()
	var drainDeadline time.Time
	var drainStart int64
	for {
		n, err := r.epoll.Wait(events, 200*time.Millisecond)
		if n > 0 {
			r.readAt = time.Now().UnixNano()
		}
		// A full array of events means more clients are ready than one
		// round serves: the accept stage holds back new ones meanwhile.
		if full := n == len(events); full != r.saturated {
			r.saturated = full
			r.flow.saturate(full)
		}
		if err != nil && err != unix.EINTR {
			glog.Errorf("read: epoll_wait: %v", err)
			r.closeAll(ctx, out, "read error")
			return
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == int32(r.wakefd) {
				r.handleWake(ctx, out)
				continue
			}
			r.mu.Lock()
			c := r.conns.get(ev.Fd)
			r.mu.Unlock()
			if c != nil {
				r.readConn(ctx, c, out)
			}
		}
		if ctx.Err() != nil {
			r.closeAll(ctx, out, "shutdown")
			return
		}
		now := time.Now()
		r.now = now.UnixNano()
		r.resume()
		if now.Sub(lastScan) >= time.Second/2 {
			lastScan = now
			r.expire(ctx, out, now)
		}
		r.mu.Lock()
		draining, open := r.draining, r.conns.len()
		r.mu.Unlock()
		if draining {
			if drainDeadline.IsZero() {
				drainStart = now.UnixNano()
				drainDeadline = now.Add(max(r.cfg.Grace, r.cfg.Timeout))
			}
			if open == 0 || now.After(drainDeadline) {
				r.closeAll(ctx, out, "shutdown grace expired")
				return
			}
			r.closeIdle(ctx, out, now.Add(-r.cfg.Grace).UnixNano(), drainStart)
		}
	}
}

func (r *reader) handleWake(ctx context.Context, out *stage.Shards[chunk]) {
	var b [8]byte
	rawsys.Read(r.wakefd, b[:])
	r.mu.Lock()
	q := r.closeQ
	r.closeQ = nil
	r.mu.Unlock()
	for _, c := range q {
		r.closeConn(ctx, c, out, "closed after a rejected packet")
	}
}

// maxReadsPerEvent bounds the reads for one connection per readiness
// event, so a fast client cannot starve the others on the same reader.
const maxReadsPerEvent = 4

// readConn reads what the connection has, forwarding each read as a chunk,
// until the socket is drained, the client has closed, or the per-event
// budget is spent (level-triggered epoll reports the rest). Reading on to
// EAGAIN or EOF saves a trip through epoll_wait for the common client that
// sends its checks and closes at once, and the last read waits for what the
// next one finds: such a client's checks and its end go downstream as one
// chunk, one hand-off rather than two.
func (r *reader) readConn(ctx context.Context, c *clientConn, out *stage.Shards[chunk]) {
	if c.read.awaitingHeader && !r.readHeader(ctx, c, out) {
		return
	}
	var held []byte
	flush := func() bool {
		if held == nil {
			return true
		}
		b := held
		held = nil
		return out.Send(ctx, chunk{conn: c, buf: b, readAt: r.readAt})
	}
	for reads := 0; reads < maxReadsPerEvent; {
		if r.flow.connSpent(c) {
			if flush() {
				r.pause(c)
			}
			return
		}
		buf := getBuf(r.cfg.ChunkSize)
		n, err := rawsys.Read(c.read.fd, buf)
		switch {
		case n > 0:
			reads++
			c.read.bytesRead += uint64(n)
			c.read.lastActive = r.now
			r.stats.Chunks.Add(1)
			r.stats.BytesRead.Add(uint64(n))
			// The budget counts the buffer, not the bytes: a short read in a
			// large buffer pins all of it.
			b := shrinkChunk(buf, n)
			r.flow.take(c, cap(b))
			if !flush() {
				return
			}
			held = b
		case n == 0:
			putBuf(buf)
			r.closeConnWith(ctx, c, out, "", held)
			return
		case err == unix.EINTR:
			putBuf(buf)
		case err == unix.EAGAIN:
			putBuf(buf)
			flush()
			return
		default:
			putBuf(buf)
			r.closeConnWith(ctx, c, out, err.Error(), held)
			return
		}
	}
	flush()
}
