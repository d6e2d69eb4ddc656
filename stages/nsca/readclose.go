package nsca

import (
	"context"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/rawsys"
	"nsca_fast/stages/stage"
)

// expire closes connections that made too little progress in the last
// Timeout: fewer than 720 bytes, which no working send_nsca does.
func (r *reader) expire(ctx context.Context, out *stage.Shards[chunk], now time.Time) {
	limit := now.Add(-r.cfg.Timeout).UnixNano()
	var slow []*clientConn
	r.mu.Lock()
	for c := range r.conns.all() {
		if c.read.windowStart >= limit {
			continue
		}
		if r.flow.waiting(c) {
			// Waiting for us, not slow: its bytes are in the pipeline or
			// in the socket, held back by the read budget.
			c.read.windowStart, c.read.windowBytes = now.UnixNano(), c.read.bytesRead
			continue
		}
		if c.read.bytesRead-c.read.windowBytes < minProgress {
			slow = append(slow, c)
		} else {
			c.read.windowStart, c.read.windowBytes = now.UnixNano(), c.read.bytesRead
		}
	}
	r.mu.Unlock()
	for _, c := range slow {
		if c.read.awaitingHeader {
			r.stats.Refused.Add(1)
			r.log.Warningf(c.Peer.Addr().String(), "closing connection from %s: no complete PROXY header within %v (%d bytes)", c.Peer, r.cfg.Timeout, len(c.read.header))
		} else {
			r.log.Eventf("timed out", c.Peer.Addr().String(), "closing connection from %s: timeout: less than %d bytes in %v (read %d bytes in all)", c.Peer, minProgress, r.cfg.Timeout, c.read.bytesRead)
		}
		r.closeConn(ctx, c, out, "timeout")
	}
}

// pause stops polling c until the budget allows reading it again: the
// client's bytes wait in the kernel. The socket leaves the epoll set, so a
// hang-up is not reported over and over meanwhile.
func (r *reader) pause(c *clientConn) {
	if err := r.epoll.Remove(c.read.fd); err != nil {
		return // not in the set: nothing to pause
	}
	r.paused[c] = struct{}{}
	r.flow.pause(c)
}

// unpause forgets that c was paused.
func (r *reader) unpause(c *clientConn) {
	delete(r.paused, c)
	r.flow.unpause(c)
}

// resume polls again the paused connections the budget allows. One that
// still waits for its own budget no longer waits for the global one, so it
// stops holding back the accept stage: were it to hold accept back until
// decrypt consumed its chunk, accept would greet nobody meanwhile and leave
// the CPUs idle with every client waiting for an init packet.
func (r *reader) resume() {
	if len(r.paused) == 0 || r.flow.spent() {
		return
	}
	for c := range r.paused {
		if r.flow.connSpent(c) {
			r.flow.release(c)
			continue
		}
		r.unpause(c)
		if err := r.epoll.Add(c.read.fd); err != nil {
			glog.Errorf("read: epoll_ctl add %s: %v", c.Peer, err)
			c.requestClose()
		}
	}
}

// closeIdle closes, during a drain, the connections whose client has sent
// nothing since idleSince (unix nanoseconds), counting from drainStart at
// the earliest. Bytes waiting in the socket are not silence: the client
// sent them and waits for us.
func (r *reader) closeIdle(ctx context.Context, out *stage.Shards[chunk], idleSince, drainStart int64) {
	var idle []*clientConn
	r.mu.Lock()
	for c := range r.conns.all() {
		if max(c.read.lastActive, drainStart) < idleSince && unreadBytes(c.read.fd) == 0 {
			idle = append(idle, c)
		}
	}
	r.mu.Unlock()
	for _, c := range idle {
		r.closeConn(ctx, c, out, "shutdown grace expired")
	}
}

// unreadBytes is how many bytes the kernel holds for us on a socket.
func unreadBytes(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil {
		return 0
	}
	return n
}

func (r *reader) closeAll(ctx context.Context, out *stage.Shards[chunk], why string) {
	r.mu.Lock()
	all := make([]*clientConn, 0, r.conns.len())
	for c := range r.conns.all() {
		all = append(all, c)
	}
	r.mu.Unlock()
	for _, c := range all {
		r.closeConn(ctx, c, out, why)
	}
}

// closeConn closes the socket and sends the connection's final chunk. Only
// the reader closes sockets, so a descriptor number is never reused while
// another stage could still act on it.
func (r *reader) closeConn(ctx context.Context, c *clientConn, out *stage.Shards[chunk], why string) {
	r.closeConnWith(ctx, c, out, why, nil)
}

// closeConnWith is closeConn with the connection's last read, which goes
// downstream in the final chunk.
func (r *reader) closeConnWith(ctx context.Context, c *clientConn, out *stage.Shards[chunk], why string, last []byte) {
	if c.read.closed {
		return
	}
	c.read.closed = true
	r.mu.Lock()
	r.conns.remove(c)
	r.mu.Unlock()
	if _, paused := r.paused[c]; paused {
		r.unpause(c)
	}
	// close() also takes the socket out of the epoll set: no descriptor of
	// it is ever duplicated.
	rawsys.Close(c.read.fd)
	r.stats.Open.Add(-1)
	out.Send(ctx, chunk{conn: c, buf: last, eof: true, why: why, readAt: r.readAt})
}
