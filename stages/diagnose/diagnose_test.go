package diagnose

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
)

// packetHead is the first bytes of a packet of a client with method and
// password, encrypted for iv.
func packetHead(t testing.TB, method int, alg, password string, iv []byte, ts uint32) []byte {
	t.Helper()
	p := make([]byte, codec.Size)
	codec.Encode(p, codec.Result{Timestamp: ts, Host: "h", Service: "s", Output: "o"})
	switch method {
	case 1:
		codec.XOR(p, iv, []byte(password), 0)
	default:
		e, err := cipher.New(cipher.EngineAuto, method, alg, []byte(password))
		if err != nil {
			t.Fatal(err)
		}
		k, err := e.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		// CFB encryption one byte at a time: the keystream byte is what a
		// zero byte decrypts to at the register.
		var st cipher.State
		st.Start(e, iv)
		for i := range p[:HeadSize] {
			probe := st
			z := []byte{0}
			k.Decrypt(&probe, z)
			p[i] ^= z[0]
			k.Decrypt(&st, []byte{p[i]})
		}
	}
	return p[:HeadSize]
}

func testDiagnoser(t testing.TB) *Diagnoser {
	d := New(Config{Secrets: []Secret{{Name: "password/14", Method: 14, Password: []byte("right")},
		{Name: "long/14", Method: 14, Password: []byte("a-password-of-24-bytes!!")},
		{Name: "web", Method: 1, Password: []byte("web"), Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}},
		PayloadLengths: []int{4096}, Logf: func(string, string, ...any) {}})
	t.Cleanup(d.Close)
	return d
}

