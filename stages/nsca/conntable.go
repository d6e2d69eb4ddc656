package nsca

import "iter"

// connTable is a reader's open connections by socket descriptor: a slice
// indexed by the descriptor, since the kernel hands out the lowest free
// numbers. Registering and looking up a connection, once each per
// connection and per epoll event, are an index where a map's were a hash
// and, at a trickle, an insert and a delete per check (issue 36). It
// grows to the highest descriptor its reader served, a pointer each.
type connTable struct {
	byFD []*clientConn
	n    int
}

// get is the connection on fd, or nil.
func (t *connTable) get(fd int32) *clientConn {
	if fd < 0 || int(fd) >= len(t.byFD) {
		return nil
	}
	return t.byFD[fd]
}

// put adds c, by its descriptor.
func (t *connTable) put(c *clientConn) {
	fd := c.read.fd
	if fd >= len(t.byFD) {
		t.byFD = append(t.byFD, make([]*clientConn, fd+1-len(t.byFD))...)
	}
	if t.byFD[fd] == nil {
		t.n++
	}
	t.byFD[fd] = c
}

// remove forgets c.
func (t *connTable) remove(c *clientConn) {
	if fd := c.read.fd; fd < len(t.byFD) && t.byFD[fd] == c {
		t.byFD[fd] = nil
		t.n--
	}
}

// len is how many connections the table holds.
func (t *connTable) len() int { return t.n }

// all yields every connection.
func (t *connTable) all() iter.Seq[*clientConn] {
	return func(yield func(*clientConn) bool) {
		for _, c := range t.byFD {
			if c != nil && !yield(c) {
				return
			}
		}
	}
}
