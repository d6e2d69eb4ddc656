package main

import (
	"crypto/aes"
	gocipher "crypto/cipher"
	crand "crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"nsca_fast/cgo/mcrypt"
	"nsca_fast/conf"
	"nsca_fast/stages/codec"
)

// Cipher is what a client needs to know to encrypt as send_nsca does: its
// encryption_method and password.
type Cipher struct {
	Method    int    // 0 none, 1 XOR, 2..26 libmcrypt
	Algorithm string // libmcrypt name, for Method >= 2
	Password  []byte
	Legacy    bool // 720-byte packets, as send_nsca --legacy-2-7-mode
	// GoAES encrypts method 14 with Go's crypto/aes (AES-NI) instead of
	// libmcrypt: the same bytes for a fraction of the generator's CPU.
	GoAES bool
}

// NewCipher checks that method is one send_nsca can use and names its
// libmcrypt algorithm.
func NewCipher(method int, password string, legacy bool) (Cipher, error) {
	m, ok := conf.MethodByNumber(method)
	if !ok {
		return Cipher{}, fmt.Errorf("--method %d: not an NSCA encryption method", method)
	}
	if !m.Usable {
		return Cipher{}, fmt.Errorf("--method %d (%s): %s", method, m.Name, m.Why)
	}
	c := Cipher{Method: method, Password: []byte(password), Legacy: legacy}
	if method >= 2 {
		c.Algorithm = m.Name
	}
	return c, nil
}

// PacketSize is 720 or 4304.
func (c Cipher) PacketSize() int {
	if c.Legacy {
		return codec.LegacySize
	}
	return codec.Size
}

// Encoder builds the encrypted data packets of one connection, as send_nsca
// does: the whole packet filled with random bytes, the fields written over
// it with the init packet's timestamp, the CRC, then encryption. With
// libmcrypt the CFB stream runs on from one packet to the next.
type Encoder struct {
	cipher    Cipher
	iv        [codec.IVSize]byte
	timestamp uint32
	module    *mcrypt.Module // nil for methods 0 and 1, and with GoAES
	aes       *cfb8          // GoAES's
	keystream []byte         // method 1: IV and password XORed, one packet long
	rng       *rand.ChaCha8
	pkt       []byte
}

// NewEncoder starts the stream of a connection whose init packet is init
// (132 bytes). seed makes the random filling reproducible in tests.
func NewEncoder(c Cipher, init []byte, seed uint64) (*Encoder, error) {
	if len(init) != codec.InitSize {
		return nil, fmt.Errorf("init packet is %d bytes, want %d", len(init), codec.InitSize)
	}
	e := &Encoder{cipher: c, timestamp: binary.BigEndian.Uint32(init[codec.IVSize:])}
	copy(e.iv[:], init[:codec.IVSize])
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	copy(s[8:], init[:24])
	e.rng = rand.NewChaCha8(s)
	e.pkt = make([]byte, c.PacketSize())
	if c.Method == 1 {
		// send_nsca XORs byte i with IV[i%128] and password[i%len]; the
		// combined stream is the same for every packet of the connection, so
		// it is computed once and applied a word at a time (the generator
		// must leave the cores to the daemon). The tests check it against
		// codec.XOR.
		e.keystream = make([]byte, len(e.pkt))
		codec.XOR(e.keystream, e.iv[:], c.Password, 0)
	}
	if c.Method == 14 && c.GoAES {
		var key [32]byte // rijndael-128's key size in libmcrypt: AES-256
		copy(key[:], c.Password)
		b, err := aes.NewCipher(key[:])
		if err != nil {
			return nil, err
		}
		e.aes = &cfb8{b: b}
		copy(e.aes.reg[:], e.iv[:])
		return e, nil
	}
	if c.Method >= 2 {
		m, err := mcrypt.Open(c.Algorithm)
		if err != nil {
			return nil, err
		}
		// Init pads or truncates the password to the key size and takes the
		// first IVSize bytes of the 128-byte IV, as send_nsca's encrypt_init.
		// cgo may not be handed memory inside Encoder, which holds Go pointers.
		iv := append([]byte(nil), e.iv[:]...)
		if err := m.Init(c.Password, iv); err != nil {
			m.Close()
			return nil, err
		}
		e.module = m
	}
	return e, nil
}

// noise is where the random filling comes from: 1 MiB of random bytes,
// copied from a random offset for each packet. Generating 4 KiB of fresh
// randomness per packet would cost the generator more CPU than the daemon's
// whole XOR path, on a machine where they share the cores.
var noise = func() []byte {
	var seed [32]byte
	crand.Read(seed[:])
	b := make([]byte, 1<<20)
	rand.NewChaCha8(seed).Read(b)
	return b
}()

