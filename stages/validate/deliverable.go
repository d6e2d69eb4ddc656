package validate

import (
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

// deliverableRule refuses, to sources that answer their clients (nsca-ng's
// OKAY, NRDP's response), what the emit stage cannot deliver now: told
// FAIL, the client keeps it and sends it again; told OKAY, it would let go
// of what is then dropped. send_nsca's clients hear nothing either way, so
// their results go on to the sinks' own fallbacks and counters.
var deliverableRule = rule{
	name:    "deliverable",
	on:      func(c Config) bool { return c.Accepting != nil },
	summary: "were refused while a destination could not take them",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		ask := v.cfg.Accepting
		if s.Kind == intake.KindCommand {
			ask = v.cfg.AcceptingCommands
		}
		if s.Source.Outcomes == nil || !s.Source.Answers || ask == nil {
			return nil
		}
		if ok, err := ask(); !ok {
			// The emit stage's error says what cannot take it and why
			// (emit: cannot deliver now: destination local cannot take
			// results: ...: no space left on device) as it is.
			return &intake.Refusal{Reason: counters.DropDestinationDown, Err: err}
		}
		return nil
	},
}
