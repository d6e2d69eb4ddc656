package cipher

import (
	"bytes"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"time"

	"nsca_fast/cgo/mcrypt"
)

// SelfTestReport says what SelfTest did.
type SelfTestReport struct {
	// Skipped is true when nothing could be compared; Why says why.
	Skipped bool
	Why     string
	// Streams, Packets and Bytes count what was encrypted by libmcrypt and
	// decrypted by the engine (each stream once per decryption_mode).
	Streams, Packets, Bytes int
	// Took is the wall time of the whole test.
	Took time.Duration
}

// String is the report as one log line.
func (r SelfTestReport) String() string {
	if r.Skipped {
		return "self-test skipped: " + r.Why
	}
	return fmt.Sprintf("self-test passed: %d streams, %d packets, %d bytes decrypted identically to libmcrypt in decryption_modes 0 and 1 (%v)",
		r.Streams, r.Packets, r.Bytes, r.Took.Round(time.Microsecond))
}

// selfTestKeyHook, when set (by tests only), replaces each Key SelfTest
// decrypts with, so a test can prove a wrong engine is rejected.
var selfTestKeyHook func(Key) Key

// selfTestStreams are the packet sizes of the streams SelfTest sends, one
// connection each: send_nsca's 4304-byte packets and legacy 720-byte ones.
var selfTestStreams = []struct{ size, packets int }{
	{4304, 3}, {720, 2}, {4304, 2}, {720, 3},
}

