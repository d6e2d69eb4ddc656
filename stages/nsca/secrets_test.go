package nsca

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"nsca_fast/stages/cipher"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/intake"
)

// testSecret is one method and password a test client encrypts with.
type testSecret struct {
	method   int
	alg      string
	password string
}

// candidatesFor chooses an engine for each secret, named password/method
// as the server names its own secrets.
func candidatesFor(t testing.TB, secrets []testSecret) []candidate {
	t.Helper()
	var out []candidate
	for _, s := range secrets {
		ch, err := cipher.Choose(s.method, s.alg, []byte(s.password), cipher.EngineAuto)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, candidate{Name: fmt.Sprintf("%s/%d", s.password, s.method), Method: s.method, Engine: ch.Engine, Password: []byte(s.password)})
	}
	return out
}

// clientStream is what a client with secret s sends after the init packet
// with iv: packets of size bytes, encrypted as send_nsca does.
func clientStream(t testing.TB, s testSecret, iv []byte, packets [][]byte) []byte {
	t.Helper()
	var plain []byte
	for _, p := range packets {
		plain = append(plain, p...)
	}
	switch s.method {
	case 0:
		return plain
	case 1:
		out := bytes.Clone(plain)
		size := len(packets[0])
		for i := 0; i < len(out); i += size {
			codec.XOR(out[i:i+size], iv, []byte(s.password), 0)
		}
		return out
	}
	e, err := cipher.New(cipher.EngineAuto, s.method, s.alg, []byte(s.password))
	if err != nil {
		t.Fatal(err)
	}
	return encryptStream(t, e, iv, plain)
}

func randomPackets(rng *rand.Rand, n, size int, tag string) [][]byte {
	var out [][]byte
	for i := range n {
		pkt := make([]byte, size)
		for j := range pkt {
			pkt[j] = byte(rng.Uint32())
		}
		codec.Encode(pkt, codec.Result{Timestamp: 1, Host: "h", Service: fmt.Sprintf("%s-%d", tag, i), Output: "out"})
		out = append(out, pkt)
	}
	return out
}

// TestDecryptCandidates: with several secrets (two passwords, methods 1
// and 14), each connection's first packet picks the secret its client
// uses, in any split into chunks and at every accepted size, and all its
// packets come out as sent; a client whose secret is not among them gets
// its first packet passed on marked unmatched, to be refused.
func TestDecryptCandidates(t *testing.T) {
	secrets := []testSecret{{1, "xor", "old-password"}, {1, "xor", "new-password"},
		{14, "rijndael-128", "old-password"}, {14, "rijndael-128", "new-password"}}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, perConn := range []bool{false, true} {
		cfg := cipherConfig{Candidates: candidatesFor(t, secrets), PerConnection: perConn, PayloadLengths: []int{512, 4096}}
		d, _ := newTestDecrypter(t, cfg)
		clients := append(secrets, testSecret{14, "rijndael-128", "unknown"}, testSecret{3, "tripledes", "old-password"})
		for ci, s := range clients {
			for _, size := range []int{codec.LegacySize, codec.Size} {
				t.Run(fmt.Sprintf("perconn=%v/%s/%d/%d", perConn, s.password, s.method, size), func(t *testing.T) {
					c := &clientConn{connIdentity: connIdentity{ID: uint64(ci + 1)}, read: connRead{reader: &reader{}}}
					for i := range c.IV {
						c.IV[i] = byte(rng.Uint32())
					}
					packets := randomPackets(rng, 3, size, "p")
					ct := clientStream(t, s, c.IV[:], packets)
					out := make(chan intake.Submission, 16)
					got := feedInPieces(d, c, ct, 3000, rng, out)
					if ci >= len(secrets) {
						if !c.decrypt.unmatched {
							t.Errorf("a client with a secret the server does not know was not marked unmatched")
						}
						if len(got) > 0 && got[0].Malformed == nil {
							t.Errorf("a client with a secret the server does not know gave a valid packet")
						}
						return
					}
					want := fmt.Sprintf("%s/%d", s.password, s.method)
					if c.decrypt.sec == nil || c.decrypt.sec.Name != want || c.decrypt.unmatched {
						t.Fatalf("connection uses %v (unmatched %v), want %s", c.decrypt.sec, c.decrypt.unmatched, want)
					}
					if len(got) != len(packets) {
						t.Fatalf("%d packets, want %d", len(got), len(packets))
					}
					for i, p := range got {
						if p.Malformed != nil || p.Result != codec.Decode(packets[i]) {
							t.Errorf("packet %d differs", i)
						}
					}
				})
			}
		}
	}
}

