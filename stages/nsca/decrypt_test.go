package nsca

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"nsca_fast/conf"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

// encryptStream encrypts packets as one connection's stream with a native
// engine keyed like the server's (what libmcrypt encrypts, the self-test and
// the black-box tests prove equal), by running 8-bit CFB forwards.
func encryptStream(t testing.TB, e cipher.Engine, iv []byte, plain []byte) []byte {
	t.Helper()
	// CFB decryption of ciphertext c gives p; encryption is found byte by
	// byte: c[i] = p[i] ^ E(reg)[0], and decrypting c[:i+1] reveals E(reg)[0].
	k, err := e.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	var st cipher.State
	st.Start(e, iv)
	ct := make([]byte, len(plain))
	for i := range plain {
		probe := st // decrypting a zero byte at the register gives the keystream byte
		var z [1]byte
		k.Decrypt(&probe, z[:])
		ct[i] = plain[i] ^ z[0]
		k.Decrypt(&st, []byte{ct[i]})
	}
	return ct
}

// chooseCipher is cfg with the engine cipher.Choose picks for cfg's method
// (named alg) as engine asks.
func chooseCipher(t testing.TB, alg, engine string, cfg cipherConfig) cipherConfig {
	t.Helper()
	c, err := cipher.Choose(cfg.Method, alg, cfg.Password, engine)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = c.Engine
	return cfg
}

func newTestDecrypter(t testing.TB, cfg cipherConfig) (*decrypter, *counters.Stats) {
	t.Helper()
	stats := counters.NewStats()
	d, err := newDecrypter(cfg, stats, counters.NewRateLog(time.Second, 5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return d, stats
}

// TestDecryptPayloadLengths frames connections of every accepted packet
// size, in random chunk splits, several packets each, with the native,
// libmcrypt (whose chunks above cgoSlice are decrypted in slices) and the
// own engines in both modes, and a connection whose size is not accepted.
func TestDecryptPayloadLengths(t *testing.T) {
	lengths := []int{512, 1024, 4096, 8192}
	rng := rand.New(rand.NewPCG(1, 2))
	type method struct {
		method int
		alg    string
		engine string
	}
	methods := []method{{14, "rijndael-128", cipher.EngineNative}, {3, "tripledes", cipher.EngineNative},
		{cipher.MethodAES128, "aes128", cipher.EngineNative}, {cipher.MethodGOST, "gost", cipher.EngineNative}}
	if cipher.HasLibmcrypt() {
		methods = append(methods, method{3, "tripledes", cipher.EngineLibmcrypt}, method{8, "blowfish", cipher.EngineLibmcrypt})
	}
	for _, m := range methods {
		for _, perConn := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%s/perconn=%v", m.alg, m.engine, perConn), func(t *testing.T) {
				cfg := chooseCipher(t, m.alg, m.engine, cipherConfig{Method: m.method, Password: []byte(testPassword), PerConnection: perConn,
					PayloadLengths: lengths})
				d, _ := newTestDecrypter(t, cfg)
				if d.cands[0].callsC != (m.engine == cipher.EngineLibmcrypt) {
					t.Fatalf("callsC = %v with engine %s", d.cands[0].callsC, m.engine)
				}
				for _, payload := range append(lengths, 2048) {
					c := &clientConn{connIdentity: connIdentity{ID: 1}, read: connRead{reader: &reader{}}}
					for i := range c.IV {
						c.IV[i] = byte(rng.Uint32())
					}
					size := codec.SizeOf(payload)
					var plain []byte
					for i := range 3 {
						pkt := make([]byte, size)
						for j := range pkt {
							pkt[j] = byte(rng.Uint32())
						}
						codec.Encode(pkt, codec.Result{Timestamp: 1, Host: "h", Service: fmt.Sprint(i), Output: "out"})
						plain = append(plain, pkt...)
					}
					ct := encryptStream(t, d.cands[0].Engine, c.IV[:], plain)
					out := make(chan intake.Submission, 16)
					got := feedInPieces(d, c, ct, 6000, rng, out)
					if payload == 2048 { // not accepted: passed on at the largest size, to fail its CRC
						if len(got) != 0 && got[0].Malformed == nil {
							t.Errorf("payload length %d (not accepted) gave a valid packet", payload)
						}
						continue
					}
					if len(got) != 3 {
						t.Fatalf("payload length %d: %d packets, want 3", payload, len(got))
					}
					for i, p := range got {
						if p.Malformed != nil || p.Result != codec.Decode(plain[i*size:(i+1)*size]) {
							t.Errorf("payload length %d: packet %d differs", payload, i)
						}
					}
				}
			})
		}
	}
}

