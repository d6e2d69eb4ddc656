package gearman

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"

	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/sink"
)

// gearmanSource is the result's `source`: mod_gearman's own senders put
// their program's name there (send_gearman, send_multi).
const gearmanSource = "nsca_fast"

// appendResult appends the result text mod_gearman's NEB module
// reads (get_results in neb_module_naemon/result_thread.c): key=value
// lines, each ending in a newline. The module stops reading at the first
// line with an empty value, so a host check has no service_description
// line and an empty host name no host_name line (the module then discards
// the job, as the core would reject the result); output comes last
// because the module takes it before that test, so an empty output is
// still the empty output the command file would give the core. The output
// is escaped as mod_gearman's senders escape it (gm_escape_newlines: `\`
// as `\\`, newline as `\n`). A newline in a host or service name, which
// would start a key of its own, is written as `\n` too. Times are the
// server's time of receipt, as for the command file, in mod_gearman's
// seconds.microseconds form (always six digits, which every version of
// mod_gearman's parser reads as microseconds).
func appendResult(b []byte, it sink.Item) []byte {
	return appendGearmanResultAt(b, it, it.Time*1e6)
}

// Stamps gives each result of one service a start_time later than the
// previous one's, by a microsecond if need be: mod_gearman hands a burst of
// results to the core newest first, and the core keeps the one with the
// latest time, so two results of one second must differ. A process keeps
// one for all its Gearman sinks (Gearman.Stamps), so that a reload's new
// sink goes on from the old one's times. The zero value is ready.
type Stamps struct {
	mu   sync.Mutex
	last map[gearmanObject]int64
}

type gearmanObject struct{ host, service string }

// next returns the time in microseconds to send it with: its receipt time,
// or just after the last one sent for its service.
func (s *Stamps) next(it sink.Item) int64 {
	us := it.Time * 1e6
	k := gearmanObject{it.Result.Host, it.Result.Service}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[gearmanObject]int64{}
	}
	if last, ok := s.last[k]; ok && us <= last {
		us = last + 1
	}
	s.last[k] = us
	return us
}

// appendGearmanResultAt is appendResult with start_time and
// finish_time at us microseconds.
func appendGearmanResultAt(b []byte, it sink.Item, us int64) []byte {
	r := it.Result
	b = append(b, "type=passive\n"...)
	if r.Host != "" {
		b = append(b, "host_name="...)
		b = appendName(b, r.Host)
		b = append(b, '\n')
	}
	if r.Service != "" {
		b = append(b, "service_description="...)
		b = appendName(b, r.Service)
		b = append(b, '\n')
	}
	b = append(b, "start_time="...)
	b = appendMicros(b, us)
	b = append(b, "\nfinish_time="...)
	b = appendMicros(b, us)
	b = append(b, "\nreturn_code="...)
	b = strconv.AppendInt(b, int64(r.ReturnCode), 10)
	b = append(b, "\nsource="+gearmanSource+"\noutput="...)
	b = appendEscaped(b, r.Output)
	return append(b, '\n')
}

// appendMicros appends us microseconds as seconds.micro, with six digits.
func appendMicros(b []byte, us int64) []byte {
	b = strconv.AppendInt(b, us/1e6, 10)
	frac := us % 1e6
	b = append(b, '.')
	for d := int64(1e5); d > 1 && frac < d; d /= 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, frac, 10)
}

// appendName appends a host or service name with its newlines as `\n`;
// backslashes stay, since the module and the core take names verbatim.
func appendName(b []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		b = append(b, '\\', 'n')
		s = s[i+1:]
	}
}

// Gearman binary protocol: a 12-byte header (magic, type, size, both
// big-endian) and the arguments separated by NULs.
const (
	gearmanHeaderLen   = 12
	gearmanSubmitJobBG = 18
	gearmanJobCreated  = 8
	gearmanError       = 19
	// gearmanMaxReply bounds a reply's size: JOB_CREATED and ERROR carry a
	// job handle or a message, never much.
	gearmanMaxReply = 64 << 10
)

var (
	gearmanReq = []byte("\x00REQ")
	gearmanRes = []byte("\x00RES")
)

// appendSubmitJobBG appends a SUBMIT_JOB_BG request.
func appendSubmitJobBG(b []byte, queue string, unique, body []byte) []byte {
	b = append(b, gearmanReq...)
	b = binary.BigEndian.AppendUint32(b, gearmanSubmitJobBG)
	b = binary.BigEndian.AppendUint32(b, uint32(len(queue)+1+len(unique)+1+len(body)))
	b = append(b, queue...)
	b = append(b, 0)
	b = append(b, unique...)
	b = append(b, 0)
	return append(b, body...)
}

// appendEscaped appends s with backslash and newline escaped as stock does
// (`\` to `\\`, newline to `\n`), which is the inverse of what Nagios
// applies when it reads the command file or a spool file. It is the nagios
// dialect, kept under this name for the formats that always use stock's
// escaping (mod_gearman's job body).
func appendEscaped(b []byte, s string) []byte {
	b, _ = dialect.Nagios.AppendCommand(b, s, false)
	return b
}
