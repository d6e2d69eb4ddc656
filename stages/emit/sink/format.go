package sink

import (
	"strconv"
	"time"
)

// appendEscaped appends s with backslash and newline escaped as stock does
// (`\` to `\\`, newline to `\n`), which is the inverse of what the core
// applies when it reads the command file or a spool file.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}

// AppendCommand appends the external command line for it, newline included.
func AppendCommand(b []byte, it Item) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, it.Time, 10)
	r := it.Result
	if r.Service == "" {
		b = append(b, "] PROCESS_HOST_CHECK_RESULT;"...)
		b = append(b, r.Host...)
	} else {
		b = append(b, "] PROCESS_SERVICE_CHECK_RESULT;"...)
		b = append(b, r.Host...)
		b = append(b, ';')
		b = append(b, r.Service...)
	}
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(r.ReturnCode), 10)
	b = append(b, ';')
	b = appendEscaped(b, r.Output)
	return append(b, '\n')
}

// ctimeLayout is C's ctime(3) format; "_2" pads the day with a space as
// ctime's %3d does.
const ctimeLayout = "Mon Jan _2 15:04:05 2006"

// AppendSpool appends the content of a check_result_path file for it.
func AppendSpool(b []byte, it Item) []byte {
	t := strconv.AppendInt(nil, it.Time, 10)
	r := it.Result
	b = append(b, "### NSCA Passive Check Result ###\n# Time: "...)
	b = time.Unix(it.Time, 0).AppendFormat(b, ctimeLayout)
	b = append(b, "\nfile_time="...)
	b = append(b, t...)
	if r.Service == "" {
		b = append(b, "\n\n### Host Check Result ###\nhost_name="...)
		b = append(b, r.Host...)
	} else {
		b = append(b, "\n\n### Service Check Result ###\nhost_name="...)
		b = append(b, r.Host...)
		b = append(b, "\nservice_description="...)
		b = append(b, r.Service...)
	}
	b = append(b, "\ncheck_type=1\nscheduled_check=0\nreschedule_check=0\nlatency=0\nstart_time="...)
	b = append(b, t...)
	b = append(b, ".0\nfinish_time="...)
	b = append(b, t...)
	b = append(b, ".0\nreturn_code="...)
	b = strconv.AppendInt(b, int64(r.ReturnCode), 10)
	b = append(b, "\noutput="...)
	b = appendEscaped(b, r.Output)
	return append(b, "\n\n"...)
}
