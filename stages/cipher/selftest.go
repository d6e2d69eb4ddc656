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
	ne, label, why := selfTestSubject(e)
	if why != "" {
		return SelfTestReport{Skipped: true, Why: why}, nil
	}
	ref, why := openReference(ne, label)
	if why != "" {
		return SelfTestReport{Skipped: true, Why: why}, nil
	}
	defer ref.Close()
	run, err := newSelfTestRun(e, label)
	if err != nil {
		return SelfTestReport{}, err
	}
	rep, err := run.encryptStreams(ne, ref)
	if err != nil {
		return rep, err
	}
	if err := run.decryptKeyPerStream(); err != nil {
		return rep, err
	}
	if err := run.decryptSharedKey(); err != nil {
		return rep, err
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// selfTestSubject is e as the native engine SelfTest can compare and the
// label its messages name it by, or why it cannot be compared at all
// (checked before libmcrypt is opened, so a skip costs nothing).
func selfTestSubject(e Engine) (ne *nativeEngine, label, why string) {
	ne, ok := e.(*nativeEngine)
	if !ok {
		return nil, "", fmt.Sprintf("%s is served by %s itself", methodLabel(e.Method(), e.Algorithm()), e.Kind())
	}
	label = fmt.Sprintf("native %s", methodLabel(e.Method(), e.Algorithm()))
	if !haveCgo {
		return nil, label, label + " not compared with libmcrypt: nsca_fast was built without cgo, so without libmcrypt"
	}
	if ne.spec.ref == "" {
		return nil, label, label + " not compared with libmcrypt, which has no cipher keyed the same way"
	}
	return ne, label, ""
}

// openReference opens libmcrypt's cipher for ne, or says why it cannot stand
// as the reference: libmcrypt cannot open it, or keys it with other sizes
// (then comparing would only prove the sizes differ). The caller closes it.
func openReference(ne *nativeEngine, label string) (*mcrypt.Module, string) {
	ref, err := mcrypt.Open(ne.spec.ref)
	if err != nil {
		return nil, fmt.Sprintf("%s not compared with libmcrypt, which cannot open it: %v", label, err)
	}
	// NSCA keys stock's methods with libmcrypt's largest key size; only
	// this project's own methods take a smaller one (aes128 is rijndael-128
	// keyed with 16 bytes).
	keyOK := ref.KeySize() == ne.spec.keySize || ne.spec.own() && ref.KeySize() > ne.spec.keySize
	if !keyOK || ref.IVSize() != ne.spec.blockSize {
		why := fmt.Sprintf("%s not compared with libmcrypt: libmcrypt %s keys with %d bytes and a %d-byte register, this engine with %d and %d",
			label, ne.spec.ref, ref.KeySize(), ref.IVSize(), ne.spec.keySize, ne.spec.blockSize)
		ref.Close()
		return nil, why
	}
	return ref, ""
}

// selfTestStream is one connection's worth of test traffic.
type selfTestStream struct {
	iv          []byte
	plain, ct   []byte // all packets back to back
	size, count int
}

// selfTestRun is what one SelfTest's steps share: the engine under test, the
// label its errors name it by, its random sources (seeded afresh each run, so
// every start tries new splits) and the streams libmcrypt encrypted.
type selfTestRun struct {
	e       Engine
	label   string
	rng     *rand.Rand    // chunk splits and interleaving
	chacha  *rand.ChaCha8 // IVs and plaintext
	streams []*selfTestStream
}

// newSelfTestRun seeds the run's random sources from the system's randomness.
func newSelfTestRun(e Engine, label string) (*selfTestRun, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("%w: %s: no randomness: %w", ErrSelfTest, label, err)
	}
	run := &selfTestRun{e: e, label: label, rng: rand.New(rand.NewChaCha8(seed))}
	seed[0] ^= 1 // an independent stream for the bulk bytes
	run.chacha = rand.NewChaCha8(seed)
	return run, nil
}

