// Package diagnose works out what a misconfigured client did, off the hot
// path: the pipeline hands it the first bytes of each connection that no
// secret decrypted or that never sent a whole packet, and it tells apart
// another method with a known password, an unknown password, a payload
// length payload_length does not list, an NSCA 2.7 client, and clients that
// speak no NSCA (HTTP, TLS, an nsca-ng client on the NSCA port). Its CPU is
// bounded per second and its findings are cached per source, so a flood
// of garbage costs a fixed share of one CPU and one log line per source
// per interval. It also keeps the table of recent sources behind the
// metrics listener's /clients page (see Registry).
package diagnose

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/conf"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
)

// HeadSize is how many of a connection's first bytes a diagnosis looks
// at: enough for a TLS ClientHello's cipher suites.
const HeadSize = 160

// Event is one connection to diagnose.
type Event struct {
	Addr     netip.Addr
	IV       [codec.IVSize]byte
	InitTime uint32 // the timestamp of the init packet, which send_nsca echoes
	Head     []byte // the first bytes received, at most HeadSize, undecrypted
	Total    uint64 // bytes the connection sent in all
	Why      string // what the pipeline saw: "no secret matched", "ended before a whole packet"
}

// Secret is one secret the server accepts, as the diagnosis knows it.
type Secret struct {
	Name     string
	Method   int
	Password []byte
	Networks []netip.Prefix // nil: anywhere
}

// Config are a Diagnoser's settings.
type Config struct {
	Secrets []Secret
	// PayloadLengths are payload_length's.
	PayloadLengths []int
	// Budget is the CPU time diagnoses may take per second (default 20 ms):
	// beyond it, events wait for the next second's or are dropped.
	Budget time.Duration
	// Interval is how long a source's finding stands before it is
	// diagnosed and logged again (default one minute).
	Interval time.Duration
	// Registry, when set, records each finding as the source's last error.
	Registry *Registry
	// Logf logs a finding about the source key; nil: glog.Warningf. The
	// daemon's goes through its rate-limited log, whose budget for all
	// sources together bounds what a flood of many sources logs.
	Logf func(key, format string, args ...any)
}

// Diagnoser runs diagnoses in one goroutine of its own.
type Diagnoser struct {
	cfg     Config
	events  chan Event
	engines map[engineKey]*trialKey // made at first use
	mu      sync.Mutex
	last    map[netip.Addr]finding // per source, bounded
	// Dropped counts events not diagnosed: the queue was full or the
	// budget spent.
	dropped uint64
	stop    chan struct{}
	done    chan struct{}
}

type engineKey struct {
	method   int
	password string
}

type trialKey struct {
	engine cipher.Engine
	key    cipher.Key
	xor    *codec.XORKey
}

type finding struct {
	text string
	at   time.Time
}

// spentTotal is the time every Diagnoser of the process spent diagnosing,
// in nanoseconds, as their budgets count it; cpuTotal the CPU time of it.
var spentTotal, cpuTotal atomic.Int64

