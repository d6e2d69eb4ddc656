package counters

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
)

// rows is everything the daemon reports, in the order /metrics writes it:
// each row is a metric family, or a field of Cells that only feeds a
// derived family, or both. A row with a field makes Snapshot copy it,
// Snapshot.Add sum it and Totals.Retire drop it if it is a gauge; a row
// with a name exposes it; a row with a line key appends it to the
// statistics line once it is nonzero. Adding a counter is its field in
// Cells and in Snapshot and one row here; the package's init refuses a
// field without a row, a row without its fields, and bad or duplicate
// names (see checkRows).
var rows = []*row{
	{field: "Connections", name: "nsca_connections_total", kind: counter,
		help: "Connections accepted and sent an init packet."},
	{field: "Open", name: "nsca_connections_open", kind: gauge,
		help: "Connections open now."},
	{field: "Refused", name: "nsca_connections_refused_total", kind: counter,
		help: "Connections closed before the init packet (allowed_hosts, max_connections, proxy_protocol_trusted, a bad PROXY header)."},
	{field: "HealthChecks", name: "nsca_health_checks_total", kind: counter,
		help: "A load balancer's health checks: PROXY LOCAL headers, or connections closed before any header."},
	{field: "Incomplete", name: "nsca_connections_incomplete_total", kind: counter,
		help: "Connections that ended before sending one whole packet (slowloris, scanners, garbage): no check was lost."},
	{field: "BytesRead", name: "nsca_read_bytes_total", kind: counter,
		help: "Bytes read from clients."},
	{name: "nsca_stage_items_total", kind: counter, labels: []string{"stage"}, samples: stageItems,
		help: "Items each pipeline stage passed on: accept connections, read chunks, decrypt packets, validate results, emit results."},
	{field: "Chunks", kind: counter},    // in stage_items_total
	{field: "Received", kind: counter},  // in stage_items_total and results_queued
	{field: "Validated", kind: counter}, // in stage_items_total
	{name: "nsca_results_queued", kind: gauge, samples: queued,
		help: "Packets received and neither emitted nor dropped yet."},
	{field: "Finished", kind: counter},    // in results_queued
	{field: "SinkDropped", kind: counter}, // in results_queued
	{field: "Emitted", name: "nsca_results_emitted_total", kind: counter, labels: []string{"sink"},
		help: "Results written, by sink."},
	{field: "Dropped", name: "nsca_results_dropped_total", kind: counter, labels: []string{"reason"}, zero: DropReasons,
		help: "Checks lost, by reason."},
	{field: "SinkErrors", name: "nsca_sink_errors_total", kind: counter, labels: []string{"sink"},
		help: "Failed writes, by sink."},
	{field: "FellBack", name: "nsca_sink_fallbacks_total", kind: counter, labels: []string{"sink"},
		help: "Results a sink passed to its fallback, by sink (a destination's name when its queue was full)."},
	{field: "Queues", external: true, name: "nsca_queue_depth", kind: gauge, labels: []string{"queue"},
		help: "Items waiting in each queue between stages."},
	{field: "Held", name: "nsca_results_held", kind: gauge,
		help: "Results a sink holds back (the spool at check_result_path_max_files)."},
	{field: "DialectLossy", name: "nsca_dialect_lossy_total", kind: counter, line: "dialect_lossy",
		help: "Results the command file, spool or dump file wrote in a lossy form of command_file_dialect (output the core cannot store exactly)."},
	{name: "nsca_queue_disk_results", kind: gauge, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return float64(q.Results) }),
		help:    "Results waiting in a destination's durable queue on disk (queue_directory)."},
	{name: "nsca_queue_disk_bytes", kind: gauge, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return float64(q.Bytes) }),
		help:    "Bytes waiting in a destination's durable queue on disk."},
	{name: "nsca_queue_disk_oldest_seconds", kind: gauge, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return q.OldestSeconds }),
		help:    "Age of the oldest result in a destination's durable queue; 0 when empty."},
	{name: "nsca_queue_replayed_total", kind: counter, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return float64(q.Replayed) }),
		help:    "Results delivered out of a destination's durable queue."},
	{name: "nsca_queue_corrupt_total", kind: counter, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return float64(q.Corrupt) }),
		help:    "Damaged regions of a durable queue skipped (torn tail, bad checksum, undecodable record, segment file removed or cut short)."},
	{name: "nsca_queue_lost_results_total", kind: counter, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return float64(q.Lost) }),
		help:    "Results lost to damage of a durable queue, where known."},
	{name: "nsca_queue_lost_unknown_total", kind: counter, labels: []string{"sink"},
		samples: durable(func(q DurableQueue) float64 { return float64(q.LostUnknown) }),
		help:    "Damaged regions of a durable queue whose number of lost results is unknown (found at start in files no process had read)."},
	{field: "DecryptNanos", name: "nsca_decrypt_seconds_total", kind: counter, labels: []string{"method"}, samples: decryptSeconds,
		help: "Time spent decrypting, by method."},
	{field: "SinkDown", name: "nsca_sink_down", kind: gauge, labels: []string{"sink"},
		help: "Sinks whose last write failed (or, before any, that could not be used at start): 1 per pipeline that finds it failing, 0 when it takes results."},
	{name: "nsca_result_latency_seconds", kind: histogram, samples: latency,
		help: "Time from a result's last byte read off its socket to every destination being done with it (written, held back or dropped)."},
	{name: "nsca_build_info", kind: gauge, labels: []string{"version", "goversion", "revision"}, samples: buildInfo,
		help: "The binary's version, Go version and source revision; always 1."},
	{name: "nsca_reloads_total", kind: counter,
		samples: reloads(func(r *Reloads) float64 { return float64(r.total.Load()) }),
		help:    "Reloads (SIGHUP) attempted, failed ones included."},
	{name: "nsca_reload_failures_total", kind: counter,
		samples: reloads(func(r *Reloads) float64 { return float64(r.failures.Load()) }),
		help:    "Reloads that failed: the running configuration was kept."},
	{name: "nsca_last_reload_timestamp_seconds", kind: gauge,
		samples: reloads(func(r *Reloads) float64 { return float64(r.last.Load()) / 1e9 }),
		help:    "Unix time of the last reload attempt, or of the start before any."},
	{name: "nsca_last_reload_success", kind: gauge,
		samples: reloads(lastReloadSucceeded),
		help:    "1 if the last reload (or the start, before any) succeeded, else 0."},
	{name: "process_cpu_seconds_total", kind: counter,
		samples: process(func(p ProcessStats) float64 { return p.CPUSeconds }),
		help:    "User and system CPU time spent, by the supervisor and its workers (exited ones included)."},
	{name: "process_resident_memory_bytes", kind: gauge,
		samples: process(func(p ProcessStats) float64 { return float64(p.ResidentBytes) }),
		help:    "Resident memory, summed over the supervisor and its workers."},
	{name: "process_virtual_memory_bytes", kind: gauge,
		samples: process(func(p ProcessStats) float64 { return float64(p.VirtualBytes) }),
		help:    "Virtual memory, summed over the supervisor and its workers."},
	{name: "process_open_fds", kind: gauge,
		samples: process(func(p ProcessStats) float64 { return float64(p.OpenFDs) }),
		help:    "Open file descriptors, summed over the supervisor and its workers."},
	{name: "process_start_time_seconds", kind: gauge,
		samples: process(func(p ProcessStats) float64 { return p.StartTimeUnix }),
		help:    "Unix time the daemon's main process started."},
	{name: "nsca_processes", kind: gauge,
		samples: process(func(p ProcessStats) float64 { return float64(p.Processes) }),
		help:    "Processes of the daemon running: the supervisor and its workers, or 1."},
	{field: "SecretMatches", name: "nsca_secret_matches_total", kind: counter, labels: []string{"secret"},
		help: "Connections whose first packet a secret decrypted, by secret: password/METHOD, password_file:LINE/METHOD or an identity's name (never the password)."},
	{field: "IdentityRefused", name: "nsca_identity_refused_total", kind: counter, labels: []string{"identity"},
		help: "Results refused because the identity that sent them has no right to them (identities_file), by identity."},
	{field: "FrontReceived", name: "nsca_front_received_total", kind: counter, labels: []string{"front"},
		help: "Submissions (results and other commands) handed to validation, by front end: nsca, nsca-ng, nrdp."},
	{field: "FrontRefused", name: "nsca_front_refused_total", kind: counter, labels: []string{"front"},
		help: "Submissions validation refused, for any reason (see nsca_results_dropped_total), by front end."},
}

