package gearman

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nsca_fast/stages/emit/internal/emittest"

	"nsca_fast/stages/emit/sink"
)

func TestGearmanResultService(t *testing.T) {
	got := string(appendResult(nil, item(1762153445, "web01", "HTTP", 2, "CRITICAL - Socket timeout")))
	want := "type=passive\nhost_name=web01\nservice_description=HTTP\nstart_time=1762153445.000000\nfinish_time=1762153445.000000\n" +
		"return_code=2\nsource=nsca_fast\noutput=CRITICAL - Socket timeout\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// jobMicros matches the microseconds of a job's times, which Write moves
// on for a service that had a result in the same second (Stamps).
var jobMicros = regexp.MustCompile(`(?m)^((?:start|finish)_time=\d+)\.\d{6}$`)

// sameJob compares two job texts but for their microseconds.
func sameJob(a, b []byte) bool {
	return bytes.Equal(jobMicros.ReplaceAll(a, []byte("$1")), jobMicros.ReplaceAll(b, []byte("$1")))
}

// TestGearmanStampsIncrease: results of one service get strictly later
// times within a process, so that Nagios keeps the newest of a burst; a
// later second starts from the receipt time again.
func TestGearmanStampsIncrease(t *testing.T) {
	var stamps Stamps
	svc := func(s string, at int64) int64 { return stamps.next(item(at, "stamp-host", s, 0, "")) }
	if a, b, c := svc("a", 100), svc("a", 100), svc("a", 100); a != 100e6 || b != a+1 || c != b+1 {
		t.Errorf("one second: %d %d %d, want 100000000 and one microsecond more each", a, b, c)
	}
	if got := svc("b", 100); got != 100e6 {
		t.Errorf("another service: %d, want 100000000", got)
	}
	if got := svc("a", 101); got != 101e6 {
		t.Errorf("the next second: %d, want 101000000", got)
	}
	if got := svc("a", 99); got != 101e6+1 {
		t.Errorf("an older receipt time: %d, want 101000001 (never backwards)", got)
	}
	if got := string(appendMicros(nil, 1762153445000042)); got != "1762153445.000042" {
		t.Errorf("appendMicros: %q", got)
	}
}

func TestGearmanResultHost(t *testing.T) {
	got := string(appendResult(nil, item(1762153445, "gw", "", 0, "PING OK - rta 0.1ms")))
	want := "type=passive\nhost_name=gw\nstart_time=1762153445.000000\nfinish_time=1762153445.000000\n" +
		"return_code=0\nsource=nsca_fast\noutput=PING OK - rta 0.1ms\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestGearmanResultAppends(t *testing.T) {
	b := appendResult([]byte("prefix|"), item(1, "a", "b", -1, "x"))
	want := "prefix|type=passive\nhost_name=a\nservice_description=b\nstart_time=1.000000\nfinish_time=1.000000\nreturn_code=-1\nsource=nsca_fast\noutput=x\n"
	if string(b) != want {
		t.Errorf("got  %q\nwant %q", b, want)
	}
}

// The output's newlines become `\n` and backslashes `\\`, as mod_gearman's
// gm_escape_newlines writes them; `|` and `=` need nothing, the module
// splits a line at its first `=` only.
func TestGearmanResultOutputEscaping(t *testing.T) {
	out := "DISK OK - free=10%|/=90%;80;90;0;100\nline 2 C:\\temp\nlast|perf=1"
	got := string(appendResult(nil, item(5, "h", "disk", 0, out)))
	want := "type=passive\nhost_name=h\nservice_description=disk\nstart_time=5.000000\nfinish_time=5.000000\nreturn_code=0\nsource=nsca_fast\n" +
		`output=DISK OK - free=10%|/=90%;80;90;0;100\nline 2 C:\\temp\nlast|perf=1` + "\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if n := strings.Count(got, "\n"); n != 8 {
		t.Errorf("%d lines, want 8: the output must stay on one line", n)
	}
}

