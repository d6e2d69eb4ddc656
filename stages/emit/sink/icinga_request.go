package sink

import (
	"encoding/json"
	"strings"

	"nsca_fast/stages/codec"
)

// icingaRequest is the body of a process-check-result request. The object
// is named in the body ("host", or "service" as host!service: the
// parameters Icinga 2.13 documents for naming one object), which Icinga
// looks up directly; a "filter" would be evaluated against every object.
type icingaRequest struct {
	Type            string   `json:"type"`
	Host            string   `json:"host,omitempty"`
	Service         string   `json:"service,omitempty"`
	ExitStatus      int      `json:"exit_status"`
	PluginOutput    string   `json:"plugin_output"`
	PerformanceData []string `json:"performance_data,omitempty"`
	CheckSource     string   `json:"check_source,omitempty"`
	ExecutionStart  int64    `json:"execution_start,omitempty"`
	ExecutionEnd    int64    `json:"execution_end,omitempty"`
	// Verbose makes Icinga say why a request found no object: an unknown
	// object, or an ApiUser lacking the permission, which Icinga also
	// answers with 404 and which must not drop results.
	Verbose bool `json:"verbose"`
}

// IcingaRequest returns the JSON body posted to
// /v1/actions/process-check-result for it; the URL has no query part.
//
// What NSCA carries is mapped onto what Icinga accepts:
//   - The output is split as Nagios splits plugin output: the first line is
//     `text|perfdata`; the following lines are long output up to the first
//     line holding a `|`, whose text before the `|` is still long output
//     and whose rest, with every line after it, is more performance data.
//     plugin_output is the text (short output, then the long output lines,
//     trailing blanks of a text cut at `|` and trailing empty lines
//     removed); multi-line output stays multi-line.
//   - performance_data is the performance data split at blanks outside
//     single quotes, so `'my label'=1` stays one item as the plugin wrote
//     it; it is left out when empty.
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
func IcingaRequest(it Item, checkSource string) []byte {
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

// splitPluginOutput splits raw plugin output into Icinga's plugin_output
// and performance_data by Nagios's rule, see IcingaRequest.
func splitPluginOutput(out string) (text string, perf []string) {
	lines := strings.Split(out, "\n")
	var b strings.Builder
	var perfText []string
	inPerf := false
	for i, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if inPerf {
			perfText = append(perfText, line)
			continue
		}
		if j := strings.IndexByte(line, '|'); j >= 0 {
			perfText = append(perfText, line[j+1:])
			line = strings.TrimRight(line[:j], " \t")
			// Nagios: after the first line, a `|` starts performance data
			// that runs to the end of the output.
			inPerf = i > 0
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	text = strings.TrimRight(b.String(), "\n")
	return text, splitPerfdata(strings.Join(perfText, " "))
}

// splitPerfdata splits performance data at blanks outside single quotes.
// A quote inside a quoted label is written as two quotes, which toggle
// twice and so need no special case.
func splitPerfdata(s string) []string {
	var out []string
	start, quoted := -1, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case !quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
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