// Metric types of the text exposition format.
const (
	counter   = "counter"
	gauge     = "gauge"
	histogram = "histogram"
)

// A row is one line of the table above.
type row struct {
	// field names the row's field in Cells and in Snapshot: an
	// atomic.Uint64 or atomic.Int64 in Cells and a uint64 or int64 in
	// Snapshot, or, for a family by key, a map[string]uint64 in Snapshot
	// that Stats keeps by key (see Stats.counter). Empty for a family
	// derived from other fields or from the Source.
	field string
	// external marks a family by key that the snapshot's maker (a
	// running Server) fills in and Stats does not keep.
	external bool
	// kind is counter, gauge or histogram: a gauge's field is dropped
	// from the totals when its pipeline ends (see Totals.Retire).
	kind string
	// name, help and labels are the metric family; no name: the field
	// is reported only through a derived family.
	name, help string
	labels     []string
	// zero are keys a family by key shows at zero from the start.
	zero []string
	// line is the row's key in the statistics line, where it is
	// appended once nonzero; the line's first part is fixed (see Line).
	line string
	// samples renders a derived family, or a field differently from
	// its plain value; nil renders the field as it is.
	samples func(sc *scrape, r *row)

	// Resolved by resolve: the exposition's family, the field's shape
	// and its index in Cells (scalars only) and in Snapshot.
	desc       *metricDesc
	shape      shape
	live, snap int
	signed     bool // a scalar held in an atomic.Int64, not an atomic.Uint64
}

