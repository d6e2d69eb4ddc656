package durable

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"nsca_fast/stages/emit/sink"

	"github.com/golang/glog"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/queue"
)

// errFull wraps the results a durable queue could not take
// (queue_max_bytes reached, or the disk failed): they go to the fallback.
var errFull = errors.New("sink: durable queue cannot take more")

// Pacing of the goroutine that delivers what waits on disk.
const (
	// drainBatch is how many queued results one delivery attempt carries.
	drainBatch = 256
	// After an attempt that left results undelivered, the next waits from
	// drainFirstWait, doubling up to drainMaxWait: the engine is down, and
	// the remote sinks back off on their own too.
	drainFirstWait = 200 * time.Millisecond
	drainMaxWait   = 2 * time.Second
	// reopenEvery spaces attempts at a queue directory another pipeline
	// still holds (the previous one draining after a reload).
	reopenEvery = time.Second
	// Attempts at a queue directory that cannot be used (a read-only or
	// full file system, no permission), a condition that may last hours,
	// wait twice as long each time, up to reopenMaxWait.
	reopenMaxWait = 30 * time.Second
)

// Config configures a durable queue in front of a remote sink.
type Config struct {
	// Dir is the queue's own directory (queue_directory/<name>[-<slot>]).
	Dir string
	// MaxBytes bounds the queue on disk (queue_max_bytes); Fsync is
	// queue_fsync.
	MaxBytes int64
	Fsync    queue.Fsync
	// Stats and Log, when set, report the queue (RegisterDurable) and log
	// what happens to it.
	Stats *counters.Stats
	Log   *counters.RateLog
	// LeftBehind, when set, lists the queue directories of this sink that
	// no process of the running configuration owns and this queue takes
	// over (see Durable.adopt): those of worker slots the configuration no
	// longer has.
	LeftBehind func() ([]string, error)
}

// Durable keeps the results its remote sink cannot deliver at once in a
// durable disk queue (package queue) and delivers them, in order, once the
// engine takes them again, across restarts and kill -9.
//
// While the queue is empty, Write delivers straight to the sink: with the
// engine up, the queue costs one check of its size per batch. What the sink
// leaves undelivered, and every result while the queue is not empty (so
// that no result overtakes an older one of its service), is appended to the
// queue, which a goroutine of its own delivers from. A result leaves the
// queue only once the engine accepted it (or refused it for good, as a 404
// of Icinga's for an unknown object: no retry could help). What the queue
// cannot take (MaxBytes) is returned undelivered, for the fallback.
//
// Results appended count as emitted by the chain; those an engine refuses
// for good later, out of the queue, also count as dropped by the sink.
//
// It takes no external commands other than check results (it is no
// sink.CommandTaker, whatever it wraps): its records hold check results
// only, and no engine it wraps (Icinga 2, Gearman) writes commands. One
// that does would need a record version of its own for them (see
// AppendRecord's version byte).
type Durable struct {
	inner sink.Sink
	cfg   Config
	name  string

	mu      sync.Mutex // guards q and the start of the drainer and the adopter
	q       *queue.Queue
	stop    chan struct{}
	workers sync.WaitGroup // the drainer, the adopter and awaitQueue

	// deliverMu makes the caller of Write and the drainer take turns with
	// inner, whose Write is not safe for concurrent use. By design they
	// never overlap (Write delivers only while the queue is empty, the
	// drainer only while it is not); the lock keeps it so if that changes.
	deliverMu sync.Mutex

	refused  uint64 // by inner, during Write's direct deliveries
	replayed atomic.Uint64
	corrupt  atomic.Uint64 // records that verified but did not decode

	// Write's scratch space: encoded records and slices of them.
	buf  []byte
	recs [][]byte
}

// New opens the queue in cfg.Dir in front of inner. A queue that
// does not open is served as the running daemon serves one that fails:
// results that inner cannot deliver go to the fallback, and the queue is
// opened later, by a goroutine that tries it again: a directory held by
// another pipeline of this daemon (the previous one, still draining after
// a reload) once it is free, one that cannot be used (a read-only or full
// file system, no permission) once it can. It does not fail: a restart
// serves as the daemon did before it.
func New(inner sink.Sink, cfg Config) (*Durable, error) {
	d := &Durable{inner: inner, cfg: cfg, name: inner.Name(), stop: make(chan struct{})}
	if err := d.open(); err != nil {
		d.logNotOpen(err)
		d.workers.Add(1)
		go d.awaitQueue(err)
	}
	if cfg.Stats != nil {
		cfg.Stats.RegisterDurable(d.name, d.Stats)
	}
	return d, nil
}

