// Package intake is where every front end hands in what its clients
// submitted: send_nsca's packets once decoded, nsca-ng's pushed commands,
// NRDP's posted results. A front end owns its listener, its sessions and
// its wire format; what it hands on is a Submission from a Source, and
// from there every front end's submissions take one road: the validate
// stage's rules (stages/validate), then the emit stage. The package is a
// leaf: it knows no front end, no stage and no sink.
package intake

import (
	"errors"
	"net/netip"
	"strconv"
	"sync/atomic"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/codec"
)

// Kind is what a submission carries.
type Kind uint8

const (
	// KindResult is a host or service check result.
	KindResult Kind = iota
	// KindCommand is an external command other than a check result, as
	// nsca-ng and NRDP's submitcmd carry them.
	KindCommand
	// KindIncomplete is what a source ended with before a whole
	// submission had come (send_nsca's cut-off packet): nothing to write,
	// only to count in order with the source's other submissions.
	KindIncomplete
)

// Outcomes of a submission that front ends tell apart.
var (
	// ErrShutdown: the pipeline did not take it because it is being torn
	// down.
	ErrShutdown = errors.New("intake: the server is shutting down")
	// ErrNoCommandSink: an external command, where no destination can
	// write one (no command_file nor dump file).
	ErrNoCommandSink = errors.New("intake: no destination can write external commands")
)

// Front names a front end ("nsca", "nsca-ng", "nrdp"); each front end
// declares its own.
type Front string

// Submission is one thing a client submitted, on its way to validation.
type Submission struct {
	Source *Source
	Kind   Kind
	// Result is the check result of a KindResult, its output as the
	// client meant it (unescaped).
	Result codec.Result
	// Command is a KindCommand's text, without the bracketed timestamp
	// and the newline: ENABLE_SVC_NOTIFICATIONS;web01;disk.
	Command string
	// Time is the time (unix seconds) the written line will carry; 0
	// has validation stamp it when it passes the result on. That stamp
	// follows the order in which results reach the sinks: Icinga 2 drops
	// a result older than the service's last one, so a time taken earlier
	// (at read, in each connection's order) would lose results that one
	// connection's overtook another's.
	Time int64
	// Sent is the client's own timestamp, which max_packet_age bounds
	// when HasSent says the protocol carries one.
	Sent    int64
	HasSent bool
	// ReadAt is when its last byte was read (unix nanoseconds); 0 where
	// a front end does not measure it.
	ReadAt int64
	// Incomplete says, for a KindIncomplete, what was cut off.
	Incomplete *Incomplete
	// Malformed, when set, is the front end's own refusal of what its
	// wire format could not carry (send_nsca's bad CRC): validation
	// counts, logs and reports it in order with the source's other
	// submissions, as the first of its rules.
	Malformed *Refusal
}

// Incomplete describes a submission cut off by the end of its source.
type Incomplete struct {
	Got, Want int
	Why       string // how the source ended
}

// Refusal is why validation did not take a submission: the reason it is
// counted under (counters.Drop*), the error the client and the log are
// told, and whether the source must be closed, as stock closes a
// connection at a bad packet, rather than only that submission dropped.
type Refusal struct {
	Reason string
	Err    error
	Close  bool
}

// Outcomes is what a front end is told about its submissions, each once,
// from the validate stage's goroutine that owns the source (so calls for
// one source never overlap and keep its order). It must not block.
type Outcomes interface {
	// Taken is called once the submission is on the emit stage's queue.
	Taken(s *Submission)
	// Refused is called for a submission validation refused, after the
	// refusal was counted and logged; r.Close asks for the source's end.
	Refused(s *Submission, r Refusal)
}

// Source is one client connection, session or request: who sent the
// submissions it carries and what they may do. A front end makes one per
// connection (or per request) and fills it before its first submission;
// only Checks and the refusal mark change afterwards, from validation.
type Source struct {
	// ID keeps one source's submissions in order: validation is sharded
	// by it. Front ends keep theirs apart (see IDBase).
	ID    uint64
	Front Front
	// Peer is the client's address; Via the load balancer's, when Peer
	// came from a PROXY header.
	Peer, Via netip.AddrPort
	// Identity is whose rights its submissions need (identities_file);
	// nil: any host and service, and no other command.
	Identity *identities.Identity
	// Who names the source in log lines, as its protocol's tools do
	// (nsca-ng: identity@address (ID: session)); "" is Peer.
	Who string
	// LogPrefix starts validation's log lines about it, as the front
	// end's own lines start ("nsca-ng: "); send_nsca's have none.
	LogPrefix string
	// Began is when the session began (unix seconds) where the client's
	// timestamps echo it (send_nsca's init packet), for log lines; 0: not
	// said.
	Began int64
	// Stream says that a refusal asking to close (Refusal.Close) ends the
	// source: send_nsca's connection, which stock closes at a bad packet.
	// Other sources only have that submission refused.
	Stream bool
	// Answers says that the client waits to hear each submission's
	// outcome (nsca-ng's OKAY or FAIL, NRDP's response): what cannot be
	// delivered now is refused to it rather than acknowledged.
	Answers bool
	// MaxChecks closes the source after this many results (send_nsca's
	// max_checks_per_connection); 0: no cap.
	MaxChecks int
	// Outcomes hears of each submission's outcome; nil hears nothing.
	Outcomes Outcomes

	// Checks is how many results validation has counted from it; only
	// the validate goroutine that owns the source touches it.
	Checks int
	// refused is set when a refusal closed the source: what it still
	// sends is dropped as after a reject.
	refused atomic.Bool
}

// IDBase keeps the front ends' source IDs apart: the front end with index
// i numbers its sources from i<<60.
func IDBase(i int) uint64 { return uint64(i) << 60 }

// Name is how log lines name the source.
func (s *Source) Name() string {
	if s.Who != "" {
		return s.Who
	}
	return s.Peer.String()
}

// Closed says whether a refusal has closed the source.
func (s *Source) Closed() bool { return s.refused.Load() }

// Close marks the source closed by a refusal.
func (s *Source) Close() { s.refused.Store(true) }

// Printable is text a client chose (a session id, an identity's name) as
// a log line may show it: as it is when every rune is printable, else
// quoted with the rest escaped, so that no client writes a line of its
// own or a terminal's escape sequence into the log.
func Printable(s string) string {
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