// BenchmarkFirstPacket is the cost of a connection's first send_nsca packet
// (4304 bytes of AES, method 14) with 1, 4 and 16 secrets, the client's
// being the last one tried: with one the single-secret path, with more
// the candidate search; and of a first packet of garbage, which every
// candidate refutes.
func BenchmarkFirstPacket(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) { benchFirstPacket(b, n, false) })
	}
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("garbage/candidates=%d", n), func(b *testing.B) { benchFirstPacket(b, n, true) })
	}
}

func benchFirstPacket(b *testing.B, n int, garbage bool) {
	{
		{
			var secrets []testSecret
			for i := range n {
				secrets = append(secrets, testSecret{14, "rijndael-128", fmt.Sprintf("password-%d", i)})
			}
			cfg := cipherConfig{Candidates: candidatesFor(b, secrets), PayloadLengths: []int{4096}}
			d, _ := newTestDecrypter(b, cfg)
			c := &clientConn{connIdentity: connIdentity{ID: 1}}
			rng := rand.New(rand.NewPCG(5, 6))
			for i := range c.IV {
				c.IV[i] = byte(rng.Uint32())
			}
			ct := clientStream(b, secrets[n-1], c.IV[:], randomPackets(rng, 1, codec.Size, "bench"))
			if garbage {
				for i := range ct {
					ct[i] = byte(rng.Uint32())
				}
			}
			out := make(chan intake.Submission, 1)
			buf := getBuf(chunkSize)[:codec.Size]
			b.SetBytes(codec.Size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				*c = clientConn{connIdentity: connIdentity{ID: 1, IV: c.IV}}
				copy(buf, ct)
				d.feed(context.Background(), c, buf, 0, out)
				<-out
				if !garbage && c.decrypt.sec != &d.cands[n-1] {
					b.Fatal("the first packet did not pick the client's secret")
				}
			}
		}
	}
}

// TestDecryptNetworks: only the candidates whose networks hold the
// client's address are tried, the most specific first; with none, the
// connection is unmatched whatever it sends.
func TestDecryptNetworks(t *testing.T) {
	x := testSecret{14, "rijndael-128", "x-password"}
	cands := candidatesFor(t, []testSecret{x, x, {1, "xor", "y-password"}})
	cands[0].Name, cands[0].Networks = "wide", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cands[1].Name, cands[1].Networks = "narrow", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	cands[2].Name, cands[2].Networks = "other", []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
	d, _ := newTestDecrypter(t, cipherConfig{Candidates: cands, PayloadLengths: []int{4096}})
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		from, want string
		unmatched  bool
	}{{"10.1.2.3", "narrow", false}, {"10.2.0.1", "wide", false}, {"172.16.0.1", "", true}, {"192.168.1.1", "other", false}} {
		conn := &clientConn{connIdentity: connIdentity{ID: 1, Peer: netip.AddrPortFrom(netip.MustParseAddr(c.from), 4000)}, read: connRead{reader: &reader{}}}
		ct := clientStream(t, x, conn.IV[:], randomPackets(rng, 1, codec.Size, "n"))
		out := make(chan intake.Submission, 4)
		buf := getBuf(chunkSize)[:0]
		d.feed(context.Background(), conn, append(buf, ct...), 0, out)
		close(out)
		name := ""
		if conn.decrypt.sec != nil {
			name = conn.decrypt.sec.Name
		}
		if name != c.want || conn.decrypt.unmatched != c.unmatched {
			t.Errorf("from %s: secret %q unmatched %v, want %q %v", c.from, name, conn.decrypt.unmatched, c.want, c.unmatched)
		}
		for p := range out {
			if c.want == "other" && p.Kind == intake.KindResult && p.Malformed == nil {
				t.Errorf("from %s: the only candidate, with another password, decrypted a valid packet", c.from)
			}
		}
	}
}
