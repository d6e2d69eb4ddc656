package sink

import (
	"sync/atomic"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/emit/dialect"
)

// Item is one validated check result with the server's time of receipt,
// or one external command other than a check result.
type Item struct {
	Result codec.Result
	Time   int64 // unix seconds when the server received it
	// Command, when not empty, makes the item that external command (as
	// ENABLE_SVC_NOTIFICATIONS;web01;disk): its text without the bracketed
	// timestamp and newline, which validation checked to hold no control
	// character; Time is the timestamp written with it and Result is
	// unused. Only sinks that are CommandTakers are given one.
	Command string
	// ReadAt is when its last byte was read off the client's socket (unix
	// nanoseconds), for the latency histogram; 0 for results that did not
	// come from a client (a replay).
	ReadAt int64
}

// Sink is one destination. Write delivers items in order and reports how
// many it delivered; the rest are left for the next sink of the chain, with
// err saying why they were refused.
//
// A sink may also have any of the capabilities below; whoever runs it (the
// emit stage's chains, a replay, the durable wrapper) asks for each with a
// type assertion, so a new sink says what it can do by its methods alone.
type Sink interface {
	Name() string
	Write(items []Item) (n int, err error)
	Close() error
}

// IsCommand says whether the item is an external command rather than a
// check result.
func (it *Item) IsCommand() bool { return it.Command != "" }

// Prober is a sink that can tell before any write why it cannot take
// results (the command file does not exist yet).
type Prober interface {
	Probe() error
}

// Checker is a sink that can tell cheaply, without writing, whether a
// write could succeed now (the file system has room again, the FIFO has a
// reader): the emit stage asks it while its destination is down, so that
// the destination is up again once the sink recovers, without waiting for
// a result to try it (the front ends that answer their clients send none
// while it is down). A nil answer also ends any back-off of the sink, so
// that the next write is tried at once. It is called by the goroutine that
// writes to the sink.
type Checker interface {
	Check() error
}

// CommandTaker is a sink that can write external commands other than
// check results (items whose Command is set): the command file and the
// dump file, which hold command lines. TakesCommands lets a wrapper say
// so only when what it wraps can. Whoever runs a sink hands it commands
// only if it takes them; every other sink gets check results alone.
type CommandTaker interface {
	TakesCommands() bool
}

// TakesCommands says whether s can write external commands.
func TakesCommands(s Sink) bool {
	c, ok := s.(CommandTaker)
	return ok && c.TakesCommands()
}

// Located is a sink that writes to a place an operator knows by its path
// (a file or directory): log lines name that place rather than the sink.
type Located interface {
	Location() string
}

// Holder is a sink that can hold results back for a while (the spool at
// check_result_path_max_files): Write counts them as taken, but they are
// written only later, by Flush; Abandon gives back what is still held.
type Holder interface {
	Queued() int
	Flush() (int, error)
	Abandon() []Item
}

// Refuser is a sink that consumes some results without delivering them,
// for good (Icinga's 404 for an unknown object): its own callback counts
// them as dropped, so they must not count as emitted.
type Refuser interface {
	Refused() uint64 // so far
}

// Marker is a sink that can say which items of a batch it consumed,
// without reordering them (Icinga's, which posts objects in parallel):
// WriteMarked sets consumed[i] for each items[i] it took.
type Marker interface {
	WriteMarked(items []Item, consumed []bool) error
}

// Dialected is a local sink whose outputs are read by the core: the command
// file, the spool and the dump file (whose lines are replayed into the
// command file). UseDialect makes it escape outputs in d and count in lossy
// (nil: not counted) each result it delivered in a lossy form; the default
// is dialect.Nagios, stock's bytes.
type Dialected interface {
	UseDialect(d dialect.Dialect, lossy *atomic.Uint64)
}
