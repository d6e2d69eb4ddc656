package validate

import (
	"nsca_fast/stages/intake"
)

// rule is one link of validation: check returns nil for a submission that
// may pass, else why not. The rules run in the order of rulesFor, the
// same for every front end, and the first refusal ends a submission's
// way: a new rule is its own file and one row below.
type rule struct {
	// name names the rule in tests.
	name string
	// on says whether the configuration enables it; nil: always.
	on func(Config) bool
	// check decides; it may keep per-source state (Source.Checks).
	check func(v *validator, s *intake.Submission) *intake.Refusal
	// summary is how the log's summary line says what refused sources
	// did, per reason.
	summary string
	// counted, when set, counts a refusal further (by identity).
	counted func(v *validator, s *intake.Submission)
}

// rules are every rule, in the order they run: what closes a connection
// first (as stock checks the timestamp before anything else), then the
// names a core must be able to hold, then who may submit what, and last
// the DNS lookup of strict_mode_spoofing, the only costly one; last,
// whether what passed can be delivered now, for clients that wait for
// the answer.
var rules = []rule{
	formRule,
	ageRule,
	checksRule,
	namesRule,
	authorizeRule,
	spoofRule,
	deliverableRule,
}

// rulesFor is the rules cfg enables, in order.
func rulesFor(cfg Config) []rule {
	var out []rule
	for _, r := range rules {
		if r.on == nil || r.on(cfg) {
			out = append(out, r)
		}
	}
	return out
}

// formRule is the front end's own refusal (Submission.Malformed): what
// its wire format could not carry, in order with the rest.
var formRule = rule{
	name:    "form",
	summary: "failed decryption",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		return s.Malformed
	},
}