// Spent is the time the process's diagnoses took so far: as the budget
// counts it (from an event's start to its finding, which on a busy
// machine includes the time its thread waited for a CPU, so that a
// second's budget is overrun by at most one diagnosis's wait), and the CPU
// they used (which the budget thus bounds, plus one diagnosis a second).
// A benchmark divides them by its duration.
func Spent() (budgeted, cpu time.Duration) {
	return time.Duration(spentTotal.Load()), time.Duration(cpuTotal.Load())
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// maxSources bounds the per-source cache.
const maxSources = 10000

// New starts a Diagnoser; Close ends it.
func New(cfg Config) *Diagnoser {
	if cfg.Budget <= 0 {
		cfg.Budget = 20 * time.Millisecond
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Logf == nil {
		cfg.Logf = func(_, format string, args ...any) { glog.Warningf(format, args...) }
	}
	d := &Diagnoser{cfg: cfg, events: make(chan Event, 64), engines: map[engineKey]*trialKey{},
		last: map[netip.Addr]finding{}, stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// Submit queues ev without ever blocking: a full queue drops it.
func (d *Diagnoser) Submit(ev Event) {
	if d == nil {
		return
	}
	d.mu.Lock()
	f, seen := d.last[ev.Addr]
	d.mu.Unlock()
	if seen && time.Since(f.at) < d.cfg.Interval {
		return // diagnosed and logged in this interval already
	}
	select {
	case d.events <- ev:
	default:
		d.mu.Lock()
		d.dropped++
		d.mu.Unlock()
	}
}

// Close stops the goroutine and releases the keys.
func (d *Diagnoser) Close() {
	if d == nil {
		return
	}
	close(d.stop)
	<-d.done
	for _, k := range d.engines {
		if k.key != nil {
			k.key.Close()
		}
	}
}

func (d *Diagnoser) run() {
	defer close(d.done)
	// On a thread of its own, so that threadCPU is the diagnoses' CPU.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var spent time.Duration
	window := time.Now()
	for {
		select {
		case <-d.stop:
			return
		case ev := <-d.events:
			if now := time.Now(); now.Sub(window) >= time.Second {
				window, spent = now, 0
			}
			if spent >= d.cfg.Budget {
				// Wait for the next second rather than spend more: what
				// queues meanwhile beyond the queue's room is dropped.
				select {
				case <-time.After(time.Second - time.Since(window)):
				case <-d.stop:
					return
				}
				window, spent = time.Now(), 0
			}
			start, cpu := time.Now(), threadCPU()
			d.handle(ev)
			took := time.Since(start)
			spent += took
			spentTotal.Add(int64(took))
			cpuTotal.Add(int64(threadCPU() - cpu))
		}
	}
}

func (d *Diagnoser) handle(ev Event) {
	d.mu.Lock()
	f, seen := d.last[ev.Addr]
	d.mu.Unlock()
	if seen && time.Since(f.at) < d.cfg.Interval {
		return
	}
	text := d.Diagnose(ev)
	d.mu.Lock()
	if len(d.last) >= maxSources {
		clear(d.last)
	}
	d.last[ev.Addr] = finding{text: text, at: time.Now()}
	d.mu.Unlock()
	d.cfg.Logf(ev.Addr.String(), "diagnosis: %s %s", ev.Addr, text)
	if d.cfg.Registry != nil {
		d.cfg.Registry.Diagnosed(ev.Addr, text)
	}
}

// Diagnose says what the client of ev did, as the rest of a sentence that
// starts with its address.
func (d *Diagnoser) Diagnose(ev Event) string {
	if s := notNSCA(ev.Head); s != "" {
		return s
	}
	if len(ev.Head) < 12 {
		return fmt.Sprintf("sent %d bytes and no NSCA packet (%s)", ev.Total, ev.Why)
	}
	ms, pw := d.decrypts(ev)
	if len(ms) == 0 {
		return "sends packets that no known password decrypts with any method: it uses a password this server does not know (" + ev.Why + ")"
	}
	served := d.servedWith(pw)
	i := slices.IndexFunc(ms, func(n int) bool { return slices.Contains(served, n) })
	if i < 0 {
		// Several methods can match one password: a short one makes
		// tripledes the same cipher as des.
		return fmt.Sprintf("encrypts with method %s and a known password; this server expects %s with that password",
			methodList(ms), methodList(served))
	}
	if s := d.outsideNetworks(ev.Addr, ms[i], pw); s != "" {
		return s
	}
	return d.sizeFinding(ev)
}

// sizeFinding explains a client whose secret is right: its packets have a
// size payload_length does not list.
func (d *Diagnoser) sizeFinding(ev Event) string {
	if size := packetSize(int(ev.Total), d.cfg.PayloadLengths); size > 0 {
		payload := codec.OutputLength(size)
		if size == codec.LegacySize {
			return fmt.Sprintf("is an NSCA 2.7 client or NSClient++ with payload length 512 (720-byte packets): add 512 to payload_length (now %s)", ints(d.cfg.PayloadLengths))
		}
		return fmt.Sprintf("sends NSClient++ payload length %d: add it to payload_length (now %s)", payload, ints(d.cfg.PayloadLengths))
	}
	n := int(ev.Total)
	return fmt.Sprintf("uses a known password and method, but its %d bytes are no whole number of packets of any payload length (now %s)", n, ints(d.cfg.PayloadLengths))
}

// packetSize guesses the size of the packets of a connection that sent
// total bytes in all: total split into 1 to 16 packets of a size that no
// listed payload length gives, preferring payload lengths that are
// multiples of 512 (NSClient++'s usual ones, and the only way to tell
// four packets of 8400 bytes from one of 33600); 0 if none fits.
func packetSize(total int, listed []int) int {
	first := 0
	for k := 1; k <= 16; k++ {
		size := total / k
		if total%k != 0 || !codec.ValidSize(size) || slices.Contains(listed, codec.OutputLength(size)) {
			continue
		}
		if codec.OutputLength(size)%512 == 0 {
			return size
		}
		if first == 0 {
			first = size
		}
	}
	return first
}

// decrypts finds the known password and the methods whose decryption of
// the head starts with version 3 and the init packet's timestamp
// (send_nsca and NSClient++ both echo it): 48 bits that do not match by
// chance.
func (d *Diagnoser) decrypts(ev Event) (methods []int, password []byte) {
	for _, pw := range d.passwords() {
		for _, m := range allMethods() {
			k := d.trialKey(m, pw)
			if k == nil {
				continue
			}
			var pt [12]byte
			copy(pt[:], ev.Head)
			switch {
			case m.Number == 1:
				k.xor.Apply(pt[:], ev.IV[:], 0)
			case m.Number > 1:
				var st cipher.State
				st.Start(k.engine, ev.IV[:])
				k.key.Decrypt(&st, pt[:])
			}
			if int16(binary.BigEndian.Uint16(pt[:])) == codec.Version && binary.BigEndian.Uint32(pt[8:]) == ev.InitTime {
				methods = append(methods, m.Number)
			}
		}
		if len(methods) > 0 {
			return methods, pw
		}
	}
	return nil, nil
}

// passwords are the distinct passwords the server knows.
func (d *Diagnoser) passwords() [][]byte {
	var out [][]byte
	for _, s := range d.cfg.Secrets {
		if !slices.ContainsFunc(out, func(p []byte) bool { return bytes.Equal(p, s.Password) }) {
			out = append(out, s.Password)
		}
	}
	return out
}

// servedWith are the methods the server accepts with pw.
func (d *Diagnoser) servedWith(pw []byte) []int {
	var out []int
	for _, s := range d.cfg.Secrets {
		if bytes.Equal(s.Password, pw) && !slices.Contains(out, s.Method) {
			out = append(out, s.Method)
		}
	}
	return out
}

// outsideNetworks explains a right secret used from an address none of
// its networks holds.
func (d *Diagnoser) outsideNetworks(addr netip.Addr, method int, pw []byte) string {
	var names []string
	for _, s := range d.cfg.Secrets {
		if s.Method != method || !bytes.Equal(s.Password, pw) {
			continue
		}
		if s.Networks == nil || slices.ContainsFunc(s.Networks, func(p netip.Prefix) bool { return p.Contains(addr.Unmap()) }) {
			return ""
		}
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("uses the password and method of %s, which may not connect from this address (see its networks)", strings.Join(names, ", "))
}

// trialKey is the key of method m with pw, made once; nil when no engine
// can serve m in this build.
func (d *Diagnoser) trialKey(m conf.Method, pw []byte) *trialKey {
	id := engineKey{m.Number, string(pw)}
	if k, ok := d.engines[id]; ok {
		return k
	}
	k := &trialKey{xor: codec.NewXORKey(pw)}
	if m.Number > 1 {
		e, err := cipher.New(cipher.EngineAuto, m.Number, m.Name, pw)
		if err == nil {
			k.engine = e
			k.key, err = e.NewKey()
		}
		if err != nil {
			k = nil
		}
	}
	d.engines[id] = k
	return k
}

// allMethods are every method a client can use: stock's and this project's.
func allMethods() []conf.Method {
	out := conf.UsableMethods()
	for _, name := range conf.MethodNames() {
		if m, ok := conf.MethodByName(name); ok && m.Own && !slices.ContainsFunc(out, func(o conf.Method) bool { return o.Number == m.Number }) {
			out = append(out, m)
		}
	}
	return out
}

// notNSCA recognises clients that speak another protocol by their first
// bytes.
func notNSCA(head []byte) string {
	for _, m := range []string{"GET ", "POST ", "HEAD ", "PUT ", "OPTIONS ", "DELETE ", "CONNECT ", "PRI * HTTP"} {
		if bytes.HasPrefix(head, []byte(m)) {
			return "speaks HTTP, not NSCA (a web client or a load balancer's HTTP health check on the NSCA port?)"
		}
	}
	if bytes.HasPrefix(head, []byte("SSH-")) {
		return "speaks SSH, not NSCA"
	}
	if len(head) >= 6 && head[0] == 0x16 && head[1] == 0x03 && head[5] == 0x01 {
		if offersPSK(head) {
			return "starts a TLS handshake offering pre-shared keys: an nsca-ng client on the NSCA port? (nsca-ng's port is 5668)"
		}
		return "starts a TLS handshake, not NSCA (a TLS client on the NSCA port)"
	}
	return ""
}

// offersPSK says whether a TLS ClientHello offers a PSK cipher suite (TLS
// 1.2's TLS_PSK_WITH_*, as nsca-ng requires) as far as head holds it.
func offersPSK(head []byte) bool {
	// record header 5, handshake header 4, version 2, random 32
	i := 5 + 4 + 2 + 32
	if len(head) <= i {
		return false
	}
	i += 1 + int(head[i]) // session id
	if len(head) < i+2 {
		return false
	}
	n := int(binary.BigEndian.Uint16(head[i:]))
	i += 2
	for j := i; j+1 < i+n && j+1 < len(head); j += 2 {
		switch binary.BigEndian.Uint16(head[j:]) {
		case 0x008C, 0x008D, 0x008B, 0x00A8, 0x00A9, 0x00AE, 0x00AF, 0xC0A4, 0xC0A5, 0xCCAB:
			return true
		}
	}
	return false
}

func methodList(ns []int) string {
	var parts []string
	for _, n := range ns {
		if m, ok := conf.MethodByNumber(n); ok {
			parts = append(parts, conf.NameOf(m)+" ("+m.Name+")")
		}
	}
	return strings.Join(parts, " or ")
}

func ints(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
