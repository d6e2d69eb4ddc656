package counters

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// The exposition is Prometheus's text format: one HELP and TYPE per family
// before all its samples, label values quoted and escaped, and samples of a
// family together even when they were given interleaved with others.
func TestMetricsExposition(t *testing.T) {
	snap := Snapshot{
		Connections: 7, Open: 2,
		Emitted: map[string]uint64{"fifo": 5, "spool": 1},
		Dropped: map[string]uint64{`we"ird\name`: 3},
		Queues:  map[string]int64{"read_to_decrypt": 4},
	}
	rec := httptest.NewRecorder()
	MetricsHandler(func() Snapshot { return snap }, "xor").ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	text := rec.Body.String()
	for _, want := range []string{
		"# TYPE nsca_connections_total counter\nnsca_connections_total 7\n",
		"# TYPE nsca_connections_open gauge\nnsca_connections_open 2\n",
		"# TYPE nsca_results_emitted_total counter\nnsca_results_emitted_total{sink=\"fifo\"} 5\nnsca_results_emitted_total{sink=\"spool\"} 1\n",
		`nsca_results_dropped_total{reason="we\"ird\\name"} 3` + "\n",
		`nsca_queue_depth{queue="read_to_decrypt"} 4` + "\n",
		`nsca_decrypt_seconds_total{method="xor"} 0` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	seen := map[string]bool{}
	family := ""
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family = strings.Fields(name)[0]
			if seen[family] {
				t.Errorf("family %s has a second TYPE line", family)
			}
			seen[family] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if name := strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]; name != family {
			t.Errorf("sample %q outside its family (under %s)", line, family)
		}
	}
	// Interleaved samples still come out grouped.
	var e exposition
	a, b := desc("a_total", "A."), desc("b", "B.", "k")
	e.sample(a, "counter", 1, nil)
	e.sample(b, "gauge", 2, []string{"x"})
	e.sample(a, "counter", 3, nil)
	want := "# HELP nsca_a_total A.\n# TYPE nsca_a_total counter\nnsca_a_total 1\nnsca_a_total 3\n# HELP nsca_b B.\n# TYPE nsca_b gauge\nnsca_b{k=\"x\"} 2\n"
	if got := string(e.bytes()); got != want {
		t.Errorf("interleaved:\n%s\nwant:\n%s", got, want)
	}
}