func TestDiagnose(t *testing.T) {
	d := testDiagnoser(t)
	iv := make([]byte, codec.IVSize)
	for i := range iv {
		iv[i] = byte(i * 3)
	}
	ev := func(head []byte, total uint64, addr string) Event {
		e := Event{Addr: netip.MustParseAddr(addr), InitTime: 1234, Head: head, Total: total, Why: "test"}
		copy(e.IV[:], iv)
		return e
	}
	for _, c := range []struct {
		name string
		ev   Event
		want string
	}{
		{"other method", ev(packetHead(t, 3, "tripledes", "a-password-of-24-bytes!!", iv, 1234), 4304, "192.0.2.1"), "encrypts with method 3 (tripledes) and a known password; this server expects 14 (rijndael-128)"},
		// A password of 8 bytes or less makes tripledes des: both are named.
		{"des or tripledes", ev(packetHead(t, 3, "tripledes", "right", iv, 1234), 4304, "192.0.2.1"), "encrypts with method 2 (des) or 3 (tripledes)"},
		{"unknown password", ev(packetHead(t, 14, "rijndael-128", "wrong", iv, 1234), 4304, "192.0.2.1"), "no known password decrypts"},
		{"payload length", ev(packetHead(t, 14, "rijndael-128", "right", iv, 1234), 8400, "192.0.2.1"), "sends NSClient++ payload length 8192: add it to payload_length (now 4096)"},
		{"payload length, 4 packets", ev(packetHead(t, 14, "rijndael-128", "right", iv, 1234), 4*8400, "192.0.2.1"), "sends NSClient++ payload length 8192"},
		{"2.7", ev(packetHead(t, 14, "rijndael-128", "right", iv, 1234), 720, "192.0.2.1"), "is an NSCA 2.7 client"},
		{"outside networks", ev(packetHead(t, 1, "xor", "web", iv, 1234), 4304, "192.0.2.1"), "uses the password and method of web, which may not connect from this address"},
		{"http", ev([]byte("POST /v1/actions HTTP/1.1\r\n"), 40, "192.0.2.1"), "speaks HTTP"},
		{"ssh", ev([]byte("SSH-2.0-OpenSSH_9.2\r\n"), 21, "192.0.2.1"), "speaks SSH"},
		{"tls", ev([]byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0, 0, 0x3c, 3, 3}, 69, "192.0.2.1"), "starts a TLS handshake, not NSCA"},
		{"nothing", ev([]byte("ab"), 2, "192.0.2.1"), "sent 2 bytes and no NSCA packet"},
	} {
		if got := d.Diagnose(c.ev); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestOncePerInterval: a source is diagnosed and logged once per interval
// however often it comes.
func TestOncePerInterval(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	reg := NewRegistry()
	d := New(Config{PayloadLengths: []int{4096}, Registry: reg, Logf: func(_, f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	defer d.Close()
	for range 50 {
		d.Submit(Event{Addr: netip.MustParseAddr("192.0.2.9"), Head: []byte("GET / HTTP/1.0\r\n"), Total: 16})
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 {
		t.Errorf("%d lines for one source, want 1: %q", len(lines), lines)
	}
	if s := reg.Sources(); len(s) != 1 || !strings.Contains(s[0].LastError, "speaks HTTP") {
		t.Errorf("registry: %+v", s)
	}
}

// TestRegistryBounded: the table never holds more than Max sources.
func TestRegistryBounded(t *testing.T) {
	r := NewRegistry()
	r.Max = 100
	for i := range 1000 {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(i))
		r.Failed(netip.AddrFrom4(a), "bad")
	}
	if n := len(r.Sources()); n > 100 || n < 50 {
		t.Errorf("%d sources kept, want at most 100 and most of them", n)
	}
}

// BenchmarkDiagnoseGarbage is the dearest diagnosis: bytes that no method
// with any of 4 known passwords decrypts, so every method is tried with
// every password.
func BenchmarkDiagnoseGarbage(b *testing.B) {
	var secrets []Secret
	for i := range 4 {
		secrets = append(secrets, Secret{Name: fmt.Sprint(i), Method: 14, Password: []byte(fmt.Sprint("password-", i))})
	}
	d := New(Config{Secrets: secrets, PayloadLengths: []int{4096}, Logf: func(string, string, ...any) {}})
	defer d.Close()
	ev := Event{Addr: netip.MustParseAddr("192.0.2.1"), Head: make([]byte, HeadSize), Total: 4304}
	for i := range ev.Head {
		ev.Head[i] = byte(i*7 + 1)
	}
	d.Diagnose(ev) // keys made once
	b.ResetTimer()
	for range b.N {
		d.Diagnose(ev)
	}
}

// TestBudget: once a second's budget is spent, nothing more is diagnosed
// until the next second.
func TestBudget(t *testing.T) {
	var mu sync.Mutex
	lines := 0
	d := New(Config{PayloadLengths: []int{4096}, Budget: time.Nanosecond, Logf: func(string, string, ...any) {
		mu.Lock()
		lines++
		mu.Unlock()
	}})
	defer d.Close()
	for i := range 10 {
		d.Submit(Event{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), Head: []byte("GET / HTTP/1.0\r\n"), Total: 16})
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	first := lines
	mu.Unlock()
	if first != 1 {
		t.Errorf("%d diagnoses in the first 300 ms with a budget of 1 ns a second, want 1", first)
	}
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if lines != 2 {
		t.Errorf("%d diagnoses after 1.3 s, want 2 (one a second)", lines)
	}
}

// Merge keeps the limit most recently seen sources of all tables, a
// source that several tables hold counted once with their counts summed,
// and drops those not seen for an hour.
func TestMergeBoundsToMostRecent(t *testing.T) {
	base := time.Now()
	var a, b []Source
	for i := range 10 {
		addr := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		a = append(a, Source{Addr: addr, Connections: 1, LastSeen: base.Add(time.Duration(i) * time.Second)})
		b = append(b, Source{Addr: addr, Connections: 2, LastSeen: base.Add(time.Duration(i) * time.Second)})
	}
	old := Source{Addr: netip.MustParseAddr("10.1.0.1"), Connections: 1, LastSeen: base.Add(-2 * time.Hour)}
	got := Merge(4, a, b, []Source{old})
	if n := len(Merge(0, []Source{old})); n != 0 {
		t.Errorf("a source last seen two hours ago is kept (%d sources)", n)
	}
	if len(got) != 4 {
		t.Fatalf("%d sources, want 4", len(got))
	}
	for i, s := range got {
		if want := netip.AddrFrom4([4]byte{10, 0, 0, byte(9 - i)}); s.Addr != want || s.Connections != 3 {
			t.Errorf("source %d: %s with %d connections, want %s with 3", i, s.Addr, s.Connections, want)
		}
	}
}