// The module stops at the first empty value, after taking `output`: an
// empty service means a host check, an empty host no host_name line, and
// an empty output stays `output=` on the last line.
func TestGearmanResultEmptyFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		it   sink.Item
		want string
	}{
		{"empty output", item(7, "h", "s", 3, ""),
			"type=passive\nhost_name=h\nservice_description=s\nstart_time=7.000000\nfinish_time=7.000000\nreturn_code=3\nsource=nsca_fast\noutput=\n"},
		{"empty host", item(7, "", "s", 1, "x"),
			"type=passive\nservice_description=s\nstart_time=7.000000\nfinish_time=7.000000\nreturn_code=1\nsource=nsca_fast\noutput=x\n"},
		{"all empty", item(0, "", "", 0, ""),
			"type=passive\nstart_time=0.000000\nfinish_time=0.000000\nreturn_code=0\nsource=nsca_fast\noutput=\n"},
		{"newline in names", item(7, "h\noutput=evil", "s\\x\n", 0, "ok"),
			"type=passive\nhost_name=h\\noutput=evil\nservice_description=s\\x\\n\nstart_time=7.000000\nfinish_time=7.000000\nreturn_code=0\nsource=nsca_fast\noutput=ok\n"},
	} {
		got := string(appendResult(nil, tc.it))
		if got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		for i, l := range lines {
			k, v, _ := strings.Cut(l, "=")
			if v == "" && i != len(lines)-1 {
				t.Errorf("%s: line %d %q has an empty value before the end", tc.name, i+1, l)
			}
			if i == len(lines)-1 && k != "output" {
				t.Errorf("%s: last line %q, want output", tc.name, l)
			}
		}
	}
}

// Test vectors of mod_gearman's own test suite, t/01-utils.c in
// github.com/sni/mod_gearman: "aes en/decryption" (key "test1234",
// mod_gm_encrypt with GM_ENCODE_AND_ENCRYPT) and "base 64 en/decoding"
// (GM_ENCODE_ONLY, encryption off).
var (
	modGearmanKey        = []byte("test1234")
	modGearmanEncryption = []struct{ plain, sealed string }{
		{"test message", "a7HqhQEE8TQBde9uknpPYQ=="},
		{"test1 message\ntest2 message\ntest3 message1234567\n", "lixUQN83MnLhMB6ppyNA5bUPq39eZE+8GnSWLu4JdKJN2uIjOtjjtVn8mZrXj0dLl7iWqId8FZE2j6Ej+jroEQ=="},
		{"123456789abcde", "U+0gPoTCEibvwB+HaO3seA=="},
		{"123456789abcdef", "uLgRxE2qLExwLvEyB7yAEw=="},
		{"123456789abcdef1", "CueC0iJAZL2J+zhEPgVFVYDKd5Fmk6oJnfJnxuj7f0U="},
		{"123456789abcdef12", "CueC0iJAZL2J+zhEPgVFVeiqJ0EDJEmrqx95Bewle4s="},
		{"123456789abcdef123", "CueC0iJAZL2J+zhEPgVFVUPX+fNRaJ7/VNIrGRAapGQ="},
	}
	modGearmanBase64 = []struct{ plain, sealed string }{
		{"test", "dGVzdA=="},
		{"test\n", "dGVzdAo="},
		{"test message", "dGVzdCBtZXNzYWdl"},
		{"test1 message\ntest2 message\ntest3 message1234567\n", "dGVzdDEgbWVzc2FnZQp0ZXN0MiBtZXNzYWdlCnRlc3QzIG1lc3NhZ2UxMjM0NTY3Cg=="},
	}
)

func TestGearmanSealModGearmanVectors(t *testing.T) {
	for _, v := range modGearmanEncryption {
		if got := string(sealJob(modGearmanKey, []byte(v.plain))); got != v.sealed {
			t.Errorf("encrypt %q:\ngot  %s\nwant %s", v.plain, got, v.sealed)
		}
		got, err := Open(modGearmanKey, []byte(v.sealed))
		if err != nil || string(got) != v.plain {
			t.Errorf("decrypt %s: got %q, %v; want %q", v.sealed, got, err, v.plain)
		}
	}
	for _, v := range modGearmanBase64 {
		if got := string(sealJob(nil, []byte(v.plain))); got != v.sealed {
			t.Errorf("base64 %q:\ngot  %s\nwant %s", v.plain, got, v.sealed)
		}
		got, err := Open(nil, []byte(v.sealed))
		if err != nil || string(got) != v.plain {
			t.Errorf("decode %s: got %q, %v; want %q", v.sealed, got, err, v.plain)
		}
	}
}

