package sink

import (
	"strconv"
	"sync/atomic"
	"time"

	"nsca_fast/stages/emit/dialect"
)

// countLossy adds n results delivered in a lossy form to c, if any.
func countLossy(c *atomic.Uint64, n int) {
	if c != nil && n > 0 {
		c.Add(uint64(n))
	}
}

// AppendCommand appends the external command line for it, newline
// included, in stock's escaping (the nagios dialect).
func AppendCommand(b []byte, it Item) []byte {
	b, _ = AppendCommandIn(b, it, dialect.Nagios)
	return b
}

// AppendCommandIn appends the external command line for it, newline
// included, with the output escaped in dialect d; lossy reports that the
// core cannot store this output exactly (see package dialect). An item
// that is a command (Item.Command) is written verbatim after its
// timestamp: validation made sure it holds no control character, and its
// arguments have no escaping of their own that a dialect could apply.
func AppendCommandIn(b []byte, it Item, d dialect.Dialect) (out []byte, lossy bool) {
	b = append(b, '[')
	b = strconv.AppendInt(b, it.Time, 10)
	if it.IsCommand() {
		b = append(b, "] "...)
		b = append(b, it.Command...)
		return append(b, '\n'), false
	}
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
	b, lossy = d.AppendCommand(b, r.Output, r.Service == "")
	return append(b, '\n'), lossy
}

// ctimeLayout is C's ctime(3) format; "_2" pads the day with a space as
// ctime's %3d does.
const ctimeLayout = "Mon Jan _2 15:04:05 2006"

// AppendSpool appends the content of a check_result_path file for it, in
// stock's escaping (the nagios dialect).
func AppendSpool(b []byte, it Item) []byte {
	b, _ = AppendSpoolIn(b, it, dialect.Nagios)
	return b
}

// AppendSpoolIn appends the content of a check_result_path file for it
// with the output escaped in dialect d; lossy is as for AppendCommandIn.
func AppendSpoolIn(b []byte, it Item, d dialect.Dialect) (out []byte, lossy bool) {
	var tb [20]byte // on the stack: a spool file costs no allocation here
	t := strconv.AppendInt(tb[:0], it.Time, 10)
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
	b, lossy = d.AppendSpool(b, r.Output)
	return append(b, "\n\n"...), lossy
}