// TestDecryptNoAllocs: decrypting, framing and handing on a connection's
// packets allocates nothing but the decoded result's strings (here host
// and output: the service is empty); buffers come from pools.
func TestDecryptNoAllocs(t *testing.T) {
	cfg := chooseCipher(t, "rijndael-128", cipher.EngineNative, cipherConfig{Method: 14, Password: []byte(testPassword)})
	d, _ := newTestDecrypter(t, cfg)
	c := &clientConn{connIdentity: connIdentity{ID: 1}, read: connRead{reader: &reader{}}}
	const runs = 200
	plain := make([]byte, codec.Size*(runs+2))
	for i := 0; i < runs+2; i++ {
		codec.Encode(plain[i*codec.Size:(i+1)*codec.Size], codec.Result{Timestamp: 1, Host: "h", Output: "o"})
	}
	ct := encryptStream(t, d.cands[0].Engine, c.IV[:], plain)
	out := make(chan intake.Submission, 1)
	d.feed(context.Background(), c, bytes.Clone(ct[:codec.Size]), 0, out) // decides the size
	<-out
	next := codec.Size
	buf := getBuf(chunkSize)[:codec.Size]
	allocs := testing.AllocsPerRun(runs, func() {
		copy(buf, ct[next:next+codec.Size])
		next += codec.Size
		d.feed(context.Background(), c, buf, 0, out)
		if s := <-out; s.Malformed != nil || s.Result.Host != "h" {
			t.Fatalf("handed on %+v", s)
		}
	})
	if allocs > 2 {
		t.Errorf("%.1f allocations per packet, want at most the 2 decoded strings", allocs)
	}
}

// TestCgoGoroutines: only libmcrypt's decrypt goroutines spend their time
// in C calls, one per CPU of the worker's share by default.
func TestCgoGoroutines(t *testing.T) {
	for _, c := range []struct {
		method        int
		engine        string
		threads, want int
	}{{1, "", 0, 0}, {14, cipher.EngineNative, 0, 0}, {3, cipher.EngineLibmcrypt, 3, 3}, {3, cipher.EngineLibmcrypt, 0, runtime.NumCPU()}} {
		if c.engine == cipher.EngineLibmcrypt && !cipher.HasLibmcrypt() {
			continue
		}
		cfg := conf.Embedded()
		cfg.Password = testPassword
		cfg.DecryptionMethod, cfg.DecryptionEngine, cfg.ThreadsPerWorker = c.method, c.engine, c.threads
		if got := CgoGoroutines(cfg); got != c.want {
			t.Errorf("method %d, engine %q, %d threads: %d in C calls, want %d", c.method, c.engine, c.threads, got, c.want)
		}
	}
}

// feedInPieces feeds ct to d for c in chunks of 1..most random bytes, as
// the read stage sends them (pool buffers), ends the connection, and
// returns the complete submissions d handed on.
func feedInPieces(d *decrypter, c *clientConn, ct []byte, most int, rng *rand.Rand, out chan intake.Submission) []intake.Submission {
	for len(ct) > 0 {
		n := min(1+rng.IntN(most), len(ct))
		buf := append(getBuf(chunkSize)[:0], ct[:n]...)
		d.feed(context.Background(), c, buf, 0, out)
		ct = ct[n:]
	}
	d.finish(context.Background(), c, "", out)
	close(out)
	var got []intake.Submission
	for p := range out {
		if p.Kind != intake.KindIncomplete {
			got = append(got, p)
		}
	}
	return got
}