// Also from t/01-utils.c: base64 with line breaks decodes ("decode base 64
// containing newlines"), a plain base64 result of mod_gearman's worker
// ("base64only"), and "!!!!" is refused.
func TestGearmanOpenModGearmanVectors(t *testing.T) {
	wrapped := "dGVzdCB0ZXN0IHRlc3QgdGVzdCB0ZXN0IHRlc3QgdGVzdCB0ZXN0dGVzdCB0ZXN0IHRlc3QgdGVz\n" +
		"dHRlc3QgdGVzdCB0ZXN0IHRlc3R0ZXN0IHRlc3QgdGVzdCB0ZXN0IHRlc3QgdGVzdCB0ZXN0IHRl\n" +
		"c3R0ZXN0IHRlc3QgdGVzdCB0ZXN0dGVzdCB0ZXN0IHRlc3QgdGVzdAo="
	want := "test test test test test test test testtest test test testtest test test testtest test test test test test test testtest test test testtest test test test\n"
	if got, err := Open(nil, []byte(wrapped)); err != nil || string(got) != want {
		t.Errorf("wrapped base64: got %q, %v", got, err)
	}
	worker := "dHlwZT1hY3RpdmUKaG9zdF9uYW1lPWhvc3RuYW1lMTIzCmNvcmVfc3RhcnRfdGltZT0xNjc1MzcyODM0LjAwMDAwOApzdGFydF90aW1lPTE2NzUzNzI4MzQuMDAwMDAwCmZpbmlzaF90aW1lPTE2NzUzNzI4MzQuMDAwMDAwCnJldHVybl9jb2RlPTAKZXhpdGVkX29rPTEKc291cmNlPU1vZC1HZWFybWFuIFdvcmtlciBAIGhvc3RuYW1lMTIzCm91dHB1dD1PSyAtIGhvc3RuYW1lMTIzOiBydGEgMjguODk1bXMsIGxvc3QgMCV8cnRhPTI4Ljg5NW1zOzUwMDAuMDAwOzUwMDAuMDAwOzA7IHBsPTAlOzEwMDsxMDA7OyBydG1heD0yOS4wNTdtczs7OzsgcnRtaW49MjguNjkxbXM7Ozs7CgoK"
	got, err := Open(nil, []byte(worker))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"type=active\n", "\nsource=Mod-Gearman Worker @ hostname123\n", "\nstart_time=1675372834.000000\n", "\noutput=OK - hostname123: rta 28.895ms, lost 0%|rta=28.895ms;"} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("worker result %q lacks %q", got, s)
		}
	}
	if _, err := Open(nil, []byte("!!!!")); !errors.Is(err, errSealed) {
		t.Errorf("!!!!: got %v, want errSealed", err)
	}
}

// mod_gearman encrypts the C string with its NUL and pads by the test
// `16 % len != 0` (common/gm_crypt.c): a string whose NUL ends a block
// gets a whole block of NULs more, unless it is exactly one block.
func TestGearmanPaddedLen(t *testing.T) {
	for n, want := range map[int]int{0: 16, 12: 16, 14: 16, 15: 16, 16: 32, 17: 32, 30: 32, 31: 48, 32: 48, 47: 64, 50: 64} {
		if got := gearmanPaddedLen(n); got != want {
			t.Errorf("gearmanPaddedLen(%d) = %d, want %d", n, got, want)
		}
	}
	sealed := sealJob(modGearmanKey, bytes.Repeat([]byte("a"), 31))
	if len(sealed) != 64 { // base64 of 48 bytes
		t.Errorf("31-byte text sealed into %d base64 bytes, want 64", len(sealed))
	}
	if got, err := Open(modGearmanKey, sealed); err != nil || string(got) != strings.Repeat("a", 31) {
		t.Errorf("31-byte text: opened %q, %v", got, err)
	}
}

// mod_gearman uses the key up to its first NUL and at most 32 bytes.
func TestGearmanKeyTruncation(t *testing.T) {
	long := []byte(strings.Repeat("k", 32))
	plain := []byte("type=passive\nhost_name=h\noutput=x\n")
	if !bytes.Equal(sealJob(append(long, "extra"...), plain), sealJob(long, plain)) {
		t.Error("bytes after the 32nd change the encryption")
	}
	if !bytes.Equal(sealJob([]byte("test1234\x00junk"), plain), sealJob(modGearmanKey, plain)) {
		t.Error("bytes after a NUL change the encryption")
	}
	if bytes.Equal(sealJob([]byte("test123"), plain), sealJob(modGearmanKey, plain)) {
		t.Error("different keys encrypt alike")
	}
}

