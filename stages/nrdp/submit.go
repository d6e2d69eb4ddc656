package nrdp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

// collector is a request's intake.Outcomes: validation tells it, in the
// order they were sent, what became of each submission; the handler
// waits on done for the last one.
type collector struct {
	mu      sync.Mutex
	sent    []int // the request index of each submission sent, in order
	heard   int   // outcomes so far
	taken   int
	refused []refusedCheck // validation's refusals and the handler's own
	sending bool           // more may be sent
	done    chan struct{}  // closed once every sent submission has its outcome
}

func newCollector(n int) *collector {
	return &collector{sent: make([]int, 0, n), sending: true, done: make(chan struct{})}
}

// Taken counts a submission validation put on the emit stage's queue.
func (c *collector) Taken(*intake.Submission) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heard++
	c.taken++
	c.finish()
}

// Refused records a submission validation refused, and why.
func (c *collector) Refused(sub *intake.Submission, r intake.Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx := -1
	if c.heard < len(c.sent) {
		idx = c.sent[c.heard]
	}
	c.heard++
	c.refused = append(c.refused, refusal(idx, sub, r.Reason, r.Err))
	c.finish()
}

// refusal describes a refused submission for the answer.
func refusal(idx int, sub *intake.Submission, reason string, err error) refusedCheck {
	rc := refusedCheck{Index: idx, Host: sub.Result.Host, Service: sub.Result.Service, Reason: reason}
	if sub.Kind == intake.KindCommand {
		rc.Host = ""
	}
	if err != nil {
		rc.Error = err.Error()
		rc.noCommandSink = errors.Is(err, intake.ErrNoCommandSink)
	}
	return rc
}