// encryptStreams makes each of selfTestStreams' streams and encrypts it with
// libmcrypt as send_nsca does. The report counts what was made, also when an
// error stops it part way.
func (run *selfTestRun) encryptStreams(ne *nativeEngine, ref *mcrypt.Module) (SelfTestReport, error) {
	rep := SelfTestReport{}
	run.streams = make([]*selfTestStream, len(selfTestStreams))
	for i, st := range selfTestStreams {
		s := &selfTestStream{iv: make([]byte, 128), plain: make([]byte, st.size*st.packets), size: st.size, count: st.packets}
		_, _ = run.chacha.Read(s.iv)
		_, _ = run.chacha.Read(s.plain)
		s.ct = bytes.Clone(s.plain)
		if err := ref.InitSized(ne.password, s.iv, ne.spec.keySize); err != nil {
			return rep, fmt.Errorf("%w: %s: libmcrypt: %w", ErrSelfTest, run.label, err)
		}
		for p := 0; p < st.packets; p++ { // send_nsca encrypts packet by packet
			forSplits(run.rng, s.ct[p*st.size:(p+1)*st.size], ref.Encrypt)
		}
		run.streams[i] = s
		rep.Streams++
		rep.Packets += st.packets
		rep.Bytes += len(s.plain)
	}
	return rep, nil
}

// newKey is a Key of the engine under test, swapped by selfTestKeyHook when a
// test has set it.
func (run *selfTestRun) newKey() (Key, error) {
	k, err := run.e.NewKey()
	if err != nil {
		return nil, err
	}
	if selfTestKeyHook != nil {
		k = selfTestKeyHook(k)
	}
	return k, nil
}

// check compares stream i as decrypted in decryption_mode mode with its
// plaintext, and on a difference says where the first one is.
func (run *selfTestRun) check(mode, i int, got []byte) error {
	s := run.streams[i]
	if bytes.Equal(got, s.plain) {
		return nil
	}
	at := 0
	for got[at] == s.plain[at] {
		at++
	}
	return fmt.Errorf("%w: %s decrypted what libmcrypt encrypted differently in decryption_mode=%d: stream %d (%d-byte packets) differs at byte %d of packet %d; refusing the native engine",
		ErrSelfTest, run.label, mode, i, s.size, at%s.size, at/s.size)
}

// decryptKeyPerStream checks decryption_mode 0: one Key per stream.
func (run *selfTestRun) decryptKeyPerStream() error {
	for i, s := range run.streams {
		k, err := run.newKey()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSelfTest, run.label, err)
		}
		var st State
		st.Start(run.e, s.iv)
		got := bytes.Clone(s.ct)
		forSplits(run.rng, got, func(b []byte) { k.Decrypt(&st, b) })
		k.Close()
		if err := run.check(0, i, got); err != nil {
			return err
		}
	}
	return nil
}

// decryptSharedKey checks decryption_mode 1: one Key, a State per stream,
// chunks of the streams interleaved at random.
func (run *selfTestRun) decryptSharedKey() error {
	k, err := run.newKey()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSelfTest, run.label, err)
	}
	defer k.Close()
	streams := run.streams
	states := make([]State, len(streams))
	gots := make([][]byte, len(streams))
	offs := make([]int, len(streams))
	left := len(streams)
	for i, s := range streams {
		states[i].Start(run.e, s.iv)
		gots[i] = bytes.Clone(s.ct)
	}
	for left > 0 {
		i := run.rng.IntN(len(streams))
		if offs[i] == len(gots[i]) {
			continue
		}
		n := min(splitLen(run.rng), len(gots[i])-offs[i])
		k.Decrypt(&states[i], gots[i][offs[i]:offs[i]+n])
		if offs[i] += n; offs[i] == len(gots[i]) {
			left--
		}
	}
	for i := range streams {
		if err := run.check(1, i, gots[i]); err != nil {
			return err
		}
	}
	return nil
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
