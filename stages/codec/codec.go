// Package codec holds the NSCA v3 wire format: the init packet the server
// sends, the data packets send_nsca answers with, their CRC and the XOR
// cipher. It knows nothing about sockets or libmcrypt, so the daemon, its
// tests and the load generator share one definition of the protocol.
package codec

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes and offsets of the version 3 data packet, as laid out by send_nsca.
const (
	// IVSize is the length of the random IV at the start of the init packet.
	IVSize = 128
	// InitSize is the length of the init packet: the IV and a 32-bit timestamp.
	InitSize = IVSize + 4

	// Version is the only packet_version NSCA 2.x speaks.
	Version = 3

	// Size is the length of a data packet from send_nsca 2.9 and later.
	Size = 4304
	// LegacySize is the length of a data packet from NSCA 2.7 clients.
	LegacySize = 720

	offVersion   = 0
	offCRC       = 4
	offTimestamp = 8
	offReturn    = 12
	offHost      = 14
	offService   = 78
	offOutput    = 206

	// MaxHostLength is the host_name field, NUL included.
	MaxHostLength = 64
	// MaxServiceLength is the svc_description field, NUL included.
	MaxServiceLength = 128
	// MaxOutputLength is the plugin_output field of a 4304-byte packet, NUL included.
	MaxOutputLength = 4096
	// LegacyMaxOutputLength is the plugin_output field of a 720-byte packet, NUL included.
	LegacyMaxOutputLength = 512

	// Overhead is what a data packet holds besides plugin_output: the
	// fields before it and the 2 bytes of padding after it. NSClient++
	// makes packets of Overhead + its "payload length" bytes.
	Overhead = offOutput + 2
	// MinPayloadLength is the shortest plugin_output field accepted: NSCA
	// 2.7's, the default of NSClient++.
	MinPayloadLength = LegacyMaxOutputLength
	// MaxPayloadLength is the longest plugin_output field accepted. It bounds
	// a connection's packet buffer at 64 KiB; no monitoring core takes longer
	// outputs through its command file anyway.
	MaxPayloadLength = 65536
	// MaxSize is the longest data packet, Overhead + MaxPayloadLength.
	MaxSize = Overhead + MaxPayloadLength
)

// Sentinel errors for packets that fail validation. Each names a reason an
// operator can act on; the daemon logs it with the peer address.
var (
	ErrVersion = errors.New("packet: bad version (wrong password or encryption method?)")
	// ErrCRC follows a version that decrypted right, which a wrong
	// password or method passes once in 65,536 packets: a packet size
	// that payload_length does not accept (NSClient++'s 8192) or a
	// damaged packet is far likelier.
	ErrCRC  = errors.New("packet: bad crc32 (a packet size payload_length does not accept, or a damaged packet?)")
	ErrSize = errors.New("packet: size outside 720..65744 bytes")
)

// OutputLength returns the plugin_output field length (the payload length)
// of a packet of n bytes.
func OutputLength(n int) int { return n - Overhead }

// SizeOf returns the packet size for a payload length.
func SizeOf(payload int) int { return Overhead + payload }

// ValidSize reports whether n is the size of a packet whose payload length
// lies in MinPayloadLength..MaxPayloadLength (720 and 4304 among them).
func ValidSize(n int) bool { return n >= SizeOf(MinPayloadLength) && n <= MaxSize }

// zeroCRC stands in for the CRC field while the CRC is computed; shared
// and never written, because a local array passed to crc32.Update escapes
// to the heap: an allocation per packet.
var zeroCRC [4]byte

// CRC computes the packet checksum send_nsca sends: CRC-32 (IEEE) over the
// whole packet with the crc field taken as zero. The packet is not modified.
func CRC(pkt []byte) uint32 {
	c := crc32.Update(0, crc32.IEEETable, pkt[:offCRC])
	c = crc32.Update(c, crc32.IEEETable, zeroCRC[:])
	return crc32.Update(c, crc32.IEEETable, pkt[offCRC+4:])
}

// Valid reports whether a decrypted packet of a valid size has version 3 and
// a matching CRC. It is Check without the error, for the probe that decides
// the packet size of every connection.
func Valid(pkt []byte) bool {
	return ValidSize(len(pkt)) &&
		int16(binary.BigEndian.Uint16(pkt[offVersion:])) == Version &&
		binary.BigEndian.Uint32(pkt[offCRC:]) == CRC(pkt)
}

// Check verifies size, version and CRC of a decrypted packet.
func Check(pkt []byte) error {
	if !ValidSize(len(pkt)) {
		return fmt.Errorf("%w: %d", ErrSize, len(pkt))
	}
	if v := int16(binary.BigEndian.Uint16(pkt[offVersion:])); v != Version {
		return fmt.Errorf("%w: got %d", ErrVersion, v)
	}
	if want, got := binary.BigEndian.Uint32(pkt[offCRC:]), CRC(pkt); want != got {
		return fmt.Errorf("%w: packet says %08x, computed %08x", ErrCRC, want, got)
	}
	return nil
}

