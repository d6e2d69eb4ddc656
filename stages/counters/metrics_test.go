package counters

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
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
	MetricsHandler(Source{Snapshot: func() Snapshot { return snap }, Method: "xor"}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
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
	family, kind := "", ""
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family, kind = strings.Fields(name)[0], strings.Fields(name)[1]
			if seen[family] {
				t.Errorf("family %s has a second TYPE line", family)
			}
			seen[family] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		name := strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]
		if kind == "histogram" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				name = strings.TrimSuffix(name, suffix)
			}
		}
		if name != family {
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

// A fresh daemon's scrape has every series an alert or a dashboard needs,
// at zero: each drop reason, the latency histogram's buckets, build info,
// reloads and the process metrics.
func TestMetricsZeroFromStart(t *testing.T) {
	stats := NewStats()
	stats.Emitted("fifo")
	var reloads Reloads
	reloads.Started(time.Unix(1000, 0))
	rec := httptest.NewRecorder()
	MetricsHandler(Source{
		Snapshot: stats.Snapshot, Method: "xor", Build: BuildInfo{Version: "1.2", GoVersion: "go1"},
		Process: func() ProcessStats { return ProcessStats{StartTimeUnix: 5, Processes: 1} }, Reloads: &reloads,
	}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	want := []string{
		`nsca_results_emitted_total{sink="fifo"} 0`,
		`nsca_result_latency_seconds_bucket{le="+Inf"} 0`,
		`nsca_result_latency_seconds_count 0`,
		`nsca_build_info{version="1.2",goversion="go1",revision=""} 1`,
		`nsca_reloads_total 0`, `nsca_reload_failures_total 0`,
		`nsca_last_reload_timestamp_seconds 1000`, `nsca_last_reload_success 1`,
		`process_start_time_seconds 5`, `process_cpu_seconds_total 0`, `process_open_fds 0`, `process_resident_memory_bytes 0`,
	}
	for _, r := range DropReasons {
		want = append(want, `nsca_results_dropped_total{reason="`+r+`"} 0`)
	}
	for _, w := range want {
		if !strings.Contains(text, w+"\n") {
			t.Errorf("missing %q in:\n%s", w, text)
		}
	}
	if strings.Contains(text, "nsca_packets_total") {
		t.Errorf("nsca_packets_total duplicates nsca_results_emitted_total and nsca_results_dropped_total:\n%s", text)
	}
	reloads.Record(errors.New("bad"))
	rec = httptest.NewRecorder()
	MetricsHandler(Source{Snapshot: stats.Snapshot, Reloads: &reloads}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, w := range []string{"nsca_reloads_total 1\n", "nsca_reload_failures_total 1\n", "nsca_last_reload_success 0\n"} {
		if !strings.Contains(rec.Body.String(), w) {
			t.Errorf("after a failed reload, missing %q", w)
		}
	}
}

// The histogram is cumulative in the exposition, and a batch lands in the
// bucket of each of its latencies: at a bound belongs to that bucket.
func TestLatencyHistogram(t *testing.T) {
	var l Latency
	var b LatencyBatch
	for _, d := range []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 3 * time.Millisecond, time.Minute, -time.Second} {
		b.Observe(int64(d))
	}
	l.Add(&b)
	s := NewStats()
	s.Latency.Add(&b)
	var e exposition
	e.histogram(desc("lat", "L."), s.Snapshot().Latency)
	text := string(e.bytes())
	for _, w := range []string{
		`nsca_lat_bucket{le="0.0001"} 3`, // -1 s counts as 0, 50 µs, and 100 µs at the bound
		`nsca_lat_bucket{le="0.0025"} 3`,
		`nsca_lat_bucket{le="0.005"} 4`,
		`nsca_lat_bucket{le="10"} 4`,
		`nsca_lat_bucket{le="+Inf"} 5`,
		`nsca_lat_count 5`,
	} {
		if !strings.Contains(text, w+"\n") {
			t.Errorf("missing %q in:\n%s", w, text)
		}
	}
	if got := l.snapshot().Count(); got != 5 {
		t.Errorf("count %d, want 5", got)
	}
}

// Observing a batch allocates nothing: it runs once per batch on the emit
// stage's path.
func TestLatencyNoAllocs(t *testing.T) {
	var l Latency
	if n := testing.AllocsPerRun(100, func() {
		var b LatencyBatch
		for i := range 256 {
			b.Observe(int64(i) * 1000)
		}
		l.Add(&b)
	}); n != 0 {
		t.Errorf("%v allocations per batch, want 0", n)
	}
}

// /readyz fails while the daemon does not serve or a sink's last write
// failed; /healthz answers regardless.
func TestReadyz(t *testing.T) {
	serving := false
	stats := NewStats()
	h := ReadyHandler(func() bool { return serving }, stats.Snapshot)
	code := func(h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if c, body := code(h); c != 503 || !strings.Contains(body, "not serving") {
		t.Errorf("before serving: %d %q, want 503", c, body)
	}
	serving = true
	stats.SinkDown("fifo")
	if c, body := code(h); c != 200 {
		t.Errorf("serving: %d %q, want 200", c, body)
	}
	stats.SinkDown("fifo").Store(1)
	if c, body := code(h); c != 503 || !strings.Contains(body, "fifo") {
		t.Errorf("fifo down: %d %q, want 503 naming fifo", c, body)
	}
	if c, _ := code(HealthHandler()); c != 200 {
		t.Errorf("/healthz %d, want 200", c)
	}
}

// Every bound belongs to its own bucket and a nanosecond above it to the
// next; what exceeds the last bound, up to the largest duration, is in
// +Inf; an empty batch adds nothing.
func TestLatencyEveryBound(t *testing.T) {
	for i, ns := range latencyBoundsNanos {
		for _, tc := range []struct {
			nanos  int64
			bucket int
		}{{ns, i}, {ns + 1, i + 1}, {ns - 1, i}} {
			var b LatencyBatch
			b.Observe(tc.nanos)
			if b.buckets[tc.bucket] != 1 || b.n != 1 || b.sum != uint64(tc.nanos) {
				t.Errorf("%d ns: buckets %v, want one in bucket %d", tc.nanos, b.buckets, tc.bucket)
			}
		}
	}
	var b LatencyBatch
	b.Observe(math.MaxInt64)
	if b.buckets[len(LatencyBounds)] != 1 {
		t.Errorf("MaxInt64: buckets %v, want +Inf", b.buckets)
	}
	var l Latency
	l.Add(&LatencyBatch{})
	if s := l.snapshot(); s.Count() != 0 || s.SumNanos != 0 {
		t.Errorf("empty batch: %+v", s)
	}
}

// Snapshots sum bucket by bucket, whichever has more buckets (a worker of
// a release with other bounds), and survive the JSON between processes.
func TestLatencySnapshotAdd(t *testing.T) {
	var sum LatencySnapshot
	sum.add(LatencySnapshot{Buckets: []uint64{1, 2}, SumNanos: 10})
	sum.add(LatencySnapshot{Buckets: []uint64{1, 0, 0, 4}, SumNanos: 5})
	sum.add(LatencySnapshot{})
	if want := []uint64{2, 2, 0, 4}; !slices.Equal(sum.Buckets, want) || sum.SumNanos != 15 || sum.Count() != 8 {
		t.Errorf("sum %+v, want buckets %v, sum 15, count 8", sum, want)
	}
	var s Snapshot
	b, _ := json.Marshal(Snapshot{Latency: sum})
	if err := json.Unmarshal(b, &s); err != nil || !slices.Equal(s.Latency.Buckets, sum.Buckets) || s.Latency.SumNanos != 15 {
		t.Errorf("through JSON: %+v (%v)", s.Latency, err)
	}
	// No observation: the exposition has every bucket at zero, not none.
	var e exposition
	e.histogram(desc("lat", "L."), LatencySnapshot{})
	if n := strings.Count(string(e.bytes()), "nsca_lat_bucket{"); n != len(LatencyBounds)+1 {
		t.Errorf("%d buckets of an empty histogram, want %d", n, len(LatencyBounds)+1)
	}
}

// desc is a family under the nsca_ prefix, for tests of the exposition.
func desc(name, help string, labels ...string) *metricDesc {
	return &metricDesc{name: "nsca_" + name, help: help, labels: labels}
}
