package sink

import "nsca_fast/stages/codec"

// Item is one validated check result with the server's time of receipt.
type Item struct {
	Result codec.Result
	Time   int64 // unix seconds when the server received it
	// ReadAt is when its last byte was read off the client's socket (unix
	// nanoseconds), for the latency histogram; 0 for results that did not
	// come from a client (a replay).
	ReadAt int64
}

// Sink is one destination. Write delivers items in order and reports how
// many it delivered; the rest are left for the next sink of the chain, with
// err saying why they were refused.
type Sink interface {
	Name() string
	Write(items []Item) (n int, err error)
	Close() error
}
