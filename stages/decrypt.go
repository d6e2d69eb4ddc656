package stages

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"nsca_fast/cgo/mcrypt"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
)

// ErrCipher wraps failures to set up decryption.
var ErrCipher = errors.New("stages: cipher")

// DecryptConfig are the decrypt stage's settings.
type DecryptConfig struct {
	// Goroutines is how many decrypt goroutines share the connections;
	// Depth bounds each one's queue.
	Goroutines, Depth int
	Cipher            CipherConfig
}

// CipherConfig says how clients encrypt, from decryption_method,
// decryption_mode and password.
type CipherConfig struct {
	Method    int    // 0 none, 1 XOR, 2..26 libmcrypt
	Algorithm string // libmcrypt name for methods 2..26
	Password  []byte
	// PerConnection is decryption_mode=0: a fresh libmcrypt instance, opened
	// and keyed for each connection, as stock does. Otherwise each decrypt
	// goroutine keys one instance at start and only sets the CFB register
	// per connection and packet.
	PerConnection bool
}

func (c CipherConfig) usesMcrypt() bool { return c.Method >= 2 }

// CheckCipher opens and keys the configured algorithm once, so that a method
// libmcrypt cannot open refuses to start instead of failing every client.
func CheckCipher(c CipherConfig) error {
	if !c.usesMcrypt() {
		return nil
	}
	m, err := mcrypt.Open(c.Algorithm)
	if err != nil {
		return fmt.Errorf("%w: decryption_method=%d (%s): %w", ErrCipher, c.Method, c.Algorithm, err)
	}
	defer m.Close()
	if err := m.Init(c.Password, make([]byte, codec.IVSize)); err != nil {
		return fmt.Errorf("%w: decryption_method=%d (%s): %w", ErrCipher, c.Method, c.Algorithm, err)
	}
	return nil
}

// decrypter is one decrypt goroutine's state.
type decrypter struct {
	cfg    CipherConfig
	xor    *codec.XORKey
	shared *mcrypt.Module // decryption_mode=1: keyed once, register set per use
	ivSize int
	stats  *counters.Stats
	log    *counters.RateLog
}

// StartDecrypt runs n decrypt goroutines. Connections are sharded over them,
// so each connection's bytes are framed and decrypted in order by one
// goroutine. Framing lives here because the packet size (720 or 4304) can
// only be decided by decrypting the first packet. out is closed when all
// goroutines are done.
func StartDecrypt(ctx context.Context, in <-chan chunk, out chan<- Packet, dcfg DecryptConfig, env Env) error {
	n, depth, cfg := max(dcfg.Goroutines, 1), dcfg.Depth, dcfg.Cipher
	stats, log := env.Stats, env.Log
	ds := make([]*decrypter, n)
	for i := range ds {
		d := &decrypter{cfg: cfg, stats: stats, log: log, xor: codec.NewXORKey(cfg.Password)}
		if cfg.usesMcrypt() {
			m, err := mcrypt.Open(cfg.Algorithm)
			if err != nil {
				closeDecrypters(ds)
				return fmt.Errorf("%w: %w", ErrCipher, err)
			}
			d.ivSize = m.IVSize()
			if cfg.PerConnection {
				m.Close()
			} else if err := m.Init(cfg.Password, make([]byte, codec.IVSize)); err != nil {
				m.Close()
				closeDecrypters(ds)
				return fmt.Errorf("%w: %w", ErrCipher, err)
			} else {
				d.shared = m
			}
		}
		ds[i] = d
	}
	startSharded(ctx, "decrypt", in, n, depth, func(c chunk) uint64 { return c.conn.ID },
		func(ctx context.Context, id int, in <-chan chunk) { ds[id].loop(ctx, in, out) },
		func() {
			closeDecrypters(ds)
			close(out)
		})
	return nil
}

func closeDecrypters(ds []*decrypter) {
	for _, d := range ds {
		if d != nil && d.shared != nil {
			d.shared.Close()
		}
	}
}

func (d *decrypter) loop(ctx context.Context, in <-chan chunk, out chan<- Packet) {
	for ch := range in {
		if ch.eof {
			d.finish(ctx, ch.conn, ch.why, out)
			continue
		}
		d.feed(ctx, ch.conn, ch.buf, out)
		putChunk(ch.buf)
	}
}

