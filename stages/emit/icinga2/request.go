package icinga2

import (
	"encoding/json"
	"strings"

	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/codec"
)

// icingaRequest is the body of a process-check-result request. The object
// is named in the body ("host", or "service" as host!service: the
// parameters Icinga 2.13 documents for naming one object), which Icinga
// looks up directly; a "filter" would be evaluated against every object.
type icingaRequest struct {
	Type         string `json:"type"`
	Host         string `json:"host,omitempty"`
	Service      string `json:"service,omitempty"`
	ExitStatus   int    `json:"exit_status"`
	PluginOutput string `json:"plugin_output"`
	// PerformanceData is always sent, [] when empty: what Icinga stores
	// for a plugin that printed none (a null would be stored as null).
	PerformanceData []string `json:"performance_data"`
	CheckSource     string   `json:"check_source,omitempty"`
	ExecutionStart  int64    `json:"execution_start,omitempty"`
	ExecutionEnd    int64    `json:"execution_end,omitempty"`
	// Verbose makes Icinga say why a request found no object: an unknown
	// object, or an ApiUser lacking the permission, which Icinga also
	// answers with 404 and which must not drop results.
	Verbose bool `json:"verbose"`
}

// requestBody returns the JSON body posted to
// /v1/actions/process-check-result for it; the URL has no query part.
//
// What NSCA carries is mapped onto what Icinga accepts:
//   - The output is split as Icinga 2 (2.13 to 2.15) splits what a plugin
//     of an active check printed (PluginCheckTask, then PluginUtility's
//     ParseCheckOutput and SplitPerfdata), so that a passive result reads
//     back as the active check of the same bytes would: see
//     splitPluginOutput and splitPerfdata.
//   - A service's return code outside 0..3 becomes 3 (UNKNOWN), as Icinga
//     would read it anyway. A host's 0 stays 0 (UP) and everything else
//     becomes 1 (DOWN): Icinga refuses other host codes, and 2
//     (UNREACHABLE for a Nagios passive host check) and 3 (a plugin's
//     UNKNOWN) are not UP.
//   - execution_start and execution_end are it.Time, the receipt time,
//     which is the time the command file path gives Icinga too; the
//     client's own clock may be off. Icinga ignores (with a 200) a result
//     older than the object's last one, so two results for one object in
//     the same second both count only because they are posted in order.
//     A zero Time leaves them out and Icinga uses its own time.
//   - check_source is checkSource, left out when empty.
func requestBody(it sink.Item, checkSource string) []byte {
	r := it.Result
	req := icingaRequest{CheckSource: checkSource, Verbose: true}
	req.PluginOutput, req.PerformanceData = splitPluginOutput(r.Output)
	if r.Service == "" {
		req.Type, req.Host = "Host", r.Host
		if r.ReturnCode != 0 {
			req.ExitStatus = 1
		}
	} else {
		req.Type, req.Service = "Service", r.Host+"!"+r.Service
		req.ExitStatus = int(r.ReturnCode)
		if req.ExitStatus < 0 || req.ExitStatus > 3 {
			req.ExitStatus = 3
		}
	}
	if it.Time > 0 {
		req.ExecutionStart, req.ExecutionEnd = it.Time, it.Time
	}
	// Marshal cannot fail on this type. JSON text is Unicode: bytes of the
	// output that are not UTF-8 (a Latin-1 plugin) become U+FFFD.
	b, _ := json.Marshal(req)
	return b
}

// icingaSpace is what boost's trim functions, which Icinga uses, take for
// blanks: isspace in the C locale.
const icingaSpace = " \t\n\v\f\r"

// splitPluginOutput splits raw plugin output into plugin_output and the
// performance data items the way Icinga 2 splits an active check's:
//   - The output loses its leading and trailing blanks.
//   - It is cut into lines at every CR and every LF (so CRLF makes an
//     empty line between the two).
//   - A line with a `|` followed somewhere by a `=` gives the text before
//     the `|` (blanks before it kept) to the output and the rest to the
//     performance data, joined with a space; any other line, `|` and all,
//     is output. Nagios's rule that a `|` after the first line starts
//     performance data that runs to the end does not apply.
//   - Lines are joined with LF, but an empty line is dropped as long as the
//     output is still empty (leading empty text).
//
// Then the performance data loses its leading and trailing blanks and is
// split by splitPerfdata.
func splitPluginOutput(out string) (text string, perf []string) {
	out = strings.Trim(out, icingaSpace)
	var tb, pb strings.Builder
	rest := out
	for {
		end := strings.IndexAny(rest, "\r\n")
		line := rest
		if end >= 0 {
			line = rest[:end]
		}
		if tb.Len() > 0 {
			tb.WriteByte('\n')
		}
		if bar := strings.IndexByte(line, '|'); bar >= 0 && strings.IndexByte(line[bar:], '=') >= 0 {
			tb.WriteString(line[:bar])
			if pb.Len() > 0 {
				pb.WriteByte(' ')
			}
			pb.WriteString(line[bar+1:])
		} else {
			tb.WriteString(line)
		}
		if end < 0 {
			break
		}
		rest = rest[end+1:]
	}
	return tb.String(), splitPerfdata(strings.Trim(pb.String(), icingaSpace))
}

// splitPerfdata splits performance data into items as Icinga 2 does
// (never nil, so that an empty list is sent as []):
//   - Each item is a label up to the next `=` (leading blanks trimmed), and
//     a value from there to the next space. A label quoted with single
//     quotes loses them, and gets them back if it holds a space.
//   - Text without a `=` is no item of its own: it becomes the start of
//     the next item's label (`foo a=1` is the one item `'foo a'=1`), or is
//     dropped at the end.
//   - A label with `::` (check_multi's `check::label`) sets a prefix that
//     the labels after it without `::` get, up to the next label with one.
func splitPerfdata(p string) []string {
	out := []string{}
	prefix := ""
	for begin := 0; begin < len(p); {
		eq := strings.IndexByte(p[begin:], '=')
		if eq < 0 {
			break
		}
		eq += begin
		label := strings.TrimLeft(p[begin:eq], icingaSpace)
		if len(label) > 2 && label[0] == '\'' && label[len(label)-1] == '\'' {
			label = label[1 : len(label)-1]
		}
		multi := strings.LastIndex(label, "::")
		if multi >= 0 {
			prefix = ""
		}
		sp := strings.IndexByte(p[eq:], ' ')
		if sp < 0 {
			sp = len(p)
		} else {
			sp += eq
		}
		value := p[eq+1 : sp]
		if prefix != "" {
			label = prefix + "::" + label
		}
		if strings.IndexByte(label, ' ') >= 0 {
			out = append(out, "'"+label+"'="+value)
		} else {
			out = append(out, label+"="+value)
		}
		if multi >= 0 {
			prefix = label[:multi]
		}
		begin = sp + 1
	}
	return out
}

// objectName is the name Icinga gives the object r is for.
func objectName(r codec.Result) string {
	if r.Service == "" {
		return r.Host
	}
	return r.Host + "!" + r.Service
}