// open opens the queue and starts the drainer; d.mu is held or d is not
// shared yet.
func (d *Durable) open() error {
	q, err := queue.Open(d.cfg.Dir, d.queueOptions())
	if err != nil {
		return fmt.Errorf("sink: %s: %w", d.name, err)
	}
	d.q = q
	if st := q.Stats(); st.Records > 0 {
		glog.Infof("%s: %d results (%d bytes) queued in %s since %s: delivering them", d.name, st.Records, st.Bytes, d.cfg.Dir, st.Oldest.Format(time.RFC3339))
	}
	d.workers.Add(1)
	go d.drain(q)
	if d.cfg.LeftBehind != nil {
		d.workers.Add(1)
		go d.adopt(q)
	}
	return nil
}

// logNotOpen says why the queue did not open and what happens meanwhile.
func (d *Durable) logNotOpen(err error) {
	if errors.Is(err, queue.ErrLocked) {
		// For a moment after every reload.
		if d.cfg.Log != nil {
			d.cfg.Log.Warningf("durable:"+d.name, "%s: durable queue %s not open: %v; undelivered results go to the fallback meanwhile", d.name, d.cfg.Dir, err)
		}
		return
	}
	glog.Warningf("%s: durable queue %s cannot be used: %v; serving without it: what %s does not take goes to its fallback (counted in fell_back; without one, dropped and logged) until the queue opens, tried again every %v to %v",
		d.name, d.cfg.Dir, err, d.name, reopenEvery, reopenMaxWait)
}

// queueOptions are the options of this sink's queues: its own and those
// it takes over.
func (d *Durable) queueOptions() queue.Options {
	return queue.Options{MaxBytes: d.cfg.MaxBytes, Fsync: d.cfg.Fsync, OnDamage: d.logDamage}
}

// logDamage logs a damaged region of a queue, once (the queue reports
// each once), with what it cost.
func (d *Durable) logDamage(dm queue.Damage) {
	lost := "unknown"
	if dm.Results >= 0 {
		lost = fmt.Sprint(dm.Results)
	}
	glog.Warningf("%s: durable queue damaged: %s at offset %d (%d bytes): %s; results lost: %s", d.name, dm.File, dm.Offset, dm.Bytes, dm.Cause, lost)
}

// awaitQueue tries to open the queue that did not open at start (why),
// until it opens or Close; it alone retries, so that what the queue holds
// is delivered (and what it is to take over, adopted) whether or not
// results come to Write meanwhile. It logs when the reason changes and when
// a queue that could not be used opens.
func (d *Durable) awaitQueue(why error) {
	defer d.workers.Done()
	wait := reopenEvery
	for {
		select {
		case <-d.stop:
			return
		case <-time.After(wait):
		}
		d.mu.Lock()
		var err error
		select {
		case <-d.stop: // Close has taken q already
		default:
			err = d.open()
		}
		d.mu.Unlock()
		if err == nil {
			if !errors.Is(why, queue.ErrLocked) {
				glog.Infof("%s: durable queue %s open now: what %s does not take is queued again", d.name, d.cfg.Dir, d.name)
			}
			return
		}
		if err.Error() != why.Error() {
			d.logNotOpen(err)
		}
		why = err
		if errors.Is(err, queue.ErrLocked) {
			wait = reopenEvery
		} else {
			wait = min(2*wait, reopenMaxWait)
		}
	}
}

// queue returns the open queue, or nil while it is held elsewhere.
func (d *Durable) queue() *queue.Queue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.q
}

// Name is the sink's own: results queued count as its.
func (d *Durable) Name() string { return d.name }

// Refused is what the sink refused for good during direct deliveries, for
// the chain's accounting (see refusingSink in package stages).
func (d *Durable) Refused() uint64 { return d.refused }

// Write delivers items directly while the queue is empty and queues the
// rest; items[:n] were delivered or queued, items[n:] (the queue was full)
// are for the fallback. See Durable.
func (d *Durable) Write(items []sink.Item) (int, error) {
	q := d.queue()
	if q == nil {
		return d.direct(items)
	}
	n := 0
	var why error
	if q.Stats().Records == 0 {
		if n, why = d.direct(items); n == len(items) {
			return n, nil
		}
		if d.cfg.Log != nil {
			d.cfg.Log.Warningf("durable:"+d.name, "%s: %d results queued on disk until the engine takes them: %v", d.name, len(items)-n, why)
		}
	}
	k, err := d.append(q, items[n:])
	if n+k == len(items) {
		return n + k, nil
	}
	if d.cfg.Log != nil {
		d.cfg.Log.Warningf("durable-full:"+d.name, "%s: durable queue %s: %d results go to the fallback: %v", d.name, d.cfg.Dir, len(items)-n-k, err)
	}
	return n + k, fmt.Errorf("%w: %w", errFull, err)
}

// direct writes items through inner, counting its refusals.
func (d *Durable) direct(items []sink.Item) (int, error) {
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	f, refuses := d.inner.(interface{ Refused() uint64 })
	var before uint64
	if refuses {
		before = f.Refused()
	}
	n, err := d.inner.Write(items)
	if refuses {
		d.refused += f.Refused() - before
	}
	return n, err
}

