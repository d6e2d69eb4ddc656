package counters

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// probe is the key a family by key is bumped under.
const probe = "zz_probe"

// bump counts one more of r's field in st (a family by key: 5 under
// probe, through its method on Stats, so that the method's wiring is
// tested too).
func bump(t *testing.T, st *Stats, r *row) {
	t.Helper()
	switch r.shape {
	case scalar:
		switch c := reflect.ValueOf(st.Cells).Elem().Field(r.live).Addr().Interface().(type) {
		case *atomic.Uint64:
			c.Add(1)
		case *atomic.Int64:
			c.Add(1)
		}
	case keyed:
		if r.external {
			return // see bumped
		}
		out := reflect.ValueOf(st).MethodByName(r.field).Call([]reflect.Value{reflect.ValueOf(probe)})
		out[0].Interface().(*atomic.Uint64).Add(5)
	}
}

// bumped is the snapshot of knownStats with r's field bumped: a Server's
// queue depths get the probe themselves.
func bumped(t *testing.T, r *row) Snapshot {
	st := knownStats()
	bump(t, st, r)
	snap := st.Snapshot()
	snap.Queues = knownSnapshot().Queues
	if r.external {
		snap.Queues[probe] = 5
	}
	return snap
}

func statsFileOf(t *testing.T, snap Snapshot) string {
	t.Helper()
	start := time.Unix(1700000000, 0)
	f := &StatsFile{path: filepath.Join(t.TempDir(), StatsFileName(0)), pid: 1, started: start,
		snapshot: func() Snapshot { return snap }, prevAt: start}
	if err := f.write(start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every row of the table is reported: a named row has its HELP and TYPE
// in the exposition, and each field, bumped by one, moves its own field
// of the snapshot, the snapshot's JSON, the exposition, and the
// statistics line if it has a line key. The statistics file is the C++
// nsca_fast's: only its four counters move it, whatever the table grows.
func TestTableEveryRowReported(t *testing.T) {
	base := knownSnapshot()
	baseJSON, _ := json.Marshal(base)
	baseMetrics := string(scrapeBody(t, Source{Snapshot: func() Snapshot { return base }}))
	full := string(scrapeBody(t, knownSource()))
	baseFile := statsFileOf(t, base)
	inStatsFile := map[string]string{"Open": "connections_current", "Connections": "connections_counter",
		"Emitted": "report_success", "Dropped": "report_failed"}
	for _, r := range rows {
		if r.name != "" {
			for _, want := range []string{"# TYPE " + r.name + " " + r.kind + "\n", "# HELP " + r.name + " "} {
				if !strings.Contains(full, want) {
					t.Errorf("%s: no %q in the exposition", r.name, want)
				}
			}
		}
		if r.shape == derived {
			continue
		}
		snap := bumped(t, r)
		got, was := r.in(&snap), r.in(&base)
		if r.shape == keyed {
			if n := got.MapIndex(reflect.ValueOf(probe)); !n.IsValid() || float(n) != 5 {
				t.Errorf("%s: the snapshot has %v under %s, want 5", r.field, n, probe)
			}
		} else if float(got) != float(was)+1 {
			t.Errorf("%s: the snapshot has %v, want %v", r.field, got, float(was)+1)
		}
		if b, _ := json.Marshal(snap); string(b) == string(baseJSON) {
			t.Errorf("%s: the snapshot's JSON does not move", r.field)
		}
		if m := string(scrapeBody(t, Source{Snapshot: func() Snapshot { return snap }})); m == baseMetrics {
			t.Errorf("%s: the exposition does not move", r.field)
		}
		if r.line != "" && snap.Line(base, 1) == base.Line(base, 1) {
			t.Errorf("%s: the statistics line does not move", r.field)
		}
		file := statsFileOf(t, snap)
		if key, ok := inStatsFile[r.field]; ok != (file != baseFile) {
			t.Errorf("%s: statistics file\n%s\nwas\n%s", r.field, file, baseFile)
		} else if ok && !strings.Contains(file, "\n"+key+"=") {
			t.Errorf("%s: no key %s in\n%s", r.field, key, file)
		}
	}
}

// A line key that is zero stays out of the line; once nonzero it is
// appended.
func TestTableLineExtras(t *testing.T) {
	var s Snapshot
	if got := s.lineExtras(); got != "" {
		t.Errorf("extras of zero counters: %q", got)
	}
	s.DialectLossy = 3
	if got := s.lineExtras(); got != ", dialect_lossy=3" {
		t.Errorf("extras %q", got)
	}
}

// Summing snapshots sums every field; retiring a pipeline keeps its
// counters in the totals and drops its gauges.
func TestTableAddAndRetire(t *testing.T) {
	one := knownSnapshot()
	var sum Snapshot
	sum.Add(one)
	sum.Add(one)
	var totals Totals
	totals.Add(1, knownSnapshot)
	totals.Retire(1, one)
	retired := totals.Sum()
	for _, r := range rows {
		if r.shape == derived {
			continue
		}
		if r.in(&one).IsZero() {
			t.Errorf("knownStats leaves %s at zero: give it a value, and rewrite the golden files with -update", r.field)
			continue
		}
		if r.shape == scalar {
			if got, want := float(r.in(&sum)), 2*float(r.in(&one)); got != want {
				t.Errorf("%s summed: %v, want %v", r.field, got, want)
			}
			if got := float(r.in(&retired)); (r.kind == gauge) != (got == 0) {
				t.Errorf("%s (%s) after retirement: %v", r.field, r.kind, got)
			}
			continue
		}
		m, o := r.in(&sum), r.in(&one)
		for it := o.MapRange(); it.Next(); {
			if got, want := float(m.MapIndex(it.Key())), 2*float(it.Value()); got != want {
				t.Errorf("%s[%s] summed: %v, want %v", r.field, it.Key(), got, want)
			}
		}
		if n := r.in(&retired).Len(); (r.kind == gauge) != (n == 0) {
			t.Errorf("%s (%s) after retirement: %d keys", r.field, r.kind, n)
		}
	}
}

// checkRows refuses a table that cannot be served, naming the row and
// the reason; the real table passes.
func TestCheckRowsRefuses(t *testing.T) {
	if err := checkRows(rows); err != nil {
		t.Fatalf("the table: %v", err)
	}
	find := func(field string) row {
		for _, r := range rows {
			if r.field == field {
				return *r
			}
		}
		t.Fatalf("no row %s", field)
		return row{}
	}
	with := func(field string, change func(*row)) *row {
		r := find(field)
		change(&r)
		return &r
	}
	refused := find("Refused")
	for _, tc := range []struct {
		why   string
		table []*row
		want  string
	}{
		{"bad metric name", []*row{with("Refused", func(r *row) { r.name = "nsca_Refused-total" })}, `metric name "nsca_Refused-total"`},
		{"no prefix", []*row{with("Refused", func(r *row) { r.name = "refused_total" })}, `metric name "refused_total"`},
		{"duplicate metric", []*row{&refused, with("Incomplete", func(r *row) { r.name = refused.name })},
			"metric nsca_connections_refused_total is in the table twice"},
		{"duplicate field", []*row{&refused, with("Refused", func(r *row) { r.name = "nsca_refused_again_total" })},
			"field Refused is in the table twice"},
		{"duplicate line key", []*row{with("Refused", func(r *row) { r.line = "x" }), with("Incomplete", func(r *row) { r.line = "x" })},
			"line key x is in the table twice"},
		{"counter without _total", []*row{with("Refused", func(r *row) { r.name = "nsca_connections_refused" })},
			"a counter's name ends in _total"},
		{"gauge named _total", []*row{with("Open", func(r *row) { r.name = "nsca_open_total" })}, "a counter's name ends in _total"},
		{"no such field", []*row{with("Refused", func(r *row) { r.field = "Refusd" })}, "no field Snapshot.Refusd"},
		{"a counter that goes down", []*row{with("Open", func(r *row) { r.kind, r.name = counter, "nsca_open_total" })},
			"an atomic.Int64 that is not a gauge"},
		{"bad kind", []*row{with("Refused", func(r *row) { r.kind = "summary" })}, `kind "summary"`},
		{"no help", []*row{with("Refused", func(r *row) { r.help = "" })}, "has no help"},
		{"bad label", []*row{with("Emitted", func(r *row) { r.labels = []string{"Sink"} })}, `label name "Sink"`},
		{"family with two labels", []*row{with("Emitted", func(r *row) { r.labels = []string{"sink", "x"} })}, "a family by key has one label"},
		{"plain field with a label", []*row{with("Refused", func(r *row) { r.labels = []string{"x"} })}, "a plain field has no labels"},
		{"zero keys on a scalar", []*row{with("Refused", func(r *row) { r.zero = []string{"x"} })}, "zero keys"},
		{"bad line key", []*row{with("Refused", func(r *row) { r.line = "Refused!" })}, `line key "Refused!"`},
		{"empty row", []*row{{}}, "neither a field nor a metric"},
		{"derived without samples", []*row{{name: "nsca_x", kind: gauge, help: "X."}}, "neither a field nor samples"},
		{"a missing row", rows[1:], "Cells.Connections has no row"},
	} {
		err := checkRows(tc.table)
		if !errors.Is(err, ErrTable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrTable and %q", tc.why, err, tc.want)
		}
	}
	// The cases above resolved copies; the table itself is untouched.
	if err := checkRows(rows); err != nil {
		t.Fatalf("the table after the cases: %v", err)
	}
}

// TestKeyedFamiliesHaveAccessors: every family by key that Stats keeps has
// its accessor, Stats.<field>(key) *atomic.Uint64, through which the
// stages count into it. (checkRows cannot look methods up by name without
// making the linker keep every method of the daemon.)
func TestKeyedFamiliesHaveAccessors(t *testing.T) {
	want := reflect.TypeFor[func(*Stats, string) *atomic.Uint64]()
	if len(statsKeyed) == 0 {
		t.Fatal("no family by key in the table")
	}
	for _, r := range statsKeyed {
		m, ok := reflect.TypeFor[*Stats]().MethodByName(r.field)
		if !ok || m.Type != want {
			t.Errorf("no method Stats.%s(key string) *atomic.Uint64", r.field)
		}
	}
}
