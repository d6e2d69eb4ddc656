package nsca

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"nsca_fast/conf"
	"nsca_fast/conf/identities"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// Errors of the front end's settings.
var (
	errCipher = errors.New("nsca: cipher")
	errConfig = errors.New("nsca: config")
)

// decryptConfig are the decrypt stage's settings.
type decryptConfig struct {
	Cipher cipherConfig
	// Closed, when set, is called instead of closing out once the stage
	// is done: out then has other senders (the nsca-ng listener), and the
	// last of them closes it.
	Closed func()
	// MaxChecks is max_checks_per_connection (0: no cap).
	MaxChecks int

	// flow, when set, is the read stage's flow control: decrypt gives back
	// each chunk it consumed and says what decrypting costs.
	flow *flow
}

// cipherConfig says how clients encrypt and what decrypts: the stage runs
// the engines it is handed, which cipher.Choose chose. Method, Engine and
// Password are the one secret when Candidates is empty.
type cipherConfig struct {
	Method int // 0 none, 1 XOR (undone here, with Password), else Engine's
	// Engine decrypts methods 2 and up; nil for 0 and 1.
	Engine   cipher.Engine
	Password []byte
	// Candidates are the secrets a connection may use, in the order they
	// are tried; empty: the one of Method, Engine and Password.
	Candidates []candidate
	// PerConnection is decryption_mode=0: a fresh key schedule for each
	// connection, as stock does. Otherwise each decrypt goroutine keys once
	// at start and only starts a new CFB register per connection.
	PerConnection bool
	// PayloadLengths are payload_length, ascending; nil means 512 and 4096.
	PayloadLengths []int
}

// candidate is one secret a connection may be encrypted with: a method and
// its password.
type candidate struct {
	// Name names it in metrics and logs (conf.Secret.Name); never the
	// password.
	Name     string
	Method   int
	Engine   cipher.Engine // as cipherConfig.Engine
	Password []byte
	// Networks are where a client may connect from with it; nil: anywhere.
	Networks []netip.Prefix
	// Rights refuses the results its identity may not submit; nil allows
	// every result.
	Rights *identities.Identity
}

// candidates are c's secrets: Candidates, or the one of Method, Engine and
// Password.
func (c cipherConfig) candidates() []candidate {
	if len(c.Candidates) > 0 {
		return c.Candidates
	}
	return []candidate{{Method: c.Method, Engine: c.Engine, Password: c.Password}}
}

