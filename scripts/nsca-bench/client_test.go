package main

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"nsca_fast/cgo/mcrypt"
	"nsca_fast/conf"
	"nsca_fast/stages/codec"
)

// initPacket is a server's init packet with a random IV.
func initPacket(r *rand.Rand, ts uint32) []byte {
	b := make([]byte, codec.InitSize)
	for i := range codec.IVSize {
		b[i] = byte(r.UintN(256))
	}
	binary.BigEndian.PutUint32(b[codec.IVSize:], ts)
	return b
}

// streamOf builds n consecutive packets of one connection, copied out.
func streamOf(t *testing.T, c Cipher, init []byte, ids []uint64) [][]byte {
	t.Helper()
	e, err := NewEncoder(c, init, 42)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out [][]byte
	for _, id := range ids {
		out = append(out, bytes.Clone(e.Build(ResultFor(id))))
	}
	return out
}

// decrypter is an independent way to undo one connection's encryption.
type decrypter func(pkt []byte)

// xorDecrypter undoes XOR with the daemon's codec, packet by packet.
func xorDecrypter(iv, password []byte) decrypter {
	return func(pkt []byte) { codec.XOR(pkt, iv, password, 0) }
}

// mcryptDecrypter is a fresh libmcrypt module keyed with the IV and
// decrypting the stream in order, as stock nsca does.
func mcryptDecrypter(t *testing.T, alg string, password, iv []byte) decrypter {
	m, err := mcrypt.Open(alg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := m.Init(password, iv); err != nil {
		t.Fatal(err)
	}
	return m.Decrypt
}

// stdlibDecrypter is 8-bit CFB over Go's own block cipher, with the key
// derived as NSCA does (password zero-padded or truncated to keySize) and
// the register starting as the first block-size bytes of the IV. It shares
// no code with libmcrypt.
func stdlibDecrypter(t *testing.T, newBlock func([]byte) (cipher.Block, error), keySize int, password, iv []byte) decrypter {
	key := make([]byte, keySize)
	copy(key, password)
	block, err := newBlock(key)
	if err != nil {
		t.Fatal(err)
	}
	reg := bytes.Clone(iv[:block.BlockSize()])
	out := make([]byte, block.BlockSize())
	return func(pkt []byte) {
		for i, c := range pkt {
			block.Encrypt(out, reg)
			pkt[i] = c ^ out[0]
			copy(reg, reg[1:])
			reg[len(reg)-1] = c
		}
	}
}

// checkLayout reads the decrypted packet by the offsets of the protocol
// description, without the codec: version, CRC-32 (IEEE) over the packet
// with a zeroed crc field, the echoed timestamp, return code and fields.
func checkLayout(t *testing.T, pkt []byte, ts uint32, id uint64) {
	t.Helper()
	want := ResultFor(id)
	if v := binary.BigEndian.Uint16(pkt[0:]); v != 3 {
		t.Fatalf("id %d: packet_version %d, want 3", id, v)
	}
	z := bytes.Clone(pkt)
	copy(z[4:8], []byte{0, 0, 0, 0})
	if got, want := binary.BigEndian.Uint32(pkt[4:]), crc32.ChecksumIEEE(z); got != want {
		t.Fatalf("id %d: crc32 field %08x, computed %08x", id, got, want)
	}
	if got := binary.BigEndian.Uint32(pkt[8:]); got != ts {
		t.Fatalf("id %d: timestamp %d, want the init packet's %d", id, got, ts)
	}
	if got := int16(binary.BigEndian.Uint16(pkt[12:])); got != want.ReturnCode {
		t.Fatalf("id %d: return_code %d, want %d", id, got, want.ReturnCode)
	}
	field := func(off, size int, s string) {
		t.Helper()
		f := pkt[off : off+size]
		if !bytes.HasPrefix(f, []byte(s+"\x00")) {
			t.Fatalf("id %d: field at %d is %q..., want %q NUL-terminated", id, off, f[:min(len(f), len(s)+8)], s)
		}
	}
	out := 4096
	if len(pkt) == 720 {
		out = 512
	}
	field(14, 64, want.Host)
	field(78, 128, want.Service)
	field(206, out, want.Output)
	// send_nsca fills the packet with random bytes first: the tail of the
	// output field is noise, not zeros.
	tail := pkt[206+len(want.Output)+1 : 206+out]
	if bytes.Count(tail, []byte{0}) > len(tail)/16 {
		t.Fatalf("id %d: the output field after its NUL is mostly zeros, want random filling", id)
	}
}

func TestPacketsDecodeIndependently(t *testing.T) {
	type decoderCase struct {
		name string
		dec  func(t *testing.T, c Cipher, iv []byte) decrypter
	}
	var cases []struct {
		method int
		legacy bool
		paths  []decoderCase
	}
	add := func(method int, legacy bool, paths ...decoderCase) {
		cases = append(cases, struct {
			method int
			legacy bool
			paths  []decoderCase
		}{method, legacy, paths})
	}
	none := decoderCase{"none", func(*testing.T, Cipher, []byte) decrypter { return func([]byte) {} }}
	xor := decoderCase{"codec.XOR", func(_ *testing.T, c Cipher, iv []byte) decrypter { return xorDecrypter(iv, c.Password) }}
	lib := decoderCase{"fresh libmcrypt module", func(t *testing.T, c Cipher, iv []byte) decrypter {
		return mcryptDecrypter(t, c.Algorithm, c.Password, iv)
	}}
	aes256 := decoderCase{"crypto/aes cfb8", func(t *testing.T, c Cipher, iv []byte) decrypter {
		return stdlibDecrypter(t, aes.NewCipher, 32, c.Password, iv)
	}}
	tdes := decoderCase{"crypto/des 3DES cfb8", func(t *testing.T, c Cipher, iv []byte) decrypter {
		return stdlibDecrypter(t, des.NewTripleDESCipher, 24, c.Password, iv)
	}}
	add(0, false, none)
	add(1, false, xor)
	add(3, false, lib, tdes)
	add(8, false, lib)
	add(14, false, lib, aes256)
	add(0, true, none)
	add(1, true, xor)
	add(14, true, lib, aes256)
	// The remaining libmcrypt methods, against a fresh module.
	for _, m := range conf.UsableMethods() {
		if m.Number >= 2 && m.Number != 3 && m.Number != 8 && m.Number != 14 {
			add(m.Number, false, lib)
		}
	}

	// Passwords: short, longer than every key (truncated), empty (all-zero key).
	passwords := []string{"s3cret", string(bytes.Repeat([]byte("0123456789"), 14)), ""}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range cases {
		for pi, pw := range passwords {
			for _, path := range tc.paths {
				name := fmt.Sprintf("method=%d/legacy=%v/password%d/%s", tc.method, tc.legacy, pi, path.name)
				t.Run(name, func(t *testing.T) {
					c, err := NewCipher(tc.method, pw, tc.legacy)
					if err != nil {
						t.Fatal(err)
					}
					ts := uint32(1700000000 + r.UintN(1000))
					init := initPacket(r, ts)
					ids := []uint64{7, 8, 123456789}
					pkts := streamOf(t, c, init, ids)
					dec := path.dec(t, c, init[:codec.IVSize])
					for i, pkt := range pkts {
						if len(pkt) != c.PacketSize() {
							t.Fatalf("packet is %d bytes, want %d", len(pkt), c.PacketSize())
						}
						plain := bytes.Clone(pkt)
						dec(plain)
						if err := codec.Check(plain); err != nil {
							t.Fatalf("packet %d: %v", i, err)
						}
						got := codec.Decode(plain)
						want := ResultFor(ids[i])
						want.Timestamp = ts
						if got != want {
							t.Fatalf("packet %d decodes to %+v, want %+v", i, got, want)
						}
						checkLayout(t, plain, ts, ids[i])
					}
					if tc.method >= 1 && bytes.Equal(pkts[0], pkts[1]) {
						t.Fatal("two packets are identical")
					}
				})
			}
		}
	}
}

// The CFB stream must run on across the packets of a connection: the
// second packet does not decrypt with a module started afresh, and nothing
// decrypts with another password or IV. This guards the tests above
// against passing vacuously.
func TestStreamContinuesAcrossPackets(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, method := range []int{3, 8, 14} {
		c, err := NewCipher(method, "pw", false)
		if err != nil {
			t.Fatal(err)
		}
		init := initPacket(r, 1700000000)
		pkts := streamOf(t, c, init, []uint64{1, 2})
		fresh := bytes.Clone(pkts[1])
		mcryptDecrypter(t, c.Algorithm, c.Password, init[:codec.IVSize])(fresh)
		if codec.Check(fresh) == nil {
			t.Errorf("method %d: the second packet decrypts with a fresh module: the CFB state is not carried over", method)
		}
		wrong := bytes.Clone(pkts[0])
		mcryptDecrypter(t, c.Algorithm, []byte("other"), init[:codec.IVSize])(wrong)
		if codec.Check(wrong) == nil {
			t.Errorf("method %d: decrypts with the wrong password", method)
		}
	}
	c, _ := NewCipher(1, "pw", false)
	init := initPacket(r, 1700000000)
	pkts := streamOf(t, c, init, []uint64{1})
	other := initPacket(r, 1700000000)
	wrong := bytes.Clone(pkts[0])
	codec.XOR(wrong, other[:codec.IVSize], c.Password, 0)
	if codec.Check(wrong) == nil {
		t.Error("XOR: decrypts with another IV")
	}
}

func TestUnusableMethods(t *testing.T) {
	for _, n := range []int{-1, 7, 12, 13, 27} {
		if _, err := NewCipher(n, "pw", false); err == nil {
			t.Errorf("method %d accepted", n)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var ns []int64
	for i := 100; i >= 1; i-- {
		ns = append(ns, int64(i)*1e6)
	}
	p50, p99, pmax := percentilesMs(ns)
	if p50 != 50 || p99 != 99 || pmax != 100 {
		t.Fatalf("p50 %v p99 %v max %v, want 50 99 100", p50, p99, pmax)
	}
	if a, b, c := percentilesMs(nil); a != 0 || b != 0 || c != 0 {
		t.Fatal("empty input")
	}
}

func TestSinkMatching(t *testing.T) {
	recv := new(times)
	s := &Sink{clock: func() int64 { return 5 }, recv: recv}
	in := "[1700000000] " + ExpectedLine(3) + "\n" +
		"[1700000000] " + ExpectedLine(3) + "\n" + // duplicate
		"[1700000000] " + ExpectedLine(4) + "x\n" + // wrong content
		"[1700000000] PROCESS_SERVICE_CHECK_RESULT;h;s;0;no id here\n" +
		"[1700000001] " + ExpectedLine(70000) + "\n"
	if err := s.read(bytes.NewReader([]byte(in))); err != nil {
		t.Fatal(err)
	}
	if d, dup, m, u := s.Delivered.Load(), s.Duplicates.Load(), s.Mismatched.Load(), s.Unknown.Load(); d != 2 || dup != 1 || m != 1 || u != 1 {
		t.Fatalf("delivered %d duplicates %d mismatched %d unknown %d, want 2 1 1 1", d, dup, m, u)
	}
	if recv.get(3) != 5 || recv.get(70000) != 5 || recv.get(4) != 0 {
		t.Fatal("receive times not recorded by id")
	}
}

// GoAES's packets are libmcrypt's, byte for byte, across the packets of a
// connection.
func TestGoAESIsLibmcrypt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, pw := range []string{"pw", "a password longer than the thirty-two bytes of the key"} {
		c, err := NewCipher(14, pw, false)
		if err != nil {
			t.Fatal(err)
		}
		init := initPacket(r, 1700000000)
		want := streamOf(t, c, init, []uint64{1, 2, 3})
		c.GoAES = true
		got := streamOf(t, c, init, []uint64{1, 2, 3})
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("password %q: packet %d differs from libmcrypt's", pw, i)
			}
		}
	}
}