// feed decrypts buf into the connection's current packet and sends every
// packet it completes. The first 720 bytes of a connection are checked on
// their own: a valid version-3 packet with a matching CRC there is a legacy
// (NSCA 2.7) client, and all its packets are 720 bytes; otherwise they are
// 4304. CFB decrypts a prefix the same way as the whole, so nothing is
// decrypted twice.
func (d *decrypter) feed(ctx context.Context, c *Conn, buf []byte, out chan<- Packet) {
	for len(buf) > 0 && !c.discard {
		if c.cur == nil {
			c.cur = getPacketBuf()
		}
		target := c.packetSize
		if target == 0 {
			target = codec.LegacySize
			if c.curN >= codec.LegacySize {
				target = codec.Size
			}
		}
		n := min(target-c.curN, len(buf))
		start := time.Now()
		if err := d.decrypt(c, c.cur[c.curN:c.curN+n], buf[:n]); err != nil {
			c.cipherErr = err
		}
		d.stats.DecryptNanos.Add(uint64(time.Since(start)))
		c.curN += n
		buf = buf[n:]
		if c.curN < target {
			return
		}
		if c.packetSize == 0 {
			c.packetSize = d.decideSize(c.cur[:codec.LegacySize])
			// A wrong version at the start means a wrong password or method:
			// validation rejects that first packet, and the rest of the
			// stream cannot be framed into checks, so it is not counted as
			// more of them.
			c.discard = int16(binary.BigEndian.Uint16(c.cur)) != codec.Version
		}
		if c.curN == c.packetSize {
			d.stats.Received.Add(1)
			p := Packet{Conn: c, Data: c.cur[:c.packetSize]}
			c.cur, c.curN = nil, 0
			if !send(ctx, out, p) {
				return
			}
		}
	}
}

// decideSize looks at the decrypted first 720 bytes of a connection. A
// legacy packet passes Check at 720 bytes. A packet whose version is wrong
// is wrong at any size, so it is passed on at 720 bytes too, to be rejected
// at once with its real reason instead of waiting for bytes that a client
// with the wrong password or a 720-byte client will never send.
func (d *decrypter) decideSize(first []byte) int {
	if codec.Valid(first) || int16(binary.BigEndian.Uint16(first)) != codec.Version {
		return codec.LegacySize
	}
	return codec.Size
}

// decrypt writes the plaintext of src, which continues the connection's
// current packet at offset c.curN, into dst.
func (d *decrypter) decrypt(c *Conn, dst, src []byte) error {
	copy(dst, src)
	switch {
	case d.cfg.Method == 0:
		return nil
	case d.cfg.Method == 1:
		d.xor.Apply(dst, c.IV[:], c.curN)
		return nil
	case d.cfg.PerConnection:
		if c.module == nil {
			if c.cipherErr != nil {
				return c.cipherErr
			}
			m, err := mcrypt.Open(d.cfg.Algorithm)
			if err != nil {
				return err
			}
			iv := c.IV // cgo may not be handed memory inside Conn, which holds Go pointers
			if err := m.Init(d.cfg.Password, iv[:]); err != nil {
				m.Close()
				return err
			}
			c.module = m
		}
		c.module.Decrypt(dst)
		return nil
	default:
		if c.register == nil {
			c.register = make([]byte, d.ivSize)
			copy(c.register, c.IV[:])
		}
		d.shared.DecryptFrom(c.register, dst)
		// The CFB register before the next byte is the last iv_size bytes of
		// the ciphertext so far.
		if len(src) >= d.ivSize {
			copy(c.register, src[len(src)-d.ivSize:])
		} else {
			copy(c.register, c.register[len(src):])
			copy(c.register[d.ivSize-len(src):], src)
		}
		return nil
	}
}

// finish handles the end of a connection. A packet left incomplete is a
// check the client did not finish sending: it is passed on as a Packet
// without data, in order behind the connection's other packets, because
// only validation knows whether an earlier packet was rejected (then the
// tail is no check of its own).
func (d *decrypter) finish(ctx context.Context, c *Conn, why string, out chan<- Packet) {
	if why == "" {
		why = "client closed"
	}
	switch {
	case c.curN == 0 || c.discard:
	case c.bytesRead == uint64(c.curN):
		// Every byte the connection sent is in this unfinished packet: it
		// never sent one whole packet (a slowloris, a port scanner, garbage).
		// That is a connection that failed, not a check that was lost, so it
		// is not counted as received. bytesRead is the read stage's, final
		// once it sent the last chunk, which came before this call.
		d.stats.Incomplete.Add(1)
		if why != "timeout" { // the read stage has logged a timeout already
			d.log.Warningf(c.Peer.Addr().String(), "connection from %s ended (%s) after %d bytes, before a whole packet", c.Peer, why, c.curN)
		}
	default:
		d.stats.Received.Add(1)
		size := c.packetSize
		if size == 0 {
			size = codec.LegacySize
		}
		send(ctx, out, Packet{Conn: c, Short: &ShortPacket{Got: c.curN, Want: size, Why: why}})
	}
	if c.cur != nil {
		putPacketBuf(c.cur)
		c.cur = nil
	}
	if c.module != nil {
		c.module.Close()
		c.module = nil
	}
}
