package validate

import (
	"errors"
	"strconv"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

var errBadName = errors.New("validate: a name no core can hold")

// namesRule refuses a host or service name a core cannot hold: empty
// where one is needed, or with a ';' or a control character, which the
// command file would read as another field, another command or the
// name's end. Stock writes such names as they come; a ';' in a host name
// then sets another host's state. For a command other than a check
// result, the same bytes inside its text.
var namesRule = rule{
	name:    "names",
	summary: "sent names no core can hold",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		var why string
		switch s.Kind {
		case intake.KindCommand:
			why = badField("command", s.Command, identities.ControlByte)
		default:
			why = badField("host name", s.Result.Host, identities.UnsafeByte)
			if why == "" && s.Result.Service != "" {
				why = badField("service name", s.Result.Service, identities.UnsafeByte)
			}
		}
		if why == "" {
			return nil
		}
		return &intake.Refusal{Reason: counters.DropBadName, Err: errorf(errBadName, "%s", why)}
	},
}

// badField says what is wrong with a field that must not be empty, with
// unsafe finding the first byte it must not hold; "" when nothing is.
func badField(field, value string, unsafe func(string) int) string {
	if value == "" {
		return "empty " + field
	}
	if i := unsafe(value); i >= 0 {
		return field + " " + quoted(value) + " has " + quoted(value[i:i+1]) + " at byte " + strconv.Itoa(i)
	}
	return ""
}