// Result is one check result as carried by a data packet, with the fields
// cut the way stock nsca cuts them: at the first NUL, and host and service
// also at the first newline.
type Result struct {
	Timestamp  uint32
	ReturnCode int16
	Host       string
	Service    string // empty for a host check
	Output     string // raw, not yet escaped
}

// Decode extracts the fields of a packet that passed Check.
func Decode(pkt []byte) Result {
	out := OutputLength(len(pkt))
	return Result{
		Timestamp:  binary.BigEndian.Uint32(pkt[offTimestamp:]),
		ReturnCode: int16(binary.BigEndian.Uint16(pkt[offReturn:])),
		Host:       cutLine(cString(pkt[offHost : offHost+MaxHostLength-1])),
		Service:    cutLine(cString(pkt[offService : offService+MaxServiceLength-1])),
		Output:     string(cStringBytes(pkt[offOutput : offOutput+out-1])),
	}
}

// cString returns the bytes before the first NUL, as a string. The field is
// passed without its last byte, which stock always overwrites with NUL.
func cString(b []byte) string { return string(cStringBytes(b)) }

func cStringBytes(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// cutLine keeps what precedes the first newline: stock does this to host and
// service so that a client cannot inject a second external command.
func cutLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// Encode writes r into pkt (of a valid size) as send_nsca does: fields at
// their offsets, NUL-terminated and truncated to fit, then the CRC. Bytes
// after each NUL are left as they are, so a caller that fills pkt with
// random bytes first gets send_nsca's noise.
func Encode(pkt []byte, r Result) {
	binary.BigEndian.PutUint16(pkt[offVersion:], Version)
	binary.BigEndian.PutUint32(pkt[offCRC:], 0)
	binary.BigEndian.PutUint32(pkt[offTimestamp:], r.Timestamp)
	binary.BigEndian.PutUint16(pkt[offReturn:], uint16(r.ReturnCode))
	putCString(pkt[offHost:offHost+MaxHostLength], r.Host)
	putCString(pkt[offService:offService+MaxServiceLength], r.Service)
	putCString(pkt[offOutput:offOutput+OutputLength(len(pkt))], r.Output)
	binary.BigEndian.PutUint32(pkt[offCRC:], CRC(pkt))
}

func putCString(field []byte, s string) {
	n := copy(field[:len(field)-1], s)
	field[n] = 0
}

// InitPacket fills dst (InitSize bytes) with iv and the big-endian timestamp.
func InitPacket(dst, iv []byte, now uint32) {
	copy(dst[:IVSize], iv)
	binary.BigEndian.PutUint32(dst[IVSize:], now)
}

// XOR applies NSCA's XOR "encryption" to buf, which starts at byte offset
// of a packet: byte i of the packet is XORed with iv[i%128] and then with
// password[i%len(password)]. The stream restarts at every packet, so offset
// lets a caller handle a packet in pieces. XOR is its own inverse.
func XOR(buf, iv, password []byte, offset int) {
	NewXORKey(password).Apply(buf, iv, offset)
}

// XORKey is the password half of the XOR cipher, expanded once so that a
// packet is XORed a machine word (or vector) at a time instead of a byte at
// a time: the daemon keeps one for the life of its configuration.
type XORKey struct {
	period int
	stream []byte // the password repeated to cover any packet at any phase
}

// NewXORKey expands password for Apply.
func NewXORKey(password []byte) *XORKey {
	k := &XORKey{period: len(password)}
	if k.period > 0 {
		k.stream = make([]byte, Size+k.period)
		for i := range k.stream {
			k.stream[i] = password[i%k.period]
		}
	}
	return k
}

// Apply XORs buf, at offset within its packet, with iv and the password.
func (k *XORKey) Apply(buf, iv []byte, offset int) {
	for done := 0; done < len(buf); {
		phase := (offset + done) % IVSize
		n := min(IVSize-phase, len(buf)-done)
		subtle.XORBytes(buf[done:done+n], buf[done:done+n], iv[phase:phase+n])
		done += n
	}
	if k.period == 0 {
		return
	}
	for done := 0; done < len(buf); {
		phase := (offset + done) % k.period
		n := min(len(k.stream)-phase, len(buf)-done)
		subtle.XORBytes(buf[done:done+n], buf[done:done+n], k.stream[phase:phase+n])
		done += n
	}
}

// TimestampOf returns the timestamp field of a packet.
func TimestampOf(pkt []byte) uint32 { return binary.BigEndian.Uint32(pkt[offTimestamp:]) }
