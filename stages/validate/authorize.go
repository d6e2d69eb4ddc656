package validate

import (
	"errors"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/intake"
)

var errUnauthorized = errors.New("validate: not authorized")

// authorizeRule is identities_file's rights, the one authorization of
// every front end: a source with an identity may submit what its hosts,
// services and commands patterns allow (conf/identities decides, on the
// parsed names); one without may submit any check result and no other
// command. Refused like a spoofed host: the submission, not the
// connection.
var authorizeRule = rule{
	name:    "authorize",
	summary: "sent results outside their identity's rights",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		if allowed(s) {
			return nil
		}
		return &intake.Refusal{Reason: counters.DropUnauthorized, Err: unauthorized(s)}
	},
	counted: func(v *validator, s *intake.Submission) {
		if id := s.Source.Identity; id != nil {
			v.stats.IdentityRefused(id.Name).Add(1)
		}
	},
}

// allowed says whether s's source may submit it.
func allowed(s *intake.Submission) bool {
	id := s.Source.Identity
	if s.Kind == intake.KindCommand {
		return id != nil && id.AllowsCommand(s.Command)
	}
	if id == nil {
		return true
	}
	r := s.Result
	// Commands patterns see the output as the command file holds it;
	// hosts and services patterns do not look at it, so it is rendered
	// only for an identity that has commands patterns.
	var out []byte
	if len(id.Commands) > 0 {
		out, _ = dialect.Nagios.AppendCommand(nil, r.Output, r.Service == "")
	}
	return id.AllowsResult(r.Host, r.Service, r.ReturnCode, string(out))
}

func unauthorized(s *intake.Submission) error {
	id := s.Source.Identity
	if id == nil {
		return errorf(errUnauthorized, "no identity may submit commands other than check results: %s", quoted(s.Command))
	}
	if s.Kind == intake.KindCommand {
		return errorf(errUnauthorized, "identity %q (%s) may not submit the command %s", id.Name, id.Where, quoted(s.Command))
	}
	return errorf(errUnauthorized, "identity %q (%s) may not submit results for host %s service %s", id.Name, id.Where, quoted(s.Result.Host), quoted(s.Result.Service))
}
