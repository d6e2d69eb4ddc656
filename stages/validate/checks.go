package validate

import (
	"errors"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

var errTooManyChecks = errors.New("validate: too many checks on one connection")

// checksRule is max_checks_per_connection: past the source's MaxChecks
// results the connection is closed.
var checksRule = rule{
	name:    "checks",
	summary: "sent more than max_checks_per_connection checks",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		if s.Kind != intake.KindResult {
			return nil
		}
		src := s.Source
		src.Checks++
		if src.MaxChecks <= 0 || src.Checks <= src.MaxChecks {
			return nil
		}
		src.Checks-- // the log names the packet refused as the next one
		return &intake.Refusal{Reason: counters.DropTooManyChecks, Close: true,
			Err: errorf(errTooManyChecks, "max_checks_per_connection=%d", src.MaxChecks)}
	},
}
