package counters

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// Queue damage shows in the statistics line once there is any, summed over
// workers, and not before (the line stays what its parsers know).
func TestLineQueueDamage(t *testing.T) {
	var s Snapshot
	s.Add(Snapshot{Durable: map[string]DurableQueue{"icinga2": {Results: 3}}})
	if line := s.Line(s, 0); strings.Contains(line, "queue_lost") {
		t.Errorf("no damage, yet: %s", line)
	}
	s.Add(Snapshot{Durable: map[string]DurableQueue{"icinga2": {Lost: 100, LostUnknown: 1}, "gearman": {Lost: 2}}})
	s.Add(Snapshot{Durable: map[string]DurableQueue{"icinga2": {Lost: 5}}})
	line := s.Line(s, 0)
	if !strings.HasSuffix(line, ", queue_lost{gearman=2,icinga2=105}, queue_lost_unknown{icinga2=1}") {
		t.Errorf("line %s", line)
	}
	rec := httptest.NewRecorder()
	MetricsHandler(Source{Snapshot: func() Snapshot { return s }, Method: "xor"}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`nsca_queue_lost_results_total{sink="icinga2"} 105` + "\n",
		`nsca_queue_lost_unknown_total{sink="icinga2"} 1` + "\n",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("missing %q in:\n%s", want, rec.Body.String())
		}
	}
}