// finish closes done when nothing more is to come; c.mu is held.
func (c *collector) finish() {
	if !c.sending && c.heard >= len(c.sent) {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
}

// send hands sub, the request's index-th, to validation, counted as
// received (unless ctx ended first, and then it says false).
func (c *collector) send(ctx context.Context, q *intake.Queue, stats *counters.Stats, index int, sub intake.Submission) bool {
	c.mu.Lock()
	c.sent = append(c.sent, index)
	c.mu.Unlock()
	stats.Received.Add(1)
	// stage.Send's select, which this package cannot import (see
	// Config.Log): the handler waits for room as long as ctx lets it.
	select {
	case q.C <- sub:
		return true
	case <-ctx.Done():
	}
	c.mu.Lock()
	c.sent = c.sent[:len(c.sent)-1]
	c.mu.Unlock()
	stats.Received.Add(^uint64(0))
	return false
}

// wait says nothing more will be sent and waits for the outcomes until
// ctx ends; false on timeout.
func (c *collector) wait(ctx context.Context) bool {
	c.mu.Lock()
	c.sending = false
	c.finish()
	c.mu.Unlock()
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// submitChecks parses the data, refuses what it cannot hand in (a state
// or time that is no number, a service result without its name), hands
// the rest to validation one after another and answers what became of
// each: NRDP's answer when all were taken, and which were refused and why
// otherwise.
func (s *Server) submitChecks(req *request, src *intake.Source) *response {
	f, data := formatXML, xmlData(req.f)
	if data == "" && jsonData(req.f) != "" {
		f, data = formatJSON, jsonData(req.f)
	}
	checks, err := parseChecks(f, data)
	if err != nil {
		msg, sentinel := msgBadXML, ErrBadXML
		if f == formatJSON {
			msg, sentinel = msgBadJSON, ErrBadJSON
		}
		s.warnf(req.peer.Addr().String(), "nrdp: %s: %v", src.Name(), err)
		return fail(http.StatusOK, msg, strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
	}
	c := newCollector(len(checks))
	src.Outcomes = c
	ctx, cancel := context.WithTimeout(req.r.Context(), s.cfg.Timeout)
	defer cancel()
	now := time.Now()
	unsent := 0
	for i := range checks {
		// A result this package cannot make whole goes to validation as
		// Malformed, which counts, logs and reports it in order.
		sub := submission(src, &checks[i], now)
		if !c.send(ctx, s.cfg.Queue, s.cfg.Stats, i, sub) {
			unsent = len(checks) - i
			break
		}
	}
	if !c.wait(ctx) || unsent > 0 {
		return s.busy(req, c, len(checks))
	}
	return checkAnswer(c)
}

// errBadCheck wraps why a result was refused before validation.
var errBadCheck = errors.New("nrdp: bad check result")

// submission makes check's submission; one that cannot be a result (no
// state 0..3, a time that is no number, a service result without its
// name) carries its refusal as Malformed.
func submission(src *intake.Source, c *check, now time.Time) intake.Submission {
	sub := intake.Submission{Source: src, Kind: intake.KindResult, ReadAt: now.UnixNano(), Time: now.Unix(),
		Result: codec.Result{Host: c.Host, Output: c.Output}}
	bad := func(reason string, err error) intake.Submission {
		sub.Malformed = &intake.Refusal{Reason: reason, Err: fmt.Errorf("%w: %v", errBadCheck, err)}
		return sub
	}
	if c.isService() {
		sub.Result.Service = c.Service
		if c.Service == "" {
			return bad(ReasonNoService, errors.New("type is service and servicename is empty"))
		}
	}
	code, err := c.state()
	if err != nil {
		return bad(ReasonBadState, err)
	}
	sub.Result.ReturnCode = code
	t, err := c.time()
	if err != nil {
		return bad(ReasonBadTime, err)
	}
	if t > 0 {
		// The check's own time: what the line carries, and what
		// max_packet_age bounds.
		sub.Time, sub.Sent, sub.HasSent = t, t, true
	}
	sub.Result.Timestamp = uint32(sub.Time)
	return sub
}

// checkAnswer is submitcheck's answer once every result has its outcome
// (validation's come in the order the results were sent):
// NRDP's own when none was refused; status 0 with the refusals listed when
// some were taken (what was taken is taken: a client that sent it all
// again would duplicate it); status -1 when every result was refused, so
// that send_nrdp.sh and NSClient++ say so.
func checkAnswer(c *collector) *response {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &response{code: http.StatusOK, status: 0, message: msgOK, hasMeta: true,
		output: strconv.Itoa(c.taken) + " checks processed", refused: append([]refusedCheck(nil), c.refused...)}
	if len(c.refused) > 0 {
		r.output += ", " + strconv.Itoa(len(c.refused)) + " refused"
		if c.taken == 0 {
			r.status, r.message = -1, msgRefused+": "+r.refused[0].Reason
		}
	}
	return r
}

// busy answers a request whose results the pipeline did not all take or
// refuse in time: 503, which a proxy and curl -f see as the server's
// trouble, so that send_nrdp.sh keeps the results to send again (those
// already taken then come twice, which a monitoring core shrugs off).
func (s *Server) busy(req *request, c *collector, n int) *response {
	r := checkAnswer(c)
	c.mu.Lock()
	pending := n - c.taken - len(c.refused)
	c.mu.Unlock()
	s.warnf(req.peer.Addr().String(), "nrdp: %s: %d of %d results not handed in or decided within nrdp_timeout (%v)",
		req.peer, pending, n, s.cfg.Timeout)
	r.code, r.status, r.message = http.StatusServiceUnavailable, -1, msgBusy
	r.output += ", " + strconv.Itoa(pending) + " not taken in time"
	req.w.Header().Set("Retry-After", "5")
	return r
}

// submitCommand hands submitcmd's command to validation, which matches it
// against the commands patterns of the token's identity: only such an
// identity's token may submit one.
func (s *Server) submitCommand(req *request, src *intake.Source) *response {
	cmd := strings.TrimRight(req.f.get("command"), "\r\n")
	switch {
	case cmd == "":
		return fail(http.StatusOK, msgNoCommand, "")
	case !s.commandsOn:
		return fail(http.StatusOK, msgCommandsDisabled, "no identity with a token has commands patterns")
	case src.Identity == nil || len(src.Identity.Commands) == 0:
		s.warnf(req.peer.Addr().String(), "nrdp: %s: refused a command: its token has no commands patterns", src.Name())
		return fail(http.StatusOK, msgDeniedToken, "")
	case strings.ContainsFunc(cmd, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fail(http.StatusOK, msgBadCommand, "a command is one line without control characters")
	}
	c := newCollector(1)
	src.Outcomes = c
	ctx, cancel := context.WithTimeout(req.r.Context(), s.cfg.Timeout)
	defer cancel()
	sub := intake.Submission{Source: src, Kind: intake.KindCommand, Command: cmd, Time: time.Now().Unix(), ReadAt: time.Now().UnixNano()}
	if !c.send(ctx, s.cfg.Queue, s.cfg.Stats, 0, sub) || !c.wait(ctx) {
		s.warnf(req.peer.Addr().String(), "nrdp: %s: a command not handed in or decided within nrdp_timeout (%v)", src.Name(), s.cfg.Timeout)
		req.w.Header().Set("Retry-After", "5")
		return fail(http.StatusServiceUnavailable, msgBusy, "the pipeline did not take the command in time")
	}
	c.mu.Lock()
	refused := append([]refusedCheck(nil), c.refused...)
	c.mu.Unlock()
	if len(refused) == 0 {
		// On the emit stage's queue, while a destination that writes
		// commands (command_file, the dump file) could take it.
		return &response{code: http.StatusOK, status: 0, message: msgOK}
	}
	switch r := refused[0]; {
	case r.Reason == counters.DropUnauthorized:
		return fail(http.StatusOK, msgDeniedToken, r.Error)
	case r.noCommandSink:
		return fail(http.StatusOK, msgNoCommandFile, "commands need command_file")
	}
	r := refused[0]
	return fail(http.StatusOK, msgRefused+": "+r.Reason, r.Error)
}