// Build returns the next encrypted packet for r (r.Timestamp is replaced by
// the init packet's). The slice is reused by the next call.
func (e *Encoder) Build(r codec.Result) []byte {
	off := e.rng.Uint64() % uint64(len(noise)-len(e.pkt))
	copy(e.pkt, noise[off:])
	r.Timestamp = e.timestamp
	codec.Encode(e.pkt, r)
	switch {
	case e.cipher.Method == 0:
	case e.cipher.Method == 1:
		subtle.XORBytes(e.pkt, e.pkt, e.keystream)
	case e.aes != nil:
		e.aes.encrypt(e.pkt)
	default:
		e.module.Encrypt(e.pkt)
	}
	return e.pkt
}

// cfb8 is libmcrypt's "cfb" mode (8-bit CFB) over a 16-byte block cipher:
// each byte is XORed with the first byte of the encrypted register, then
// shifted into it.
type cfb8 struct {
	b   gocipher.Block
	reg [16]byte
	ks  [16]byte
}

func (c *cfb8) encrypt(buf []byte) {
	for i := range buf {
		c.b.Encrypt(c.ks[:], c.reg[:])
		buf[i] ^= c.ks[0]
		copy(c.reg[:15], c.reg[1:])
		c.reg[15] = buf[i]
	}
}

// Close releases the libmcrypt instance.
func (e *Encoder) Close() {
	if e.module != nil {
		e.module.Close()
		e.module = nil
	}
}

// ClientConn is one send_nsca-like connection.
type ClientConn struct {
	conn *net.TCPConn
	enc  *Encoder
}

// ErrInit is returned when the server closes before sending its init packet.
var ErrInit = errors.New("no init packet")

// dialRaw connects to addr and reads the init packet, as send_nsca does
// before it sends anything.
func dialRaw(addr string, timeout time.Duration) (*net.TCPConn, []byte, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	conn := nc.(*net.TCPConn)
	init := make([]byte, codec.InitSize)
	conn.SetReadDeadline(time.Now().Add(timeout))
	if _, err := io.ReadFull(conn, init); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: %v", ErrInit, err)
	}
	conn.SetReadDeadline(time.Time{})
	return conn, init, nil
}

// Dial connects to addr, reads the init packet and keys the cipher.
func Dial(addr string, c Cipher, seed uint64, timeout time.Duration) (*ClientConn, error) {
	conn, init, err := dialRaw(addr, timeout)
	if err != nil {
		return nil, err
	}
	enc, err := NewEncoder(c, init, seed)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &ClientConn{conn: conn, enc: enc}, nil
}

// Send writes one check result as one packet with one write, as send_nsca's
// sendall does.
func (cc *ClientConn) Send(r codec.Result) error {
	_, err := cc.conn.Write(cc.enc.Build(r))
	return err
}

// Close ends the connection the way send_nsca does: close() after the last packet.
func (cc *ClientConn) Close() error {
	cc.enc.Close()
	return cc.conn.Close()
}

// Checks sent by the generator carry their id in the plugin output, so the
// line the daemon writes can be matched to the check. Everything else in
// the result is derived from the id too, so each line can be verified.
const (
	benchHost    = "bench-host"
	benchService = "bench-svc"
	idMarker     = "bench id="
)

// ResultFor is the check result the generator sends with id.
func ResultFor(id uint64) codec.Result {
	return codec.Result{
		ReturnCode: int16(id % 4),
		Host:       benchHost,
		Service:    benchService,
		Output:     idMarker + strconv.FormatUint(id, 10) + " OK - nsca-bench|t=1;2;3",
	}
}

// ExpectedLine is the command file line for id, without the "[time] " prefix.
func ExpectedLine(id uint64) string {
	r := ResultFor(id)
	return "PROCESS_SERVICE_CHECK_RESULT;" + r.Host + ";" + r.Service + ";" +
		strconv.Itoa(int(r.ReturnCode)) + ";" + r.Output
}

// appendExpected appends ExpectedLine(id) to b without allocating a string.
func appendExpected(b []byte, id uint64) []byte {
	b = append(b, "PROCESS_SERVICE_CHECK_RESULT;"+benchHost+";"+benchService+";"...)
	b = strconv.AppendInt(b, int64(id%4), 10)
	b = append(b, ';')
	b = append(b, idMarker...)
	b = strconv.AppendUint(b, id, 10)
	return append(b, " OK - nsca-bench|t=1;2;3"...)
}
