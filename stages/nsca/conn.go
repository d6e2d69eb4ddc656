package nsca

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/intake"
)

// clientConn is one client connection. Its fields are grouped by the
// stage that owns them: a group is only written by its owner, and a
// connection is owned by exactly one goroutine of each stage (connections
// are sharded by ID), which is what keeps one client's results in order
// without locks.
type clientConn struct {
	connIdentity
	read    connRead
	decrypt connDecrypt
	// src is the connection as validation sees it: filled by decrypt
	// before its first packet is handed on (its identity is the secret
	// the first packet chose), read-only afterwards but for what
	// validation keeps in it.
	src intake.Source
	// flow is the connection's share of the flow control; only flow's
	// methods touch it.
	flow connFlow
}

// connIdentity is who the client is: set by accept (or by read, once a
// PROXY header has come, before any other stage sees the connection),
// read-only afterwards, and read by every stage.
type connIdentity struct {
	ID       uint64
	Peer     netip.AddrPort
	Via      netip.AddrPort // the load balancer, when Peer came from a PROXY header
	IV       [codec.IVSize]byte
	InitTime uint32 // the server time sent in the init packet
}

// connRead is the read stage's: the socket and how much the client sent.
// Accept opens the socket and hands it over; only the reader closes it.
type connRead struct {
	fd             int
	reader         *reader
	awaitingHeader bool
	header         []byte // the PROXY header so far
	lastActive     int64  // unix nanoseconds of the last byte read
	closed         bool
	bytesRead      uint64
	windowStart    int64  // unix nanoseconds when the current progress window began
	windowBytes    uint64 // bytesRead when it began
}

// connDecrypt is the decrypt stage's: framing and the cipher's state.
type connDecrypt struct {
	packetSize int    // 0 until the first packet decides it, then one of the accepted sizes
	cur        []byte // the packet being assembled, decrypted as it arrives
	curN       int
	stream     cipher.State // the CFB register of methods 2 and up, running across packets
	streaming  bool         // stream has been started with the IV
	key        cipher.Key   // decryption_mode=0: this connection's own key schedule
	cipherErr  error
	discard    bool // the first packet had a wrong version: ignore the rest
	counted    bool // its first valid packet was counted for its secret
	// sec is the secret the connection uses: decided by its first packet
	// when there are several (see choose), read-only once set, and read by
	// validation for the packets sent after it was set.
	sec *keyed
	// unmatched: no secret decrypted the first packet, which validation
	// must refuse whatever sec makes of it.
	unmatched bool
	// firstBad: the first packet decrypts to no valid packet at any
	// accepted size, which is worth a diagnosis; head holds the first
	// headN bytes as they came, for it.
	firstBad bool
	headN    uint8
	head     [diagnose.HeadSize]byte
}

// connFlow is what a connection holds of its front end's flow control.
type connFlow struct {
	// inflight is what was taken and not yet given back; paused is set
	// while the reader does not poll the socket for want of budget.
	inflight atomic.Int64
	paused   atomic.Bool
	// heldBack: paused while the global budget was spent, which holds
	// back the accept stage (flow.heldBack); its reader's goroutine alone
	// changes it.
	heldBack bool
}

// chunk carries bytes read from one connection, in order. eof marks the
// last chunk of a connection: the read stage sends exactly one.
type chunk struct {
	conn *clientConn
	buf  []byte // from getBuf; may be nil with eof
	eof  bool
	why  string // why the connection ended, for eof
	// readAt is when buf was read (unix nanoseconds).
	readAt int64
}

// Read buffers: a read goes into a large one, and a read that leaves most
// of it unused (a slow client, one packet of a connection, its tail) is
// copied into the smallest of chunkClasses that holds it, so that queued
// chunks hold memory, and the read budget counts, in proportion to their
// bytes. The large size is the read stage's: ChunkSize for XOR and the fast
// native ciphers, the per-connection budget (one hand-off per connection's
// burst) for libmcrypt's. A send_nsca packet read alone into that 64 KiB
// buffer would otherwise count 64 KiB: with 3DES five such connections
// would spend the whole budget (35 ms of decrypting, about 300 KiB), and
// accept and every read would wait while the CPUs had nothing to decrypt.
// They come from the same per-capacity pools as packet buffers.
const (
	chunkSize      = 16 << 10
	smallChunkSize = 1 << 10
)

// chunkClasses are the sizes a short read is copied into, ascending.
var chunkClasses = [...]int{smallChunkSize, 8 << 10, chunkSize}

// shrinkChunk returns the n bytes read into the large buffer b, moved to
// the smallest class that holds them (and b back to its pool) when that
// class is at most a quarter of b: the copy is then cheap beside what it
// frees, and a buffer only a little too large is left alone.
func shrinkChunk(b []byte, n int) []byte {
	for _, size := range chunkClasses {
		if n <= size && size <= cap(b)/4 {
			small := getBuf(size)
			copy(small, b[:n])
			putBuf(b)
			return small[:n]
		}
	}
	return b[:n]
}

// Buffers are pooled per capacity: read chunks, send_nsca's 4304-byte
// packets, and each larger size payload_length accepts. A pool holds the
// buffer's first byte, a plain pointer, so that neither Get nor Put
// allocates (a *[]byte would need a new slice header at every Put); the
// capacity is the pool's.
var bufPools sync.Map // int (capacity) → *sync.Pool of *byte

// commonPools are the pools of the sizes every connection uses (a read
// chunk, a send_nsca packet), which poolOf finds by a comparison each
// rather than by the sync.Map's hash and type assertion: several buffers
// go through a pool per check.
var commonPools = [...]*sync.Pool{bufPool(chunkSize), bufPool(codec.Size)}

// poolOf is bufPool(n), the common sizes first.
func poolOf(n int) *sync.Pool {
	switch n {
	case chunkSize:
		return commonPools[0]
	case codec.Size:
		return commonPools[1]
	}
	return bufPool(n)
}

// bufPool is the pool of buffers of capacity n, made at its first use.
func bufPool(n int) *sync.Pool {
	if p, ok := bufPools.Load(n); ok {
		return p.(*sync.Pool)
	}
	p, _ := bufPools.LoadOrStore(n, &sync.Pool{New: func() any { return unsafe.SliceData(make([]byte, n)) }})
	return p.(*sync.Pool)
}

// getBuf returns a pooled buffer of n bytes.
func getBuf(n int) []byte { return unsafe.Slice(poolOf(n).Get().(*byte), n) }

// putBuf returns a buffer from getBuf, by its capacity.
func putBuf(b []byte) {
	b = b[:cap(b)]
	poolOf(cap(b)).Put(unsafe.SliceData(b))
}

// getPacketBuf returns a buffer for a packet of n bytes, n bytes long or
// longer (at least 4304).
func getPacketBuf(n int) []byte { return getBuf(max(n, codec.Size)) }