// packetSizes are the data packet sizes c accepts, ascending.
func (c cipherConfig) packetSizes() []int {
	lengths := c.PayloadLengths
	if len(lengths) == 0 {
		lengths = []int{codec.LegacyMaxOutputLength, codec.MaxOutputLength}
	}
	sizes := make([]int, len(lengths))
	for i, l := range lengths {
		sizes[i] = codec.SizeOf(l)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// callsC reports whether one of c's engines is libmcrypt, whose every
// Decrypt is a cgo call.
func (c cipherConfig) callsC() bool {
	for _, k := range c.candidates() {
		if callsC(k.Engine) {
			return true
		}
	}
	return false
}

func callsC(e cipher.Engine) bool { return e != nil && e.Kind() == cipher.EngineLibmcrypt }

// decrypter is one decrypt goroutine's state.
type decrypter struct {
	cfg   cipherConfig
	cands []keyed // the secrets, in the order they are tried
	// scratch holds a trial's plaintext (see trial), order the candidates
	// that may serve a connection, most specific first, and rank their
	// specificity; nil with one secret for every address.
	scratch     []byte
	order, rank []int
	nobody      keyed        // serves a connection no candidate may serve, to be refused
	state       cipher.State // a trial's CFB register
	sizes       []int        // accepted packet sizes, ascending
	stats       *counters.Stats
	log         *counters.RateLog
	diag        *diagnose.Diagnoser
	clients     *diagnose.Registry
	flow        *flow // decryptConfig.flow
	maxChecks   int   // decryptConfig.MaxChecks
}

// keyed is a candidate ready to decrypt in one decrypt goroutine.
type keyed struct {
	candidate
	xor *codec.XORKey
	// shared is keyed once for all this goroutine's connections: in
	// decryption_mode 1, and for trials.
	shared cipher.Key
	callsC bool   // the engine is libmcrypt's: every Decrypt is a cgo call
	method string // the method's name, for /clients
	// matches counts the connections whose first packet it decrypted.
	matches *atomic.Uint64
}

// trialDecrypt decrypts buf, at offset within a packet, continuing the
// stream in st, with the goroutine's shared key.
func (k *keyed) trialDecrypt(st *cipher.State, iv, buf []byte, offset int) {
	switch {
	case k.Method == 1:
		k.xor.Apply(buf, iv, offset) // XOR restarts with every packet
	case k.Engine != nil:
		k.shared.Decrypt(st, buf)
	}
}

// newChunkShards is the read stage's output and the decrypt stage's input:
// a shard per decrypt goroutine, depth chunks deep in all, sharded by
// connection.
func newChunkShards(goroutines, depth int) *stage.Shards[chunk] {
	return stage.NewShards(goroutines, depth, func(c chunk) uint64 { return c.conn.ID })
}

// startDecrypt runs a decrypt goroutine per shard of in. Connections are
// sharded over them (the read stage sends each chunk to its connection's
// shard), so each connection's bytes are framed and decrypted in order by
// one goroutine. Framing lives here because the packet size (one of
// payload_length's) can only be decided by decrypting the first packet. out
// is closed when all goroutines are done.
func startDecrypt(ctx context.Context, in *stage.Shards[chunk], out chan<- intake.Submission, dcfg decryptConfig, env stage.Env) error {
	n, cfg := len(in.C), dcfg.Cipher
	stats, log := env.Stats, env.Log
	ds := make([]*decrypter, n)
	for i := range ds {
		d, err := newDecrypter(cfg, stats, log)
		if err != nil {
			closeDecrypters(ds)
			return err
		}
		d.diag, d.clients, d.flow, d.maxChecks = env.Diagnose, env.Clients, dcfg.flow, dcfg.MaxChecks
		ds[i] = d
	}
	in.Run(ctx, "decrypt",
		func(ctx context.Context, id int, in <-chan chunk) { ds[id].loop(ctx, in, out) },
		func() {
			closeDecrypters(ds)
			if dcfg.Closed != nil {
				dcfg.Closed()
			} else {
				close(out)
			}
		})
	return nil
}

// newDecrypter is one decrypt goroutine's state for cfg, keyed already in
// decryption_mode 1 and, with several secrets, for their trials.
func newDecrypter(cfg cipherConfig, stats *counters.Stats, log *counters.RateLog) (*decrypter, error) {
	cands := cfg.candidates()
	d := &decrypter{cfg: cfg, stats: stats, log: log, sizes: cfg.packetSizes(), cands: make([]keyed, len(cands))}
	if len(cands) > 1 || cands[0].Networks != nil {
		d.scratch = make([]byte, d.sizes[len(d.sizes)-1])
		d.order, d.rank = make([]int, 0, len(cands)), make([]int, len(cands))
	}
	for i, c := range cands {
		k := &d.cands[i]
		k.candidate, k.xor, k.callsC = c, codec.NewXORKey(c.Password), callsC(c.Engine)
		if m, ok := conf.MethodByNumber(c.Method); ok {
			k.method = conf.NameOf(m)
		}
		if c.Name != "" {
			k.matches = stats.SecretMatches(c.Name)
		}
		if c.Engine != nil && (!cfg.PerConnection || len(cands) > 1) {
			key, err := c.Engine.NewKey()
			if err != nil {
				d.close()
				return nil, fmt.Errorf("%w: %s: %w", errCipher, c.Name, err)
			}
			k.shared = key
		}
	}
	return d, nil
}

// close releases the goroutine's keys.
func (d *decrypter) close() {
	for i := range d.cands {
		if k := d.cands[i].shared; k != nil {
			k.Close()
		}
	}
}

func closeDecrypters(ds []*decrypter) {
	for _, d := range ds {
		if d != nil {
			d.close()
		}
	}
}

func (d *decrypter) loop(ctx context.Context, in <-chan chunk, out chan<- intake.Submission) {
	for ch := range in {
		if ch.buf != nil {
			d.feed(ctx, ch.conn, ch.buf, ch.readAt, out)
			if d.flow != nil {
				d.flow.giveBack(ch.conn, cap(ch.buf))
			}
			putBuf(ch.buf)
		}
		if ch.eof {
			d.finish(ctx, ch.conn, ch.why, out)
		}
	}
}

// feed decrypts buf (a whole chunk, in place, with one Decrypt call) and
// frames the plaintext into the connection's packets, sending every packet
// it completes. Until the first packet has decided the connection's packet
// size, every accepted size is tried in increasing order as soon as that
// many bytes are in: the first whose prefix is a valid version-3 packet with
// a matching CRC is the size (720 for an NSCA 2.7 client, 4304 for
// send_nsca, others for NSClient++'s payload lengths), else the largest.
// CFB decrypts a prefix the same way as the whole, so nothing is decrypted
// twice.
func (d *decrypter) feed(ctx context.Context, c *clientConn, buf []byte, readAt int64, out chan<- intake.Submission) {
	if c.decrypt.discard {
		return
	}
	if int(c.decrypt.headN) < len(c.decrypt.head) {
		c.decrypt.headN += uint8(copy(c.decrypt.head[c.decrypt.headN:], buf))
	}
	if c.decrypt.sec == nil {
		if d.order == nil {
			c.decrypt.sec = &d.cands[0]
		} else if buf = d.choose(ctx, c, buf, readAt, out); len(buf) == 0 {
			return
		}
	}
	d.feedDecided(ctx, c, buf, readAt, out)
}

// feedDecided is feed for a connection whose secret is known.
func (d *decrypter) feedDecided(ctx context.Context, c *clientConn, buf []byte, readAt int64, out chan<- intake.Submission) {
	if c.decrypt.discard {
		return
	}
	sec := c.decrypt.sec
	if sec.Engine != nil {
		start := time.Now()
		d.decryptSliced(c, buf)
		took := time.Since(start)
		d.stats.DecryptNanos.Add(uint64(took))
		if d.flow != nil {
			d.flow.observe(len(buf), took)
		}
	}
	for len(buf) > 0 && !c.decrypt.discard {
		if c.decrypt.cur == nil {
			c.decrypt.cur = getPacketBuf(d.bufferSize(c))
		}
		target := c.decrypt.packetSize
		if target == 0 {
			target = d.nextSize(c.decrypt.curN)
		}
		n := min(target-c.decrypt.curN, len(buf))
		seg := c.decrypt.cur[c.decrypt.curN : c.decrypt.curN+n]
		copy(seg, buf[:n])
		if sec.Method == 1 {
			sec.xor.Apply(seg, c.IV[:], c.decrypt.curN) // XOR restarts with every packet
		}
		c.decrypt.curN += n
		buf = buf[n:]
		if c.decrypt.curN < target {
			return
		}
		valid := false // not known yet
		if c.decrypt.packetSize == 0 {
			size, decided, ok := d.decideSize(c.decrypt.cur[:c.decrypt.curN])
			if !decided {
				continue
			}
			valid = ok
			c.decrypt.packetSize, c.decrypt.firstBad = size, !valid
			// A wrong version at the start means a wrong password or method:
			// validation rejects that first packet, and the rest of the
			// stream cannot be framed into checks, so it is not counted as
			// more of them.
			c.decrypt.discard = int16(binary.BigEndian.Uint16(c.decrypt.cur)) != codec.Version
		}
		if c.decrypt.curN == c.decrypt.packetSize {
			d.stats.Received.Add(1)
			data := c.decrypt.cur[:c.decrypt.packetSize]
			c.decrypt.cur, c.decrypt.curN = nil, 0
			if !d.handOn(ctx, c, data, valid, readAt, out) {
				return
			}
		}
	}
}

// bufferSize is the packet buffer c needs: its packet size once decided,
// before that the largest accepted size.
func (d *decrypter) bufferSize(c *clientConn) int {
	if c.decrypt.packetSize != 0 {
		return c.decrypt.packetSize
	}
	return d.sizes[len(d.sizes)-1]
}

// nextSize is the smallest accepted size above n bytes, the next point at
// which an undecided connection's first packet is tried.
func (d *decrypter) nextSize(n int) int {
	for _, s := range d.sizes {
		if s > n {
			return s
		}
	}
	return d.sizes[len(d.sizes)-1]
}

// decideSize looks at the decrypted first bytes of a connection, as many as
// one of the accepted sizes. A packet of that size passes Valid. A packet
// whose version is wrong is wrong at any size, so it is passed on at the
// smallest size, to be rejected at once with its real reason instead of
// waiting for bytes that a client with the wrong password or a short-packet
// client will never send. At the largest size the packet is passed on as it
// is, for validation to reject.
func (d *decrypter) decideSize(first []byte) (size int, decided, valid bool) {
	n := len(first)
	if codec.Valid(first) {
		return n, true, true
	}
	if int16(binary.BigEndian.Uint16(first)) != codec.Version || n >= d.sizes[len(d.sizes)-1] {
		return n, true, false
	}
	return 0, false, false
}

// cgoSlice is the most one libmcrypt call decrypts: about 6 ms of 3DES, the
// dearest method in use, under the 10 ms after which the runtime's sysmon
// takes the P back from a goroutine in a C call.
const cgoSlice = 4 << 10

// decryptSliced decrypts buf with libmcrypt in calls of at most cgoSlice
// bytes, yielding before each, or with a native engine in one call. sysmon
// also takes the P of a C call when work is queued on it or when one
// goroutine has held it for 10 ms, and each time polls every 20 µs for the
// next millisecond: 4 % of a libmcrypt server's CPU. The yield runs the
// validate goroutine the last packet woke first, so nothing is queued, and
// moves the P's schedule tick, which a decrypt goroutine that never waits
// for input would not.
func (d *decrypter) decryptSliced(c *clientConn, buf []byte) {
	if !c.decrypt.sec.callsC {
		d.decrypt(c, buf)
		return
	}
	for len(buf) > 0 {
		n := min(len(buf), cgoSlice)
		runtime.Gosched()
		d.decrypt(c, buf[:n])
		buf = buf[n:]
	}
}

// decrypt decrypts buf in place as the continuation of c's stream, with
// c's own key in decryption_mode 0 (made at its first bytes) or the
// goroutine's in mode 1. If no key can be made, buf stays as it is and the
// error is kept for validation to report with the packet it spoils.
func (d *decrypter) decrypt(c *clientConn, buf []byte) {
	k := c.decrypt.sec.shared
	if d.cfg.PerConnection {
		if c.decrypt.key == nil {
			if c.decrypt.cipherErr != nil {
				return
			}
			var err error
			if c.decrypt.key, err = c.decrypt.sec.Engine.NewKey(); err != nil {
				c.decrypt.cipherErr = err
				return
			}
		}
		k = c.decrypt.key
	}
	if !c.decrypt.streaming {
		c.decrypt.stream.Start(c.decrypt.sec.Engine, c.IV[:])
		c.decrypt.streaming = true
	}
	k.Decrypt(&c.decrypt.stream, buf)
}

// finish handles the end of a connection. A packet left incomplete is a
// check the client did not finish sending: it is passed on as a packet
// without data, in order behind the connection's other packets, because
// only validation knows whether an earlier packet was rejected (then the
// tail is no check of its own).
func (d *decrypter) finish(ctx context.Context, c *clientConn, why string, out chan<- intake.Submission) {
	if why == "" {
		why = "client closed"
	}
	switch {
	case c.decrypt.curN == 0 || c.decrypt.discard:
		if c.decrypt.firstBad || c.decrypt.unmatched {
			d.diagnose(c, "no secret decrypts its first packet")
		}
	case c.read.bytesRead == uint64(c.decrypt.curN):
		// Every byte the connection sent is in this unfinished packet: it
		// never sent one whole packet (a slowloris, a port scanner, garbage).
		// That is a connection that failed, not a check that was lost, so it
		// is not counted as received. bytesRead is the read stage's, final
		// once it sent the last chunk, which came before this call.
		d.stats.Incomplete.Add(1)
		if why != "timeout" { // the read stage has logged a timeout already
			d.log.Eventf("ended before a whole packet", c.Peer.Addr().String(), "connection from %s ended (%s) after %d bytes, before a whole packet", c.Peer, why, c.decrypt.curN)
		}
		d.clients.Failed(c.Peer.Addr().Unmap(), fmt.Sprintf("connection ended (%s) after %d bytes, before a whole packet", why, c.decrypt.curN))
		d.diagnose(c, "ended ("+why+") before a whole packet")
	default:
		if c.decrypt.firstBad || c.decrypt.unmatched {
			d.diagnose(c, "no secret decrypts its first packet")
		}
		d.stats.Received.Add(1)
		size := c.decrypt.packetSize
		if size == 0 {
			size = d.sizes[0]
		}
		stage.Send(ctx, out, intake.Submission{Source: d.source(c), Kind: intake.KindIncomplete,
			Incomplete: &intake.Incomplete{Got: c.decrypt.curN, Want: size, Why: why}})
	}
	if c.decrypt.cur != nil {
		putBuf(c.decrypt.cur)
		c.decrypt.cur = nil
	}
	if c.decrypt.key != nil {
		c.decrypt.key.Close()
		c.decrypt.key = nil
	}
}

// diagnose hands c, which ended without a valid first packet, to the
// diagnosis, which works out why off the hot path.
func (d *decrypter) diagnose(c *clientConn, why string) {
	if d.diag == nil {
		return
	}
	d.diag.Submit(diagnose.Event{Addr: c.Peer.Addr().Unmap(), IV: c.IV, InitTime: c.InitTime,
		Head: append([]byte(nil), c.decrypt.head[:c.decrypt.headN]...), Total: c.read.bytesRead, Why: why})
}
