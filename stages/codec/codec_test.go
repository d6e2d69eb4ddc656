package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

// noise returns n pseudo-random bytes, as send_nsca fills a packet before
// writing the fields.
func noise(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func encoded(_ testing.TB, size int, r Result) []byte {
	pkt := noise(uint64(size), size)
	Encode(pkt, r)
	return pkt
}

func TestSizes(t *testing.T) {
	if Size != 4304 || LegacySize != 720 || InitSize != 132 || IVSize != 128 {
		t.Fatalf("sizes: Size=%d LegacySize=%d InitSize=%d IVSize=%d", Size, LegacySize, InitSize, IVSize)
	}
	// The field table: output starts at 206 and ends 2 bytes of padding
	// before the end of the packet.
	if got := offOutput + MaxOutputLength + 2; got != Size {
		t.Errorf("206+4096+2 = %d, want %d", got, Size)
	}
	if got := offOutput + LegacyMaxOutputLength + 2; got != LegacySize {
		t.Errorf("206+512+2 = %d, want %d", got, LegacySize)
	}
	if OutputLength(Size) != 4096 || OutputLength(LegacySize) != 512 {
		t.Errorf("OutputLength: %d %d", OutputLength(Size), OutputLength(LegacySize))
	}
}

func TestEncodeLayout(t *testing.T) {
	for _, size := range []int{Size, LegacySize} {
		orig := noise(7, size)
		pkt := bytes.Clone(orig)
		r := Result{Timestamp: 0x01020304, ReturnCode: 2, Host: "web01", Service: "HTTP", Output: "CRITICAL - down\nsecond line"}
		Encode(pkt, r)

		if len(pkt) != size {
			t.Fatalf("size %d: packet length changed to %d", size, len(pkt))
		}
		if !bytes.Equal(pkt[0:2], []byte{0, 3}) {
			t.Errorf("size %d: version bytes % x, want 00 03", size, pkt[0:2])
		}
		if !bytes.Equal(pkt[2:4], orig[2:4]) {
			t.Errorf("size %d: padding at 2 changed: % x, was % x", size, pkt[2:4], orig[2:4])
		}
		if !bytes.Equal(pkt[8:12], []byte{1, 2, 3, 4}) {
			t.Errorf("size %d: timestamp bytes % x, want 01 02 03 04", size, pkt[8:12])
		}
		if !bytes.Equal(pkt[12:14], []byte{0, 2}) {
			t.Errorf("size %d: return code bytes % x, want 00 02", size, pkt[12:14])
		}
		if got := string(pkt[14 : 14+6]); got != "web01\x00" {
			t.Errorf("size %d: host field %q", size, got)
		}
		if !bytes.Equal(pkt[14+6:78], orig[14+6:78]) {
			t.Errorf("size %d: bytes after the host NUL were overwritten", size)
		}
		if got := string(pkt[78 : 78+5]); got != "HTTP\x00" {
			t.Errorf("size %d: service field %q", size, got)
		}
		if !bytes.Equal(pkt[78+5:206], orig[78+5:206]) {
			t.Errorf("size %d: bytes after the service NUL were overwritten", size)
		}
		want := r.Output + "\x00"
		if got := string(pkt[206 : 206+len(want)]); got != want {
			t.Errorf("size %d: output field %q", size, got)
		}
		if !bytes.Equal(pkt[206+len(want):], orig[206+len(want):]) {
			t.Errorf("size %d: bytes after the output NUL (incl. trailing padding) were overwritten", size)
		}
		// CRC at offset 4, big-endian, over the packet with the crc field zeroed.
		z := bytes.Clone(pkt)
		copy(z[4:8], []byte{0, 0, 0, 0})
		wantCRC := crc32.ChecksumIEEE(z)
		if got := binary.BigEndian.Uint32(pkt[4:8]); got != wantCRC {
			t.Errorf("size %d: crc field %08x, want ChecksumIEEE %08x", size, got, wantCRC)
		}
		if got := CRC(pkt); got != wantCRC {
			t.Errorf("size %d: CRC() = %08x, want %08x", size, got, wantCRC)
		}
		if err := Check(pkt); err != nil {
			t.Errorf("size %d: Check of an encoded packet: %v", size, err)
		}
	}
}

func TestCRCDoesNotModify(t *testing.T) {
	pkt := noise(3, Size)
	orig := bytes.Clone(pkt)
	c1 := CRC(pkt)
	if !bytes.Equal(pkt, orig) {
		t.Fatal("CRC modified the packet")
	}
	// The crc field's content must not matter.
	binary.BigEndian.PutUint32(pkt[4:], 0xdeadbeef)
	if c2 := CRC(pkt); c2 != c1 {
		t.Errorf("CRC depends on the crc field: %08x vs %08x", c1, c2)
	}
	// Every other byte does.
	for _, off := range []int{0, 3, 8, 13, 14, 78, 206, Size - 1} {
		p := bytes.Clone(orig)
		p[off] ^= 0x40
		if CRC(p) == c1 {
			t.Errorf("flipping byte %d does not change the CRC", off)
		}
	}
	// Known value: crc32 of a packet of zeros with the field zero is the
	// plain IEEE CRC of 4304 zero bytes.
	zero := make([]byte, Size)
	if got, want := CRC(zero), crc32.ChecksumIEEE(zero); got != want {
		t.Errorf("CRC(zeros) = %08x, want %08x", got, want)
	}
}

func TestCheck(t *testing.T) {
	good := encoded(t, Size, Result{Timestamp: 1, Host: "h", Service: "s", Output: "o"})
	legacy := encoded(t, LegacySize, Result{Timestamp: 1, Host: "h", Output: "o"})

	if err := Check(good); err != nil {
		t.Errorf("good: %v", err)
	}
	if err := Check(legacy); err != nil {
		t.Errorf("legacy: %v", err)
	}

	// Bad version, with a CRC that matches the bad version: must still fail on version.
	for _, v := range []uint16{0, 2, 4, 0x0300, 0xffff} {
		p := bytes.Clone(good)
		binary.BigEndian.PutUint16(p[0:], v)
		binary.BigEndian.PutUint32(p[4:], CRC(p))
		if err := Check(p); !errors.Is(err, ErrVersion) {
			t.Errorf("version %#x: got %v, want ErrVersion", v, err)
		}
	}

	// Bad CRC: one flipped bit anywhere but the crc field.
	for _, off := range []int{2, 9, 12, 20, 100, 300, Size - 1} {
		p := bytes.Clone(good)
		p[off] ^= 1
		if err := Check(p); !errors.Is(err, ErrCRC) {
			t.Errorf("flip at %d: got %v, want ErrCRC", off, err)
		}
	}
	p := bytes.Clone(good)
	p[5] ^= 0x80
	if err := Check(p); !errors.Is(err, ErrCRC) {
		t.Errorf("flipped crc field: got %v, want ErrCRC", err)
	}
	p = bytes.Clone(legacy)
	p[LegacySize-1] ^= 1
	if err := Check(p); !errors.Is(err, ErrCRC) {
		t.Errorf("legacy flip: got %v, want ErrCRC", err)
	}

	// Wrong sizes, including a valid packet truncated or extended.
	for _, n := range []int{0, 1, 4, 719, MaxSize + 1} {
		buf := make([]byte, n)
		copy(buf, good)
		if err := Check(buf); !errors.Is(err, ErrSize) {
			t.Errorf("size %d: got %v, want ErrSize", n, err)
		}
	}
	// Other payload lengths are packets of their own size (NSClient++'s
	// payload length): a 4304-byte packet cut or extended fails its CRC.
	for _, n := range []int{721, 1000, 4303, 4305, 8608, MaxSize} {
		buf := make([]byte, n)
		copy(buf, good)
		if err := Check(buf); !errors.Is(err, ErrCRC) {
			t.Errorf("size %d: got %v, want ErrCRC", n, err)
		}
	}
	for _, payload := range []int{MinPayloadLength, 1024, 8192, MaxPayloadLength} {
		pkt := encoded(t, SizeOf(payload), Result{Timestamp: 1, Host: "h", Output: strings.Repeat("x", payload)})
		if err := Check(pkt); err != nil {
			t.Errorf("payload length %d: %v", payload, err)
		}
		if r := Decode(pkt); len(r.Output) != payload-1 {
			t.Errorf("payload length %d: output of %d bytes, want %d", payload, len(r.Output), payload-1)
		}
	}
	if err := Check(good[:LegacySize]); err == nil {
		t.Error("first 720 bytes of a 4304-byte packet passed Check")
	}
	if err := Check(nil); !errors.Is(err, ErrSize) {
		t.Errorf("nil: got %v, want ErrSize", err)
	}
}

func TestDecodeFields(t *testing.T) {
	r := Result{Timestamp: 1700000000, ReturnCode: 1, Host: "db-7.example.org", Service: "Disk /var", Output: "WARNING; 91% used\nline2\\x"}
	for _, size := range []int{Size, LegacySize} {
		got := Decode(encoded(t, size, r))
		if got != r {
			t.Errorf("size %d: Decode = %+v, want %+v", size, got, r)
		}
	}
	// Host check: empty service.
	h := Result{Timestamp: 5, ReturnCode: 0, Host: "gw", Output: "PING OK"}
	if got := Decode(encoded(t, Size, h)); got != h || got.Service != "" {
		t.Errorf("host check: Decode = %+v, want %+v", got, h)
	}
}

func TestDecodeCutsAtNUL(t *testing.T) {
	pkt := encoded(t, Size, Result{Host: "abc", Service: "def", Output: "ghi"})
	// Noise after each NUL must not show.
	for _, off := range []int{14 + 4, 78 + 4, 206 + 4} {
		for i := off; i < off+20; i++ {
			pkt[i] = 'X'
		}
	}
	binary.BigEndian.PutUint32(pkt[4:], CRC(pkt))
	got := Decode(pkt)
	if got.Host != "abc" || got.Service != "def" || got.Output != "ghi" {
		t.Errorf("Decode = %+v", got)
	}
	// A NUL inside a field ends it.
	pkt = encoded(t, Size, Result{Host: "ab\x00cd", Service: "s\x00t", Output: "o\x00p"})
	got = Decode(pkt)
	if got.Host != "ab" || got.Service != "s" || got.Output != "o" {
		t.Errorf("embedded NUL: Decode = %+v", got)
	}
}

func TestDecodeNewlines(t *testing.T) {
	pkt := encoded(t, Size, Result{
		Host:    "host1\n[0] PROCESS_HOST_CHECK_RESULT;evil;0;x",
		Service: "svc\nmore",
		Output:  "line1\nline2\n\nline4\n",
	})
	got := Decode(pkt)
	if got.Host != "host1" {
		t.Errorf("host not cut at newline: %q", got.Host)
	}
	if got.Service != "svc" {
		t.Errorf("service not cut at newline: %q", got.Service)
	}
	if got.Output != "line1\nline2\n\nline4\n" {
		t.Errorf("output newlines lost: %q", got.Output)
	}
	// A newline first: empty host, and an empty service makes a host check.
	got = Decode(encoded(t, Size, Result{Host: "\nx", Service: "\ny", Output: "o"}))
	if got.Host != "" || got.Service != "" {
		t.Errorf("leading newline: host %q service %q", got.Host, got.Service)
	}
	// Carriage returns are not newlines.
	got = Decode(encoded(t, Size, Result{Host: "a\rb", Service: "c\rd", Output: "e\r\nf"}))
	if got.Host != "a\rb" || got.Service != "c\rd" || got.Output != "e\r\nf" {
		t.Errorf("CR: %+v", got)
	}
}

func TestDecodeReturnCodeSigned(t *testing.T) {
	pkt := encoded(t, Size, Result{Host: "h", Output: "o"})
	for _, c := range []struct {
		raw  uint16
		want int16
	}{{0, 0}, {1, 1}, {3, 3}, {255, 255}, {32767, 32767}, {32768, -32768}, {65535, -1}, {65534, -2}} {
		binary.BigEndian.PutUint16(pkt[12:], c.raw)
		if got := Decode(pkt).ReturnCode; got != c.want {
			t.Errorf("raw %d: ReturnCode %d, want %d", c.raw, got, c.want)
		}
	}
	// Encode writes a negative code as its two's complement.
	pkt = encoded(t, Size, Result{ReturnCode: -1, Host: "h"})
	if !bytes.Equal(pkt[12:14], []byte{0xff, 0xff}) {
		t.Errorf("Encode(-1): % x", pkt[12:14])
	}
	if got := Decode(pkt).ReturnCode; got != -1 {
		t.Errorf("round trip of -1: %d", got)
	}
}

func TestDecodeTimestamp(t *testing.T) {
	pkt := encoded(t, LegacySize, Result{Timestamp: 0xfffffffe, Host: "h"})
	if got := Decode(pkt).Timestamp; got != 0xfffffffe {
		t.Errorf("Timestamp %#x", got)
	}
	if got := TimestampOf(pkt); got != 0xfffffffe {
		t.Errorf("TimestampOf %#x", got)
	}
}

// Fields filled to their full length with no NUL at all: stock overwrites
// the last byte of each with NUL, so at most len-1 bytes survive.
func TestDecodeFullFields(t *testing.T) {
	for _, size := range []int{Size, LegacySize} {
		pkt := noise(11, size)
		binary.BigEndian.PutUint16(pkt[0:], Version)
		copy(pkt[14:78], bytes.Repeat([]byte{'h'}, 64))
		copy(pkt[78:206], bytes.Repeat([]byte{'s'}, 128))
		outLen := OutputLength(size)
		copy(pkt[206:206+outLen], bytes.Repeat([]byte{'o'}, outLen))
		binary.BigEndian.PutUint32(pkt[4:], CRC(pkt))
		if err := Check(pkt); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got := Decode(pkt)
		if got.Host != strings.Repeat("h", 63) {
			t.Errorf("size %d: host length %d, want 63", size, len(got.Host))
		}
		if got.Service != strings.Repeat("s", 127) {
			t.Errorf("size %d: service length %d, want 127", size, len(got.Service))
		}
		if got.Output != strings.Repeat("o", outLen-1) {
			t.Errorf("size %d: output length %d, want %d", size, len(got.Output), outLen-1)
		}
	}
}

func TestLegacyOutputMax(t *testing.T) {
	long := strings.Repeat("x", 2000)
	pkt := encoded(t, LegacySize, Result{Host: "h", Service: "s", Output: long})
	if err := Check(pkt); err != nil {
		t.Fatal(err)
	}
	if pkt[206+511] != 0 {
		t.Errorf("Encode did not NUL-terminate the legacy output at 717: %#x", pkt[206+511])
	}
	if got := Decode(pkt).Output; got != long[:511] {
		t.Errorf("legacy output length %d, want 511", len(got))
	}
	pkt = encoded(t, Size, Result{Host: "h", Service: "s", Output: long + long + long})
	if got := Decode(pkt).Output; len(got) != 4095 {
		t.Errorf("output length %d, want 4095", len(got))
	}
}

func TestEncodeTruncates(t *testing.T) {
	pkt := encoded(t, Size, Result{Host: strings.Repeat("H", 100), Service: strings.Repeat("S", 300), Output: "o"})
	if pkt[14+63] != 0 || pkt[78+127] != 0 {
		t.Errorf("fields not NUL-terminated at their last byte: host %#x service %#x", pkt[14+63], pkt[78+127])
	}
	got := Decode(pkt)
	if got.Host != strings.Repeat("H", 63) || got.Service != strings.Repeat("S", 127) || got.Output != "o" {
		t.Errorf("Decode = %q %q %q", got.Host, got.Service, got.Output)
	}
}

// xorStock is stock nsca's encrypt_buffer/decrypt_buffer for ENCRYPT_XOR,
// transcribed: two passes, over the IV and then over strlen(password).
func xorStock(buffer, iv, password []byte) {
	x := 0
	for y := 0; y < len(buffer); y, x = y+1, x+1 {
		if x >= IVSize {
			x = 0
		}
		buffer[y] ^= iv[x]
	}
	passwordLength := bytes.IndexByte(append(bytes.Clone(password), 0), 0) // strlen
	x = 0
	for y := 0; y < len(buffer); y, x = y+1, x+1 {
		if x >= passwordLength {
			x = 0
		}
		if passwordLength == 0 {
			// password[0] is the terminating NUL: XOR with 0.
			continue
		}
		buffer[y] ^= password[x]
	}
}

func TestXORMatchesStock(t *testing.T) {
	iv := noise(1, IVSize)
	for _, pw := range []string{"", "a", "secret", "pass with trailing space ", strings.Repeat("p", 127), strings.Repeat("q", 128), strings.Repeat("r", 129), strings.Repeat("k", 511)} {
		for _, size := range []int{Size, LegacySize} {
			plain := noise(uint64(len(pw)+size), size)
			want := bytes.Clone(plain)
			xorStock(want, iv, []byte(pw))
			got := bytes.Clone(plain)
			XOR(got, iv, []byte(pw), 0)
			if !bytes.Equal(got, want) {
				t.Errorf("password len %d size %d: XOR differs from stock's loop at byte %d", len(pw), size, firstDiff(got, want))
			}
			// Its own inverse.
			XOR(got, iv, []byte(pw), 0)
			if !bytes.Equal(got, plain) {
				t.Errorf("password len %d size %d: XOR twice is not the identity", len(pw), size)
			}
		}
	}
}

func TestXOREmptyPassword(t *testing.T) {
	iv := noise(2, IVSize)
	plain := noise(3, Size)
	a := bytes.Clone(plain)
	XOR(a, iv, nil, 0)
	b := bytes.Clone(plain)
	XOR(b, iv, []byte{}, 0)
	if !bytes.Equal(a, b) {
		t.Fatal("nil and empty password differ")
	}
	// With an empty password only the IV is applied.
	for i := range plain {
		if a[i] != plain[i]^iv[i%IVSize] {
			t.Fatalf("byte %d: %#x, want plain^iv %#x", i, a[i], plain[i]^iv[i%IVSize])
		}
	}
	// A zero IV and an empty password leave the data alone.
	c := bytes.Clone(plain)
	XOR(c, make([]byte, IVSize), nil, 0)
	if !bytes.Equal(c, plain) {
		t.Error("zero IV and empty password changed the data")
	}
}

func TestXOROffsets(t *testing.T) {
	iv := noise(4, IVSize)
	for _, pw := range []string{"", "x", "secret", strings.Repeat("abc", 50)} {
		plain := noise(5, Size)
		whole := bytes.Clone(plain)
		XOR(whole, iv, []byte(pw), 0)
		for _, cut := range []int{0, 1, 127, 128, 129, 200, 719, 720, 721, 4000, Size - 1, Size} {
			pieces := bytes.Clone(plain)
			XOR(pieces[:cut], iv, []byte(pw), 0)
			XOR(pieces[cut:], iv, []byte(pw), cut)
			if !bytes.Equal(pieces, whole) {
				t.Errorf("password %q cut %d: two pieces differ from one at byte %d", pw, cut, firstDiff(pieces, whole))
			}
		}
		// Many small pieces of random length.
		pieces := bytes.Clone(plain)
		r := rand.New(rand.NewPCG(6, 7))
		for off := 0; off < len(pieces); {
			n := min(1+r.IntN(300), len(pieces)-off)
			XOR(pieces[off:off+n], iv, []byte(pw), off)
			off += n
		}
		if !bytes.Equal(pieces, whole) {
			t.Errorf("password %q: random pieces differ at byte %d", pw, firstDiff(pieces, whole))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestInitPacket(t *testing.T) {
	iv := noise(8, IVSize)
	dst := noise(9, InitSize)
	InitPacket(dst, iv, 0x5f5e0ff1)
	if !bytes.Equal(dst[:128], iv) {
		t.Error("IV not copied to bytes 0..127")
	}
	if !bytes.Equal(dst[128:132], []byte{0x5f, 0x5e, 0x0f, 0xf1}) {
		t.Errorf("timestamp bytes % x", dst[128:132])
	}
	if len(dst) != 132 {
		t.Errorf("len %d", len(dst))
	}
}

// fitFuzz sizes arbitrary input to a packet: padded with zeros or truncated
// to 720 bytes when it is short, to 4304 otherwise.
func fitFuzz(data []byte) []byte {
	size := Size
	if len(data) <= LegacySize {
		size = LegacySize
	}
	pkt := make([]byte, size)
	copy(pkt, data)
	return pkt
}

func checkDecoded(t *testing.T, r Result, size int) {
	t.Helper()
	if strings.IndexByte(r.Host, '\n') >= 0 || strings.IndexByte(r.Host, 0) >= 0 {
		t.Errorf("host %q holds a newline or NUL", r.Host)
	}
	if len(r.Host) > 63 {
		t.Errorf("host is %d bytes", len(r.Host))
	}
	if strings.IndexByte(r.Service, '\n') >= 0 || strings.IndexByte(r.Service, 0) >= 0 {
		t.Errorf("service %q holds a newline or NUL", r.Service)
	}
	if len(r.Service) > 127 {
		t.Errorf("service is %d bytes", len(r.Service))
	}
	if strings.IndexByte(r.Output, 0) >= 0 {
		t.Errorf("output holds a NUL")
	}
	if len(r.Output) > OutputLength(size)-1 {
		t.Errorf("output is %d bytes for a %d-byte packet", len(r.Output), size)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encoded(f, Size, Result{Timestamp: 1, ReturnCode: 2, Host: "h", Service: "s", Output: "o\np"}))
	f.Add(encoded(f, LegacySize, Result{Timestamp: 1, Host: "h\nx", Output: "legacy"}))
	f.Add([]byte("garbage"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Check takes any length without panicking.
		_ = Check(data)
		pkt := fitFuzz(data)
		err := Check(pkt)
		if err != nil && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrCRC) {
			t.Fatalf("Check of a %d-byte packet: %v", len(pkt), err)
		}
		// Decode is only called on checked packets by the daemon, but must
		// not panic on any packet of a valid size.
		r := Decode(pkt)
		checkDecoded(t, r, len(pkt))

		// Make it valid: Check passes, and decoding is stable under re-encoding.
		binary.BigEndian.PutUint16(pkt[0:], Version)
		binary.BigEndian.PutUint32(pkt[4:], CRC(pkt))
		if err := Check(pkt); err != nil {
			t.Fatalf("Check after fixing version and CRC: %v", err)
		}
		r = Decode(pkt)
		checkDecoded(t, r, len(pkt))
		again := make([]byte, len(pkt))
		Encode(again, r)
		if err := Check(again); err != nil {
			t.Fatalf("Check of re-encoded packet: %v", err)
		}
		if r2 := Decode(again); r2 != r {
			t.Fatalf("re-encode changed the result: %+v -> %+v", r, r2)
		}
	})
}
