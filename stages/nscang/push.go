package nscang

import (
	"errors"
	"strings"
	"time"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// push takes a pushed command to validation, which checks its names and
// rights as for every front end, and whether it can be delivered now; the
// session waits for the outcome before it answers and reads on. Results
// and other commands alike go on to the emit stage.
func (s *session) push(data []byte) {
	srv := s.w.srv
	s.state = stateReady
	srv.stats.Received.Add(1)
	cmd, err := ParseCommand(data)
	if err != nil {
		srv.stats.Dropped(dropBadCommand).Add(1)
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: refusing data from %s: %v: %q", s.who(), err, data)
		s.reply("FAIL " + strings.TrimPrefix(err.Error(), "nscang: "))
		return
	}
	sub := intake.Submission{Source: &s.src, Kind: intake.KindCommand, Command: cmd.Text, Time: cmd.Time}
	if !cmd.HasTime {
		sub.Time = time.Now().Unix()
	}
	if cmd.Result != nil {
		sub.Kind, sub.Result = intake.KindResult, *cmd.Result
	}
	s.handOn(func() bool { return stage.Send(s.w.ctx, srv.out, sub) })
}

// Taken is validation's word that what the session pushed is on the emit
// stage's queue, while a destination could take it.
func (s *session) Taken(*intake.Submission) { s.w.post(event{s: s, ack: true}) }

// Refused is validation's refusal of what the session pushed.
func (s *session) Refused(_ *intake.Submission, r intake.Refusal) {
	s.w.post(event{s: s, ack: true, err: r.Err, reason: r.Reason})
}

// handOn hands a pushed command on with hand, which blocks while the
// queue is full and reports whether the command was taken, and has the
// session wait for its outcome: one command at a time per session, which
// reads nothing meanwhile, so what sessions hold is bounded by
// nsca_ng_max_sessions times nsca_ng_max_command_size.
func (s *session) handOn(hand func() bool) {
	if !hand() {
		return
	}
	s.state = stateWait
	s.w.inflight++
}

// outcome answers the command the session waited for: OKAY, or FAIL
// with why (nsca-ng's own words for a refused right).
func (s *session) outcome(err error, reason string) {
	s.w.inflight--
	if s.ended {
		return
	}
	s.state = stateReady
	s.lastActive = time.Now()
	switch {
	case err == nil:
		s.reply(ReplyOkay)
	case errors.Is(err, intake.ErrNoCommandSink):
		s.reply("FAIL No command_file for commands other than check results")
	case reason == counters.DropUnauthorized:
		s.reply(FailUnauthorized)
	default:
		s.reply("FAIL " + failText(err))
	}
	s.drive()
}

// failText is an error as a FAIL line says it: without package prefixes,
// on one line.
func failText(err error) string {
	msg := err.Error()
	for _, p := range []string{"validate: ", "intake: ", "nscang: ", "emit: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
}
