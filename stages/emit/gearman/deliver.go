package gearman

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"nsca_fast/stages/emit/sink"
)

// Pipelining: requests are written in chunks and the chunk's replies read
// before the next one, so neither side's socket buffer has to hold more
// than a chunk and a slow job server cannot deadlock the exchange.
const (
	gearmanChunkJobs  = 256
	gearmanChunkBytes = 256 << 10
)

// Name is "gearman".
func (g *Gearman) Name() string { return "gearman" }

// Write submits items in order. On a broken connection it connects again
// once, to the first server of the list that answers, and resends what
// was not confirmed; then it gives up with the items not confirmed left
// to the next sink.
func (g *Gearman) Write(items []sink.Item) (int, error) {
	done := 0
	retried := false
	for done < len(items) {
		if err := g.connect(); err != nil {
			return done, err
		}
		n, err := g.submit(items[done:])
		done += n
		if err == nil {
			continue
		}
		if !errors.Is(err, errIO) {
			return done, err
		}
		g.closeConn()
		if retried {
			// A server that accepts but never answers (hung, or its host
			// gone behind a proxy) would otherwise cost two timeouts per
			// batch: back off as when none can be dialled.
			g.retry.Failed()
			g.lastErr = err
			return done, err
		}
		retried = true
	}
	return done, nil
}

// connect dials the servers in order until one answers. When none does,
// the next attempts wait for a back-off that doubles up to 5 s, so a job
// server that is down costs one round of dials per interval, not one per
// batch.
func (g *Gearman) connect() error {
	if g.conn != nil {
		return nil
	}
	if g.retry.Left() > 0 {
		return fmt.Errorf("%w: %v", errBackoff, g.lastErr)
	}
	var why []string
	for _, addr := range g.servers {
		c, err := net.DialTimeout("tcp", addr, g.timeout)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		g.conn, g.addr = c, addr
		g.retry.Succeeded()
		if g.rd == nil {
			g.rd = bufio.NewReaderSize(c, 4096)
		} else {
			g.rd.Reset(c)
		}
		return nil
	}
	g.retry.Failed()
	g.lastErr = fmt.Errorf("%w: %s", errUnreachable, strings.Join(why, "; "))
	return g.lastErr
}

func (g *Gearman) closeConn() {
	if g.conn != nil {
		g.conn.Close()
		g.conn = nil
	}
}

// submit writes items in pipelined chunks and returns how many the server
// confirmed. Errors of the connection wrap errIO.
func (g *Gearman) submit(items []sink.Item) (int, error) {
	done := 0
	for done < len(items) {
		g.buf = g.buf[:0]
		n := 0
		for done+n < len(items) && n < gearmanChunkJobs && len(g.buf) < gearmanChunkBytes {
			g.plain = appendGearmanResultAt(g.plain[:0], items[done+n], g.Stamps.next(items[done+n]))
			g.seq++
			g.uniq = strconv.AppendUint(g.uniq[:g.uniqLen], g.seq, 10)
			// The body is sealed straight into the request, whose size is
			// then set to what it came to.
			start := len(g.buf)
			g.buf = appendSubmitJobBG(g.buf, g.queue, g.uniq, nil)
			g.buf, g.plain = appendSealed(g.buf, g.block, g.plain)
			binary.BigEndian.PutUint32(g.buf[start+8:], uint32(len(g.buf)-start-gearmanHeaderLen))
			n++
		}
		g.conn.SetWriteDeadline(time.Now().Add(g.timeout))
		if _, err := g.conn.Write(g.buf); err != nil {
			return done, fmt.Errorf("%w: %s: writing: %w", errIO, g.addr, err)
		}
		g.conn.SetReadDeadline(time.Now().Add(g.timeout))
		var refused error
		for i := 0; i < n; i++ {
			typ, arg, err := g.readReply()
			if err != nil {
				return done, err
			}
			switch {
			case typ == gearmanJobCreated && refused == nil:
				done++
			case typ == gearmanJobCreated:
			case typ == gearmanError:
				// The jobs after this one in the chunk may be queued, but
				// the caller passes all of them to the fallback: a
				// result twice rather than none. The replies are read to
				// keep the connection usable.
				if refused == nil {
					code, text, _ := bytes.Cut(arg, []byte{0})
					refused = fmt.Errorf("%w: %s: %s: %s", errRefused, g.addr, code, text)
				}
			default:
				g.closeConn()
				return done, fmt.Errorf("%w: %s: reply type %d to SUBMIT_JOB_BG", errProtocol, g.addr, typ)
			}
		}
		if refused != nil {
			return done, refused
		}
	}
	return done, nil
}

// readReply reads one response packet, its data valid until the next
// call. A reply that is not a Gearman
// response closes the connection: the stream cannot be trusted after it.
func (g *Gearman) readReply() (uint32, []byte, error) {
	var h [gearmanHeaderLen]byte
	if _, err := io.ReadFull(g.rd, h[:]); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: reading reply: %w", errIO, g.addr, err)
	}
	typ := binary.BigEndian.Uint32(h[4:])
	size := binary.BigEndian.Uint32(h[8:])
	if !bytes.Equal(h[:4], gearmanRes) || size > gearmanMaxReply {
		g.closeConn()
		return 0, nil, fmt.Errorf("%w: %s: not a Gearman response (header %q)", errProtocol, g.addr, h[:])
	}
	if cap(g.reply) < int(size) {
		g.reply = make([]byte, size)
	}
	arg := g.reply[:size]
	if _, err := io.ReadFull(g.rd, arg); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: reading reply: %w", errIO, g.addr, err)
	}
	return typ, arg, nil
}

// Close closes the connection to the job server, if any.
func (g *Gearman) Close() error {
	g.closeConn()
	return nil
}