// SelfTest proves that native engine e decrypts exactly what libmcrypt
// encrypts, before the daemon serves with it: random plaintext packets,
// several per stream, encrypted as send_nsca does (libmcrypt keyed with the
// real password and a random 128-byte IV, the stream running across the
// packets) in random chunk splits, then decrypted by e in random chunk splits
// in decryption_mode 0 (a Key per stream) and 1 (one Key for all streams,
// their chunks interleaved). Any difference is an ErrSelfTest error saying
// where. With a libmcrypt engine there is nothing to prove, and without cgo
// nothing to compare with: the report is then Skipped, saying why, and the
// error nil.
func SelfTest(e Engine) (SelfTestReport, error) {
	start := time.Now()
	ne, ok := e.(*nativeEngine)
	if !ok {
		return SelfTestReport{Skipped: true, Why: fmt.Sprintf("%s is served by %s itself", methodLabel(e.Method(), e.Algorithm()), e.Kind())}, nil
	}
	label := fmt.Sprintf("native %s", methodLabel(e.Method(), e.Algorithm()))
	if !haveCgo {
		return SelfTestReport{Skipped: true, Why: label + " not compared with libmcrypt: nsca_fast was built without cgo, so without libmcrypt"}, nil
	}
	if ne.spec.ref == "" {
		return SelfTestReport{Skipped: true, Why: label + " not compared with libmcrypt, which has no cipher keyed the same way"}, nil
	}
	ref, err := mcrypt.Open(ne.spec.ref)
	if err != nil {
		return SelfTestReport{Skipped: true, Why: fmt.Sprintf("%s not compared with libmcrypt, which cannot open it: %v", label, err)}, nil
	}
	defer ref.Close()
	// NSCA keys stock's methods with libmcrypt's largest key size; only
	// this project's own methods take a smaller one (aes128 is rijndael-128
	// keyed with 16 bytes).
	keyOK := ref.KeySize() == ne.spec.keySize || ne.spec.own() && ref.KeySize() > ne.spec.keySize
	if !keyOK || ref.IVSize() != ne.spec.blockSize {
		return SelfTestReport{Skipped: true, Why: fmt.Sprintf("%s not compared with libmcrypt: libmcrypt %s keys with %d bytes and a %d-byte register, this engine with %d and %d",
			label, ne.spec.ref, ref.KeySize(), ref.IVSize(), ne.spec.keySize, ne.spec.blockSize)}, nil
	}

	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return SelfTestReport{}, fmt.Errorf("%w: %s: no randomness: %w", ErrSelfTest, label, err)
	}
	rng := rand.New(rand.NewChaCha8(seed))
	seed[0] ^= 1 // an independent stream for the bulk bytes
	chacha := rand.NewChaCha8(seed)

	type stream struct {
		iv          []byte
		plain, ct   []byte // all packets back to back
		size, count int
	}
	rep := SelfTestReport{}
	streams := make([]*stream, len(selfTestStreams))
	for i, st := range selfTestStreams {
		s := &stream{iv: make([]byte, 128), plain: make([]byte, st.size*st.packets), size: st.size, count: st.packets}
		_, _ = chacha.Read(s.iv)
		_, _ = chacha.Read(s.plain)
		s.ct = bytes.Clone(s.plain)
		if err := ref.InitSized(ne.password, s.iv, ne.spec.keySize); err != nil {
			return rep, fmt.Errorf("%w: %s: libmcrypt: %w", ErrSelfTest, label, err)
		}
		for p := 0; p < st.packets; p++ { // send_nsca encrypts packet by packet
			forSplits(rng, s.ct[p*st.size:(p+1)*st.size], ref.Encrypt)
		}
		streams[i] = s
		rep.Streams++
		rep.Packets += st.packets
		rep.Bytes += len(s.plain)
	}

	newKey := func() (Key, error) {
		k, err := e.NewKey()
		if err != nil {
			return nil, err
		}
		if selfTestKeyHook != nil {
			k = selfTestKeyHook(k)
		}
		return k, nil
	}
	check := func(mode, i int, got []byte) error {
		s := streams[i]
		if bytes.Equal(got, s.plain) {
			return nil
		}
		at := 0
		for got[at] == s.plain[at] {
			at++
		}
		return fmt.Errorf("%w: %s decrypted what libmcrypt encrypted differently in decryption_mode=%d: stream %d (%d-byte packets) differs at byte %d of packet %d; refusing the native engine",
			ErrSelfTest, label, mode, i, s.size, at%s.size, at/s.size)
	}

	// decryption_mode 0: one Key per stream.
	for i, s := range streams {
		k, err := newKey()
		if err != nil {
			return rep, fmt.Errorf("%w: %s: %w", ErrSelfTest, label, err)
		}
		var st State
		st.Start(e, s.iv)
		got := bytes.Clone(s.ct)
		forSplits(rng, got, func(b []byte) { k.Decrypt(&st, b) })
		k.Close()
		if err := check(0, i, got); err != nil {
			return rep, err
		}
	}

	// decryption_mode 1: one Key, a State per stream, chunks interleaved.
	k, err := newKey()
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrSelfTest, label, err)
	}
	defer k.Close()
	states := make([]State, len(streams))
	gots := make([][]byte, len(streams))
	offs := make([]int, len(streams))
	left := len(streams)
	for i, s := range streams {
		states[i].Start(e, s.iv)
		gots[i] = bytes.Clone(s.ct)
	}
	for left > 0 {
		i := rng.IntN(len(streams))
		if offs[i] == len(gots[i]) {
			continue
		}
		n := min(splitLen(rng), len(gots[i])-offs[i])
		k.Decrypt(&states[i], gots[i][offs[i]:offs[i]+n])
		if offs[i] += n; offs[i] == len(gots[i]) {
			left--
		}
	}
	for i := range streams {
		if err := check(1, i, gots[i]); err != nil {
			return rep, err
		}
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// splitLen is a random chunk length: often tiny (shorter than a register),
// often a few hundred bytes, sometimes whole packets.
func splitLen(rng *rand.Rand) int {
	switch rng.IntN(4) {
	case 0:
		return 1 + rng.IntN(33)
	case 1:
		return 1 + rng.IntN(600)
	case 2:
		return 1 + rng.IntN(5000)
	default:
		return 720 + rng.IntN(9000)
	}
}

// forSplits calls f on consecutive random-length pieces covering buf.
func forSplits(rng *rand.Rand, buf []byte, f func([]byte)) {
	for len(buf) > 0 {
		n := min(splitLen(rng), len(buf))
		f(buf[:n])
		buf = buf[n:]
	}
}