// The key files of mod_gearman's t/data and what t/01-utils.c reads from
// them ("reading keys"): test1.key is 30 '1's and a newline, test2.key
// "abcdef " then a second line, test3.key 40 '1's and a newline.
func TestGearmanReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"test1.key", strings.Repeat("1", 30) + "\n", strings.Repeat("1", 30)},
		{"test2.key", "abcdef \nread only the first line\n", "abcdef"},
		{"test3.key", strings.Repeat("1", 40) + "\n", strings.Repeat("1", 32)},
		{"nonl.key", "secret", "secret"},
		{"crlf.key", "secret\r\n", "secret"},
		{"lead.key", "  secret\t\n", "  secret"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readKeyFile(p)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for _, content := range []string{"", "\n", " \t\r\n", "\x00secret\n"} {
		p := filepath.Join(dir, "bad.key")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := readKeyFile(p); !errors.Is(err, errKeyFile) {
			t.Errorf("key file %q: got %q, %v; want errKeyFile", content, got, err)
		}
	}
	if _, err := readKeyFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing key file: got %v, want ErrNotExist", err)
	}
}

func TestGearmanConfig(t *testing.T) {
	g, err := New(Options{Servers: "127.0.0.1:4731,localhost, 10.0.0.1:1 ,[::1]"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1:4731", "localhost:4730", "10.0.0.1:1", "[::1]:4730"}; fmt.Sprint(g.servers) != fmt.Sprint(want) {
		t.Errorf("servers %q, want %q", g.servers, want)
	}
	if g.queue != "check_results" || g.timeout != 10*time.Second || g.block != nil || g.Name() != "gearman" {
		t.Errorf("defaults: queue %q, timeout %v, encrypting %v, name %q", g.queue, g.timeout, g.block != nil, g.Name())
	}
	for _, cfg := range []Options{
		{},
		{Servers: " "},
		{Servers: "h:0"},
		{Servers: "h:http"},
		{Servers: "h:70000"},
		{Servers: "h:1", Queue: "a\x00b"},
		{Servers: "h:1", Queue: strings.Repeat("q", 512)},
		{Servers: "h:1", Timeout: -time.Second},
		{Servers: "h:1", Encryption: true},
		{Servers: "h:1", Encryption: true, Key: "\x00key"},
	} {
		if err := cfg.Validate(); !errors.Is(err, errConfig) {
			t.Errorf("%+v: got %v, want errConfig", cfg, err)
		} else if !strings.HasPrefix(err.Error(), "sink: gearman: ") {
			t.Errorf("error %q lacks the prefix", err)
		}
	}
	if _, err := New(Options{Servers: "h:1", Key: "ignored without encryption"}); err != nil {
		t.Error(err)
	}
}

func TestGearmanSubmitJobBGFraming(t *testing.T) {
	got := appendSubmitJobBG([]byte("x"), "check_results", []byte("u1"), []byte("Ym9keQ=="))
	want := "x\x00REQ\x00\x00\x00\x12\x00\x00\x00\x19check_results\x00u1\x00Ym9keQ=="
	if string(got) != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// gearmanPacket is one packet of the binary protocol.
type gearmanPacket struct {
	magic string
	typ   uint32
	args  [][]byte
}

// readGearmanPacket reads one packet, splitting its data into at most
// nargs NUL-separated arguments.
func readGearmanPacket(r io.Reader, nargs int) (gearmanPacket, error) {
	var h [12]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return gearmanPacket{}, err
	}
	data := make([]byte, binary.BigEndian.Uint32(h[8:]))
	if _, err := io.ReadFull(r, data); err != nil {
		return gearmanPacket{}, err
	}
	return gearmanPacket{string(h[:4]), binary.BigEndian.Uint32(h[4:]), bytes.SplitN(data, []byte{0}, nargs)}, nil
}

func gearmanFrame(magic string, typ uint32, args ...string) []byte {
	b := []byte(magic)
	b = binary.BigEndian.AppendUint32(b, typ)
	data := strings.Join(args, "\x00")
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// fakeGearmand accepts connections on loopback and answers each
// SUBMIT_JOB_BG with reply(i) for the i-th job overall; a nil reply
// answers nothing. It records the requests.
type fakeGearmand struct {
	ln   net.Listener
	reqs chan gearmanPacket

	mu    sync.Mutex
	conns []net.Conn
}

func startFakeGearmand(t *testing.T, reply func(i int) []byte) *fakeGearmand {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGearmand{ln: ln, reqs: make(chan gearmanPacket, 10000)}
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	go func() {
		i := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			r := bufio.NewReader(c)
			for {
				p, err := readGearmanPacket(r, 3)
				if err != nil {
					c.Close()
					break
				}
				f.reqs <- p
				if out := reply(i); out != nil {
					c.Write(out)
				}
				i++
			}
		}
	}()
	return f
}

func (f *fakeGearmand) addr() string { return f.ln.Addr().String() }

// Write sends one SUBMIT_JOB_BG per item on the configured queue, each with
// its own unique ID, the body sealed as sealJob does.
func TestGearmanWriteRequests(t *testing.T) {
	f := startFakeGearmand(t, func(i int) []byte { return gearmanFrame("\x00RES", 8, fmt.Sprintf("H:fake:%d", i)) })
	key := []byte("secret")
	g, err := New(Options{Servers: f.addr(), Queue: "results_x", Encryption: true, Key: string(key), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	its := items(600, 100) // more than one pipelined chunk
	if n, err := g.Write(its); n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(its))
	}
	seen := map[string]bool{}
	for i, it := range its {
		p := <-f.reqs
		if p.magic != "\x00REQ" || p.typ != 18 || len(p.args) != 3 {
			t.Fatalf("request %d: magic %q type %d with %d args", i, p.magic, p.typ, len(p.args))
		}
		if string(p.args[0]) != "results_x" {
			t.Errorf("request %d: function %q", i, p.args[0])
		}
		u := string(p.args[1])
		if u == "" || len(u) > 64 || seen[u] {
			t.Errorf("request %d: unique ID %q empty, too long or repeated", i, u)
		}
		seen[u] = true
		if plain, err := Open(key, p.args[2]); err != nil || !sameJob(plain, appendResult(nil, it)) {
			t.Errorf("request %d: body opens to %q (%v), want %q", i, plain, err, appendResult(nil, it))
		}
	}
}

// An ERROR reply stops the count at that job; the connection stays usable.
func TestGearmanWriteRefused(t *testing.T) {
	f := startFakeGearmand(t, func(i int) []byte {
		if i == 2 {
			return gearmanFrame("\x00RES", 19, "QUEUE_ERROR", "queue full")
		}
		return gearmanFrame("\x00RES", 8, "H:fake:"+strconv.Itoa(i))
	})
	g, err := New(Options{Servers: f.addr(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	n, err := g.Write(items(5, 10))
	if n != 2 || !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "QUEUE_ERROR: queue full") {
		t.Fatalf("Write = %d, %v; want 2, errRefused with the server's message", n, err)
	}
	if n, err := g.Write(items(3, 10)); n != 3 || err != nil {
		t.Fatalf("Write after ERROR = %d, %v; want 3, nil", n, err)
	}
}

func TestGearmanWriteBadReply(t *testing.T) {
	f := startFakeGearmand(t, func(i int) []byte { return []byte("HTTP/1.1 400 Bad Request\r\n\r\n") })
	g, err := New(Options{Servers: f.addr(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n, err := g.Write(items(2, 10)); n != 0 || !errors.Is(err, errProtocol) {
		t.Fatalf("Write = %d, %v; want 0, errProtocol", n, err)
	}
}

// A server that takes the jobs but never answers costs the timeout twice
// (the first try and the one reconnection), not forever.
func TestGearmanWriteSilentServerTimesOut(t *testing.T) {
	f := startFakeGearmand(t, func(int) []byte { return nil })
	g, err := New(Options{Servers: f.addr(), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	n, err := g.Write(items(3, 10))
	if n != 0 || !errors.Is(err, errIO) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write = %d, %v; want 0 and a timeout", n, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Write took %v", d)
	}
	// The next batch does not wait for the silent server again.
	start = time.Now()
	if n, err := g.Write(items(3, 10)); n != 0 || !errors.Is(err, errBackoff) {
		t.Errorf("Write right after = %d, %v; want 0 and errBackoff", n, err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Write right after took %v; want it refused at once", d)
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestGearmanWriteDeadServer(t *testing.T) {
	dead := deadAddr(t)
	g, err := New(Options{Servers: dead, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	n, err := g.Write(items(3, 10))
	if n != 0 || !errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Write = %d, %v; want 0, errUnreachable naming %s", n, err, dead)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Write took %v with nothing listening", d)
	}
	// Straight after, the sink does not dial again but says why.
	if n, err := g.Write(items(1, 10)); n != 0 || !errors.Is(err, errBackoff) || !strings.Contains(err.Error(), dead) {
		t.Errorf("second Write = %d, %v; want 0, errBackoff naming %s", n, err, dead)
	}
	if n, err := g.Write(nil); n != 0 || err != nil {
		t.Errorf("Write(nil) = %d, %v", n, err)
	}
}

// ---- against the real gearmand ----

const gearmandPath = "/usr/sbin/gearmand"

// needGearmand skips the test when gearmand is not installed, unless CI is
// set: there the test fails, because CI is meant to run it.
func needGearmand(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(gearmandPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; install gearman-job-server", err)
		}
		t.Skipf("no gearmand (%v); install gearman-job-server to run this test", err)
	}
}

// gearmand is a job server started by a test, stopped by its PID.
type gearmand struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startGearmand starts gearmand on 127.0.0.1 (on port, or a free one when
// 0) and waits until it accepts. Cleanup stops it.
func startGearmand(t testing.TB, port int) *gearmand {
	t.Helper()
	needGearmand(t)
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			_, ps, _ := net.SplitHostPort(deadAddr(t))
			p, _ = strconv.Atoi(ps)
		}
		log := filepath.Join(dir, fmt.Sprintf("gearmand-%d.log", attempt))
		cmd := exec.Command(gearmandPath, "--listen=127.0.0.1", "--port="+strconv.Itoa(p), "--threads=1",
			"--log-file="+log, "--pid-file="+filepath.Join(dir, "gearmand.pid"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		g := &gearmand{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), cmd: cmd, exited: make(chan struct{})}
		go func() { cmd.Wait(); close(g.exited) }()
		t.Cleanup(g.stop)
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", g.addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
				return g
			}
			select {
			case <-g.exited:
			default:
				if time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
			}
			break
		}
		g.stop()
		b, _ := os.ReadFile(log)
		if attempt < 3 && port == 0 {
			continue
		}
		t.Fatalf("gearmand on %s did not accept connections:\n%s", g.addr, b)
	}
}

// stop ends gearmand by its PID: SIGTERM, then SIGKILL after 5 s.
func (g *gearmand) stop() {
	select {
	case <-g.exited:
		return
	default:
	}
	syscall.Kill(g.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.exited
	}
}

// grabJobs takes n jobs off queue as a worker (CAN_DO, GRAB_JOB, and
// WORK_COMPLETE so that gearmand forgets them) and returns their bodies in
// the order gearmand hands them out. It fails the test after timeout.
func grabJobs(t *testing.T, addr, queue string, n int, timeout time.Duration) [][]byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(c)
	if _, err := c.Write(gearmanFrame("\x00REQ", 1, queue)); err != nil { // CAN_DO
		t.Fatal(err)
	}
	var bodies [][]byte
	for len(bodies) < n {
		if _, err := c.Write(gearmanFrame("\x00REQ", 9)); err != nil { // GRAB_JOB
			t.Fatal(err)
		}
		p, err := readGearmanPacket(r, 3)
		if err != nil {
			t.Fatalf("worker got %d jobs of %d: %v", len(bodies), n, err)
		}
		switch p.typ {
		case 10: // NO_JOB
			time.Sleep(20 * time.Millisecond)
		case 11: // JOB_ASSIGN: handle, function, data
			if string(p.args[1]) != queue {
				t.Errorf("job for function %q, want %q", p.args[1], queue)
			}
			bodies = append(bodies, p.args[2])
			if _, err := c.Write(gearmanFrame("\x00REQ", 13, string(p.args[0]), "")); err != nil { // WORK_COMPLETE
				t.Fatal(err)
			}
		default:
			t.Fatalf("worker got packet type %d", p.typ)
		}
	}
	return bodies
}

// queueEmpty reports whether gearmand holds no job on queue, from its
// text protocol's status command.
func queueEmpty(t *testing.T, addr, queue string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("status\n"))
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if sc.Text() == "." {
			return true
		}
		if f := strings.Split(sc.Text(), "\t"); f[0] == queue && len(f) > 1 && f[1] != "0" {
			return false
		}
	}
	t.Fatalf("status: %v", sc.Err())
	return false
}

func testGearmandRoundTrip(t *testing.T, key []byte) {
	gd := startGearmand(t, 0)
	g, err := New(Options{Servers: gd.addr, Encryption: key != nil, Key: string(key), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	its := items(1000, 200)
	its[1] = item(1762153445, "web01", "HTTP", 1, "WARNING - slow|time=1.5s;1;2;0\nsecond line\\")
	its[2] = item(1762153446, "gw", "", 0, "")
	for done := 0; done < len(its); done += 250 { // several Writes on one connection
		if n, err := g.Write(its[done : done+250]); n != 250 || err != nil {
			t.Fatalf("Write = %d, %v; want 250, nil", n, err)
		}
	}
	bodies := grabJobs(t, gd.addr, "check_results", len(its), 20*time.Second)
	for i, b := range bodies {
		plain, err := Open(key, b)
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if want := appendResult(nil, its[i]); !sameJob(plain, want) {
			t.Errorf("job %d:\ngot  %q\nwant %q", i, plain, want)
		}
	}
	if !queueEmpty(t, gd.addr, "check_results") {
		t.Error("gearmand still holds jobs: more were created than written")
	}
}

func TestGearmanGearmandEncrypted(t *testing.T) {
	testGearmandRoundTrip(t, []byte("should be at least 8 bytes"))
}

func TestGearmanGearmandBase64Only(t *testing.T) { testGearmandRoundTrip(t, nil) }

func TestGearmanGearmandFailover(t *testing.T) {
	gd := startGearmand(t, 0)
	g, err := New(Options{Servers: deadAddr(t) + "," + gd.addr, Queue: "other_queue", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	its := items(10, 20)
	start := time.Now()
	if n, err := g.Write(its); n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(its))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("failing over took %v", d)
	}
	for i, b := range grabJobs(t, gd.addr, "other_queue", len(its), 10*time.Second) {
		if plain, _ := Open(nil, b); !sameJob(plain, appendResult(nil, its[i])) {
			t.Errorf("job %d: %q", i, plain)
		}
	}
}

// A job server restarted between two Writes leaves a dead connection: the
// next Write notices, reconnects once and delivers everything.
func TestGearmanGearmandRestart(t *testing.T) {
	gd := startGearmand(t, 0)
	g, err := New(Options{Servers: gd.addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	its := items(20, 20)
	if n, err := g.Write(its[:10]); n != 10 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	grabJobs(t, gd.addr, "check_results", 10, 10*time.Second)
	gd.stop()
	_, ps, _ := net.SplitHostPort(gd.addr)
	port, _ := strconv.Atoi(ps)
	gd = startGearmand(t, port)
	if n, err := g.Write(its[10:]); n != 10 || err != nil {
		t.Fatalf("Write after the restart = %d, %v; want 10, nil", n, err)
	}
	for i, b := range grabJobs(t, gd.addr, "check_results", 10, 10*time.Second) {
		if plain, _ := Open(nil, b); !sameJob(plain, appendResult(nil, its[10+i])) {
			t.Errorf("job %d: %q", i, plain)
		}
	}
}

// BenchmarkGearmanWrite measures submitting encrypted results to a real
// gearmand in Writes of 256; the jobs stay queued there.
func BenchmarkGearmanWrite(b *testing.B) {
	gd := startGearmand(b, 0)
	g, err := New(Options{Servers: gd.addr, Encryption: true, Key: "benchmark key", Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	its := items(256, 200)
	b.ResetTimer()
	for done := 0; done < b.N; done += len(its) {
		batch := its[:min(len(its), b.N-done)]
		if n, err := g.Write(batch); n != len(batch) || err != nil {
			b.Fatalf("Write = %d, %v", n, err)
		}
	}
}

var (
	item  = emittest.Item
	items = emittest.Items
)
