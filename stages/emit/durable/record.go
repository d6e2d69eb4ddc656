package durable

import (
	"encoding/binary"
	"errors"
	"fmt"

	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/codec"
)

// errRecord wraps a durable queue record that does not decode: its
// checksums held, so it was written so (by a later version of the format,
// or a bug), and it is skipped and counted as corrupt.
var errRecord = errors.New("sink: durable queue: bad record")

// recordVersion is the first byte of every record: a later encoding gets
// another, and a daemon reading a queue written by the other version
// tells them apart.
const recordVersion = 1

// AppendRecord encodes it compactly for the durable queue: the version,
// then as unsigned varints the receive time, the client's timestamp and
// the return code (zig-zag), the lengths of host and service, then host,
// service and output, the output running to the end of the record. A
// typical result costs its text plus about 12 bytes.
func AppendRecord(b []byte, it sink.Item) []byte {
	r := it.Result
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(it.Time))
	b = binary.AppendUvarint(b, uint64(r.Timestamp))
	b = binary.AppendVarint(b, int64(r.ReturnCode))
	b = binary.AppendUvarint(b, uint64(len(r.Host)))
	b = binary.AppendUvarint(b, uint64(len(r.Service)))
	b = append(b, r.Host...)
	b = append(b, r.Service...)
	return append(b, r.Output...)
}

// DecodeRecord is AppendRecord's inverse. The strings are copied out of
// data, which belongs to the queue.
func DecodeRecord(data []byte) (sink.Item, error) {
	if len(data) == 0 || data[0] != recordVersion {
		return sink.Item{}, fmt.Errorf("%w: unknown version", errRecord)
	}
	p := data[1:]
	var vals [5]uint64
	for i := range vals {
		var n int
		if i == 2 {
			var v int64
			v, n = binary.Varint(p)
			vals[i] = uint64(v)
		} else {
			vals[i], n = binary.Uvarint(p)
		}
		if n <= 0 {
			return sink.Item{}, fmt.Errorf("%w: truncated header", errRecord)
		}
		p = p[n:]
	}
	hostLen, svcLen := vals[3], vals[4]
	code := int64(vals[2])
	if hostLen > uint64(len(p)) || svcLen > uint64(len(p))-hostLen || code != int64(int16(code)) ||
		vals[1] > 1<<32-1 || vals[0] > 1<<62 {
		return sink.Item{}, fmt.Errorf("%w: field out of range", errRecord)
	}
	rest := string(p) // one allocation for the three strings
	return sink.Item{
		Time: int64(vals[0]),
		Result: codec.Result{
			Timestamp:  uint32(vals[1]),
			ReturnCode: int16(code),
			Host:       rest[:hostLen],
			Service:    rest[hostLen : hostLen+svcLen],
			Output:     rest[hostLen+svcLen:],
		},
	}, nil
}