// append queues items in order and returns how many, from the first, were
// stored.
func (d *Durable) append(q *queue.Queue, items []sink.Item) (int, error) {
	d.buf, d.recs = d.buf[:0], d.recs[:0]
	for _, it := range items {
		start := len(d.buf)
		d.buf = AppendRecord(d.buf, it)
		d.recs = append(d.recs, d.buf[start:len(d.buf):len(d.buf)])
	}
	// d.buf may have moved while growing: slice the records again.
	off := 0
	for i, r := range d.recs {
		d.recs[i] = d.buf[off : off+len(r) : off+len(r)]
		off += len(r)
	}
	n, err := q.Append(d.recs...)
	clear(d.recs) // keep no reference into buf beyond what it holds
	return n, err
}

// drain delivers queued results in order until Close, acknowledging each
// run of them the engine accepted.
func (d *Durable) drain(q *queue.Queue) {
	defer d.workers.Done()
	// done marks, from the first unacknowledged record, the ones already
	// delivered: a batch can fail for one service and succeed for others,
	// and only its delivered prefix can be acknowledged.
	var done []bool
	var items []sink.Item
	var index []int
	wait := time.Duration(0)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		recs, err := q.Peek(drainBatch)
		if len(recs) == 0 {
			if errors.Is(err, queue.ErrClosed) {
				return
			}
			select {
			case <-q.Ready():
			case <-d.stop:
				return
			}
			continue
		}
		for len(done) < len(recs) {
			done = append(done, false)
		}
		items, index = items[:0], index[:0]
		for i, r := range recs {
			if done[i] {
				continue
			}
			it, err := DecodeRecord(r.Data)
			if err != nil {
				d.corrupt.Add(1)
				if d.cfg.Log != nil {
					d.cfg.Log.Warningf("durable-corrupt:"+d.name, "%s: durable queue %s: skipping a record: %v", d.name, d.cfg.Dir, err)
				}
				done[i] = true
				continue
			}
			items, index = append(items, it), append(index, i)
		}
		consumed, err := d.deliverMarked(items)
		delivered := 0
		for j, ok := range consumed {
			if ok {
				done[index[j]] = true
				delivered++
			}
		}
		d.replayed.Add(uint64(delivered))
		p := 0
		for p < len(recs) && done[p] {
			p++
		}
		if aerr := q.Ack(p); aerr != nil {
			glog.Errorf("%s: durable queue %s: %v", d.name, d.cfg.Dir, aerr)
			if errors.Is(aerr, queue.ErrClosed) {
				return
			}
		}
		done = append(done[:0], done[p:len(recs)]...)
		clear(items) // drop the outputs until the next batch
		if p == len(recs) {
			wait = 0
			continue
		}
		wait = min(max(2*wait, drainFirstWait), drainMaxWait)
		if d.cfg.Log != nil && err != nil {
			d.cfg.Log.Warningf("durable-wait:"+d.name, "%s: %d results wait on disk: %v", d.name, q.Stats().Records, err)
		}
		select {
		case <-time.After(wait):
		case <-d.stop:
			return
		}
	}
}

// deliverMarked writes items through inner and reports which it consumed.
func (d *Durable) deliverMarked(items []sink.Item) ([]bool, error) {
	consumed := make([]bool, len(items))
	if len(items) == 0 {
		return consumed, nil
	}
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	if m, ok := d.inner.(sink.Marker); ok {
		return consumed, m.WriteMarked(items, consumed)
	}
	n, err := d.inner.Write(items)
	for i := range n {
		consumed[i] = true
	}
	return consumed, err
}

// Stats reports the queue for the statistics and metrics.
func (d *Durable) Stats() counters.DurableQueue {
	d.mu.Lock()
	q := d.q
	d.mu.Unlock()
	// A record that did not decode is one result lost.
	st := counters.DurableQueue{Replayed: d.replayed.Load(), Corrupt: d.corrupt.Load(), Lost: d.corrupt.Load()}
	if q != nil {
		qs := q.Stats()
		st.Results, st.Bytes, st.OldestSeconds = qs.Records, qs.Bytes, qs.OldestAge.Seconds()
		st.Corrupt += uint64(qs.Corrupt)
		st.Lost += uint64(qs.Lost)
		st.LostUnknown = uint64(qs.LostUnknown)
	}
	return st
}

// Close stops the delivery from disk (what is queued stays there for the
// next start), closes the queue and the sink.
func (d *Durable) Close() error {
	d.mu.Lock()
	select {
	case <-d.stop:
		d.mu.Unlock()
		return nil
	default:
	}
	close(d.stop)
	q := d.q
	d.mu.Unlock()
	d.workers.Wait()
	var err error
	if q != nil {
		err = q.Close()
	}
	return errors.Join(err, d.inner.Close())
}
