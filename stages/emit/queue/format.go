package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// On-disk layout; see the package documentation.
const (
	segHeaderSize   = 16
	frameHeaderSize = 24
	ackSlotSize     = 32
	ackFileSize     = 2 * ackSlotSize
	segSuffix       = ".seg"
	ackName         = "ack"
	lockName        = "lock"
	segVersion      = 1
)

var (
	segMagic   = []byte("NSCAQSEG")
	frameMagic = []byte("NQRC")
	ackMagic   = []byte("NQAK")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// segName is the file name of segment id: zero-padded, so names sort as ids.
func segName(id uint64) string { return fmt.Sprintf("%020d%s", id, segSuffix) }

// parseSegName returns the id of a segment file name.
func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil
}

func appendSegHeader(b []byte) []byte {
	b = append(b, segMagic...)
	b = binary.LittleEndian.AppendUint32(b, segVersion)
	return binary.LittleEndian.AppendUint32(b, crc(b[len(b)-12:]))
}

func validSegHeader(b []byte) bool {
	return len(b) >= segHeaderSize && bytes.Equal(b[:8], segMagic) &&
		binary.LittleEndian.Uint32(b[8:]) == segVersion &&
		binary.LittleEndian.Uint32(b[12:]) == crc(b[:12])
}

func frameSize(data []byte) int64 { return int64(frameHeaderSize + len(data)) }