// shape is what kind of value a row's field holds.
type shape int

const (
	derived shape = iota // no field
	scalar               // atomic.Uint64 or atomic.Int64 in Cells
	keyed                // a map by key
)

var (
	uint64Type  = reflect.TypeFor[atomic.Uint64]()
	int64Type   = reflect.TypeFor[atomic.Int64]()
	cellsType   = reflect.TypeFor[Cells]()
	snapType    = reflect.TypeFor[Snapshot]()
	keyedStats  = reflect.TypeFor[map[string]uint64]()
	keyedGauges = reflect.TypeFor[map[string]int64]()
)

// snapshotOnly are the Snapshot fields that are not rows: they have
// their own types and code.
var snapshotOnly = map[string]bool{"Latency": true, "Durable": true}

// statsKeyed are the families by key that Stats keeps.
var statsKeyed []*row

func init() {
	if err := checkRows(rows); err != nil {
		panic(err)
	}
	for _, r := range rows {
		if r.shape == keyed && !r.external {
			statsKeyed = append(statsKeyed, r)
		}
	}
	Layout = layout()
}

// ErrTable reports a table of counters that cannot be served: a bad or
// duplicate name, or a field that is not where the row says.
var ErrTable = errors.New("counters: bad counter table")

var (
	metricName = regexp.MustCompile(`^(nsca|process)_[a-z0-9_]*[a-z0-9]$`)
	labelName  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	lineKey    = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// checkRows resolves every row against Cells and Snapshot and checks the
// table: names valid and unique, counters named _total and gauges not, a
// row for every counter of Cells and every field of Snapshot.
func checkRows(table []*row) error {
	fields, names, lines := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, r := range table {
		if err := r.resolve(); err != nil {
			return fmt.Errorf("%w: row %d (%s): %w", ErrTable, i, cmp.Or(r.field, r.name), err)
		}
		for _, seen := range []struct {
			set map[string]bool
			key string
			of  string
		}{{fields, r.field, "field"}, {names, r.name, "metric"}, {lines, r.line, "line key"}} {
			if seen.key == "" {
				continue
			}
			if seen.set[seen.key] {
				return fmt.Errorf("%w: row %d: %s %s is in the table twice", ErrTable, i, seen.of, seen.key)
			}
			seen.set[seen.key] = true
		}
	}
	for i := range cellsType.NumField() {
		f := cellsType.Field(i)
		if (f.Type == uint64Type || f.Type == int64Type) && !fields[f.Name] {
			return fmt.Errorf("%w: Cells.%s has no row", ErrTable, f.Name)
		}
	}
	for i := range snapType.NumField() {
		if f := snapType.Field(i); !fields[f.Name] && !snapshotOnly[f.Name] {
			return fmt.Errorf("%w: Snapshot.%s has no row", ErrTable, f.Name)
		}
	}
	return nil
}

// resolve finds the row's fields and checks the row by itself.
func (r *row) resolve() error {
	r.live, r.snap = -1, -1
	if r.field != "" {
		if err := r.resolveField(); err != nil {
			return err
		}
	}
	switch {
	case r.name == "" && r.field == "":
		return errors.New("neither a field nor a metric")
	case r.kind != counter && r.kind != gauge && r.kind != histogram:
		return fmt.Errorf("kind %q, want counter, gauge or histogram", r.kind)
	case r.kind == histogram && r.shape != derived:
		return errors.New("a histogram is derived (Stats.Latency), not a field")
	case r.name == "":
		if r.help != "" || r.labels != nil || r.samples != nil {
			return errors.New("a metric's help, labels or samples without its name")
		}
	default:
		if err := r.checkMetric(); err != nil {
			return err
		}
		r.desc = &metricDesc{name: r.name, help: r.help, labels: r.labels}
	}
	if r.line != "" && (r.shape == derived || !lineKey.MatchString(r.line)) {
		return fmt.Errorf("line key %q: not a field's, or not lower-case words joined by _", r.line)
	}
	if (r.zero != nil || r.external) && r.shape != keyed {
		return errors.New("zero keys or external on a row that is not by key")
	}
	if r.line != "" && r.external {
		return errors.New("a line key on a family the Server fills in")
	}
	return nil
}

// resolveField finds the row's field in Snapshot and, for a scalar, in
// Cells, of matching types.
func (r *row) resolveField() error {
	sf, ok := snapType.FieldByName(r.field)
	if !ok || len(sf.Index) != 1 {
		return fmt.Errorf("no field Snapshot.%s", r.field)
	}
	r.snap = sf.Index[0]
	lf, inCells := cellsType.FieldByName(r.field)
	switch {
	case sf.Type == keyedStats && !r.external || sf.Type == keyedGauges && r.external:
		r.shape = keyed
		if inCells {
			return fmt.Errorf("a family by key is kept in Stats by key, not in a field Cells.%s", r.field)
		}
		// Its accessor, Stats.<field>(key), is checked by
		// TestKeyedFamiliesHaveAccessors: looking a method up by name here
		// would make the linker keep every exported method of the binary
		// (1.8 MB more, and about 2 MB more RSS per process).
		return nil
	case !inCells || len(lf.Index) != 1:
		return fmt.Errorf("no field Cells.%s, or Snapshot.%s is not a map[string]uint64", r.field, r.field)
	case lf.Type == uint64Type && sf.Type.Kind() == reflect.Uint64:
	case lf.Type == int64Type && sf.Type.Kind() == reflect.Int64:
		if r.kind != gauge {
			return errors.New("an atomic.Int64 that is not a gauge: counters do not go down")
		}
	default:
		return fmt.Errorf("field %s is %v in Cells and %v in Snapshot, want atomic.Uint64 and uint64 or atomic.Int64 and int64",
			r.field, lf.Type, sf.Type)
	}
	r.shape, r.live, r.signed = scalar, lf.Index[0], lf.Type == int64Type
	return nil
}

// checkMetric checks the row's metric family.
func (r *row) checkMetric() error {
	if !metricName.MatchString(r.name) {
		return fmt.Errorf("metric name %q: not nsca_ or process_ and lower-case words joined by _", r.name)
	}
	if r.help == "" {
		return fmt.Errorf("metric %s has no help", r.name)
	}
	if total := strings.HasSuffix(r.name, "_total"); (r.kind == counter) != total {
		return fmt.Errorf("metric %s: a counter's name ends in _total, and only a counter's", r.name)
	}
	for _, l := range r.labels {
		if !labelName.MatchString(l) {
			return fmt.Errorf("metric %s: label name %q", r.name, l)
		}
	}
	switch {
	case r.samples != nil:
	case r.shape == keyed && len(r.labels) != 1:
		return fmt.Errorf("metric %s: a family by key has one label", r.name)
	case r.shape == scalar && len(r.labels) != 0:
		return fmt.Errorf("metric %s: a plain field has no labels", r.name)
	case r.shape == derived:
		return fmt.Errorf("metric %s: neither a field nor samples", r.name)
	}
	return nil
}

// in is the row's field in s.
func (r *row) in(s *Snapshot) reflect.Value { return reflect.ValueOf(s).Elem().Field(r.snap) }

// load copies the row's scalar from live, a Cells, into snap, a Snapshot.
func (r *row) load(live, snap reflect.Value) {
	// A worker loads every row for each report; boxing the field into an
	// interface to switch on its type was a third of that.
	c := live.Field(r.live).Addr().UnsafePointer()
	if r.signed {
		snap.Field(r.snap).SetInt((*atomic.Int64)(c).Load())
	} else {
		snap.Field(r.snap).SetUint((*atomic.Uint64)(c).Load())
	}
}

// add sums the row's field of o into s.
func (r *row) add(s, o *Snapshot) {
	dst, src := r.in(s), r.in(o)
	switch d := dst.Addr().Interface().(type) {
	case *map[string]uint64:
		addInto(d, src.Interface().(map[string]uint64))
	case *map[string]int64:
		addInto(d, src.Interface().(map[string]int64))
	case *int64:
		*d += src.Int()
	case *uint64:
		*d += src.Uint()
	}
}

func addInto[V uint64 | int64](dst *map[string]V, src map[string]V) {
	if *dst == nil {
		*dst = map[string]V{}
	}
	for k, v := range src {
		(*dst)[k] += v
	}
}

// float is v, a uint64 or an int64, as a sample's value.
func float(v reflect.Value) float64 {
	if v.Kind() == reflect.Int64 {
		return float64(v.Int())
	}
	return float64(v.Uint())
}
