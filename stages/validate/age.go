package validate

import (
	"errors"
	"fmt"
	"time"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

var errStale = errors.New("validate: stale packet")

// ageRule is max_packet_age: a submission whose client timestamp is
// further than that from now, either way, is refused, and a send_nsca
// connection closed, as stock closes it.
var ageRule = rule{
	name:    "age",
	on:      func(c Config) bool { return c.MaxPacketAge > 0 },
	summary: "sent packets older than max_packet_age",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		if !s.HasSent {
			return nil
		}
		age, limit := time.Now().Unix()-s.Sent, int64(v.cfg.MaxPacketAge/time.Second)
		if age <= limit && -age <= limit {
			return nil
		}
		return &intake.Refusal{Reason: counters.DropStale, Close: true,
			Err: errorf(errStale, "timestamp %d is %d s from now (max_packet_age=%v%s)", s.Sent, age, v.cfg.MaxPacketAge, began(s.Source))}
	},
}

// began says when a session began, for a protocol (send_nsca's) whose
// timestamps echo that time.
func began(src *intake.Source) string {
	if src.Began == 0 {
		return ""
	}
	return fmt.Sprintf(", connection began at %d", src.Began)
}