// appendFrame appends one record: header, then data.
func appendFrame(b, data []byte, unixNano int64) []byte {
	h := len(b)
	b = append(b, frameMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = binary.LittleEndian.AppendUint64(b, uint64(unixNano))
	b = binary.LittleEndian.AppendUint32(b, crc(data))
	b = binary.LittleEndian.AppendUint32(b, crc(b[h:h+20]))
	return append(b, data...)
}

// frameHeader is a decoded record header.
type frameHeader struct {
	length  int
	time    int64
	dataCRC uint32
}

// parseFrameHeader decodes a record header, checking its magic, its own
// checksum and the length bound.
func parseFrameHeader(b []byte) (frameHeader, bool) {
	if len(b) < frameHeaderSize || !bytes.Equal(b[:4], frameMagic) ||
		binary.LittleEndian.Uint32(b[20:]) != crc(b[:20]) {
		return frameHeader{}, false
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if n > MaxRecordBytes {
		return frameHeader{}, false
	}
	return frameHeader{
		length:  int(n),
		time:    int64(binary.LittleEndian.Uint64(b[8:])),
		dataCRC: binary.LittleEndian.Uint32(b[16:]),
	}, true
}

// ackPos is a persisted acknowledged position: the first unacknowledged
// byte is at off in segment seg.
type ackPos struct {
	counter uint64 // which write of the ack file: the higher valid slot wins
	seg     uint64
	off     int64
}

func encodeAck(b *[ackSlotSize]byte, p ackPos) {
	copy(b[:4], ackMagic)
	binary.LittleEndian.PutUint64(b[4:], p.counter)
	binary.LittleEndian.PutUint64(b[12:], p.seg)
	binary.LittleEndian.PutUint64(b[20:], uint64(p.off))
	binary.LittleEndian.PutUint32(b[28:], crc(b[:28]))
}

func decodeAck(b []byte) (ackPos, bool) {
	if len(b) < ackSlotSize || !bytes.Equal(b[:4], ackMagic) ||
		binary.LittleEndian.Uint32(b[28:]) != crc(b[:28]) {
		return ackPos{}, false
	}
	p := ackPos{
		counter: binary.LittleEndian.Uint64(b[4:]),
		seg:     binary.LittleEndian.Uint64(b[12:]),
		off:     int64(binary.LittleEndian.Uint64(b[20:])),
	}
	return p, p.off >= 0
}

// bestAck picks the valid slot written last from an ack file's contents.
func bestAck(b []byte) (ackPos, bool) {
	var best ackPos
	found := false
	for i := 0; i+ackSlotSize <= len(b) && i < ackFileSize; i += ackSlotSize {
		if p, ok := decodeAck(b[i:]); ok && (!found || p.counter > best.counter) {
			best, found = p, true
		}
	}
	return best, found
}

// Scanner event kinds.
const (
	evEnd = iota
	evRecord
	evDamage
)

// event is what a scanner found next: a record, or a damaged region
// [start, end) skipped; badData: the region is one record whose header
// verified and whose data did not.
type event struct {
	kind       int
	data       []byte
	time       int64
	start, end int64
	badData    bool
}

// lost is what a damaged region cost: one record when its header
// verified, else unknown (-1).
func (e event) lost() int64 {
	if e.badData {
		return 1
	}
	return -1
}

// cause says what is wrong with a damaged region.
func (e event) cause() string {
	if e.badData {
		return "record checksum failed"
	}
	return "no valid record (torn, cut short or overwritten)"
}

// Chunk sizes of reads.
const (
	readChunk   = 256 << 10
	resyncChunk = 64 << 10
)

// scanner walks the records of one segment file from off to end. Damage
// is reported as a region: a record whose data checksum fails is skipped
// by its (checked) length; a header that does not verify, or a record cut
// off by the end, is skipped up to the next offset holding a valid header
// whose record fits before end (or to end).
type scanner struct {
	f      io.ReaderAt
	off    int64 // next position
	end    int64 // end of the readable region
	buf    []byte
	bufOff int64
	// fresh makes every read go to a newly allocated buffer, so record
	// data returned earlier is never overwritten.
	fresh bool
}

// window returns the buffered bytes from s.off, reading so that at least
// min(need, end-off) bytes are there. Fewer come back if the file is
// shorter than end: then end shrinks to the file's real end.
func (s *scanner) window(need int64) ([]byte, error) {
	if s.off >= s.bufOff && s.off+need <= s.bufOff+int64(len(s.buf)) {
		return s.buf[s.off-s.bufOff:], nil
	}
	if s.off >= s.bufOff && s.bufOff+int64(len(s.buf)) >= s.end && s.off <= s.bufOff+int64(len(s.buf)) {
		return s.buf[s.off-s.bufOff:], nil // all there is
	}
	n := min(max(need, readChunk), s.end-s.off)
	var b []byte
	if !s.fresh && int64(cap(s.buf)) >= n {
		b = s.buf[:n]
	} else {
		b = make([]byte, n)
	}
	m, err := s.f.ReadAt(b, s.off)
	if m < len(b) {
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		s.end = s.off + int64(m)
	}
	s.buf, s.bufOff = b[:m], s.off
	return s.buf, nil
}

// next returns the next record or damaged region and moves past it.
func (s *scanner) next() (event, error) {
	if s.off >= s.end {
		return event{kind: evEnd}, nil
	}
	start := s.off
	b, err := s.window(frameHeaderSize)
	if err != nil {
		return event{}, err
	}
	h, ok := parseFrameHeader(b)
	if !ok || start+frameSize(nil)+int64(h.length) > s.end {
		return s.damage(start, start+1)
	}
	size := int64(frameHeaderSize + h.length)
	if b, err = s.window(size); err != nil {
		return event{}, err
	}
	if int64(len(b)) < size { // the file is shorter than it was said to be
		return s.damage(start, start+1)
	}
	s.off = start + size
	data := b[frameHeaderSize:size:size]
	if crc(data) != h.dataCRC {
		return event{kind: evDamage, start: start, end: s.off, badData: true}, nil
	}
	return event{kind: evRecord, data: data, time: h.time, start: start, end: s.off}, nil
}

// damage reports the region from start to the next valid header at or
// after from.
func (s *scanner) damage(start, from int64) (event, error) {
	next, err := s.resync(from)
	if err != nil {
		return event{}, err
	}
	s.off = next
	return event{kind: evDamage, start: start, end: next}, nil
}

// resync returns the first offset at or after from that holds a valid
// record header whose record ends by s.end, or s.end.
func (s *scanner) resync(from int64) (int64, error) {
	buf := make([]byte, resyncChunk)
	for pos := from; pos < s.end; {
		n := min(int64(len(buf)), s.end-pos)
		m, err := s.f.ReadAt(buf[:n], pos)
		if int64(m) < n {
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			s.end = pos + int64(m)
		}
		b := buf[:m]
		last := pos+int64(m) >= s.end
		for i := 0; i < len(b); {
			j := bytes.Index(b[i:], frameMagic)
			if j < 0 {
				break
			}
			i += j
			if len(b)-i < frameHeaderSize && !last {
				break // read on from here
			}
			if h, ok := parseFrameHeader(b[i:]); ok && pos+int64(i)+frameSize(nil)+int64(h.length) <= s.end {
				return pos + int64(i), nil
			}
			i++
		}
		if last {
			break
		}
		// Keep an overlap so a header across the boundary is seen.
		pos += max(int64(m)-(frameHeaderSize-1), 1)
	}
	return s.end, nil
}
