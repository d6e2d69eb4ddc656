package counters

import (
	"bytes"
	"cmp"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Source is what the metrics are read from at scrape time, so metrics cost
// the pipeline nothing between scrapes.
type Source struct {
	// Snapshot reads the pipeline counters (summed over workers).
	Snapshot func() Snapshot
	// Method labels the decryption time (for example "tripledes").
	Method string
	// Build labels nsca_build_info.
	Build BuildInfo
	// Process reads the process_* metrics; nil: none are served.
	Process func() ProcessStats
	// Reloads counts the reloads; nil: none are served.
	Reloads *Reloads
}

// BuildInfo is what nsca_build_info says of the binary.
type BuildInfo struct {
	Version, GoVersion, Revision string
}

// ProcessStats are the daemon's process metrics, as Prometheus's
// conventions name them: with workers, the sum over the supervisor and
// its workers (CPU includes workers that exited).
type ProcessStats struct {
	CPUSeconds    float64
	ResidentBytes int64
	OpenFDs       int64
	StartTimeUnix float64
	VirtualBytes  int64
	Processes     int64
}

// MetricsHandler serves Prometheus metrics in the text exposition format.
// It writes the format itself: the Prometheus client library and its
// protobuf dependency made up a third of the binary, whose pages every
// worker process maps.
func MetricsHandler(src Source) http.Handler {
	c := &collector{src: src}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var e exposition
		c.collect(&e)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(e.bytes())
	})
}

type collector struct {
	src Source
}

// metricDesc is one metric family: its name, help text and label names.
type metricDesc struct {
	name, help string
	labels     []string
}

func desc(name, help string, labels ...string) *metricDesc {
	return &metricDesc{name: "nsca_" + name, help: help, labels: labels}
}

// processDesc is a metric under Prometheus's process_ prefix.
func processDesc(name, help string) *metricDesc {
	return &metricDesc{name: "process_" + name, help: help}
}

// exposition accumulates samples in the text format. The samples of one
// family are written together under one HELP and TYPE, in the order the
// families were first given samples, however the samples were interleaved.
type exposition struct {
	order   []*metricDesc
	kinds   map[*metricDesc]string
	samples map[*metricDesc]*bytes.Buffer
}

func (e *exposition) sample(d *metricDesc, kind string, v float64, labelValues []string) {
	e.write(e.family(d, kind), d.name, d.labels, labelValues, v)
}

// family is where d's samples go, first in order once it has one.
func (e *exposition) family(d *metricDesc, kind string) *bytes.Buffer {
	if e.samples == nil {
		e.kinds, e.samples = map[*metricDesc]string{}, map[*metricDesc]*bytes.Buffer{}
	}
	b, ok := e.samples[d]
	if !ok {
		b = new(bytes.Buffer)
		e.order, e.kinds[d], e.samples[d] = append(e.order, d), kind, b
	}
	return b
}

// write renders one sample line of name, as a histogram's _bucket line
// does under its family.
func (e *exposition) write(b *bytes.Buffer, name string, labels, labelValues []string, v float64) {
	b.WriteString(name)
	for i, l := range labels {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		b.WriteString(sep + l + "=" + strconv.Quote(labelValues[i]))
	}
	if len(labels) > 0 {
		b.WriteByte('}')
	}
	b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
}

// histogram writes d's cumulative buckets, sum and count.
func (e *exposition) histogram(d *metricDesc, l LatencySnapshot) {
	b := e.family(d, "histogram")
	var cum uint64
	for i := range len(LatencyBounds) + 1 {
		if i < len(l.Buckets) {
			cum += l.Buckets[i]
		}
		le := "+Inf"
		if i < len(LatencyBounds) {
			le = strconv.FormatFloat(LatencyBounds[i], 'g', -1, 64)
		}
		e.write(b, d.name+"_bucket", []string{"le"}, []string{le}, float64(cum))
	}
	e.write(b, d.name+"_sum", nil, nil, float64(l.SumNanos)/1e9)
	e.write(b, d.name+"_count", nil, nil, float64(cum))
}

// bytes renders every family.
func (e *exposition) bytes() []byte {
	var out bytes.Buffer
	help := strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	for _, d := range e.order {
		out.WriteString("# HELP " + d.name + " " + help.Replace(d.help) + "\n")
		out.WriteString("# TYPE " + d.name + " " + e.kinds[d] + "\n")
		out.Write(e.samples[d].Bytes())
	}
	return out.Bytes()
}

// sortedKeys gives a family's samples a stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}

var (
	descConnections = desc("connections_total", "Connections accepted and sent an init packet.")
	descOpen        = desc("connections_open", "Connections open now.")
	descRefused     = desc("connections_refused_total", "Connections closed before the init packet (allowed_hosts, max_connections, proxy_protocol_trusted, a bad PROXY header).")
	descIncomplete  = desc("connections_incomplete_total", "Connections that ended before sending one whole packet (slowloris, scanners, garbage): no check was lost.")
	descHealth      = desc("health_checks_total", "A load balancer's health checks: PROXY LOCAL headers, or connections closed before any header.")
	descFellBack    = desc("sink_fallbacks_total", "Results a sink passed to its fallback, by sink (a destination's name when its queue was full).", "sink")
	descStage       = desc("stage_items_total", "Items each pipeline stage passed on: accept connections, read chunks, decrypt packets, validate results, emit results.", "stage")
	descBytes       = desc("read_bytes_total", "Bytes read from clients.")
	descQueued      = desc("results_queued", "Packets received and neither emitted nor dropped yet.")
	descEmitted     = desc("results_emitted_total", "Results written, by sink.", "sink")
	descDropped     = desc("results_dropped_total", "Checks lost, by reason.", "reason")
	descSinkErrors  = desc("sink_errors_total", "Failed writes, by sink.", "sink")
	descQueue       = desc("queue_depth", "Items waiting in each queue between stages.", "queue")
	descHeld        = desc("results_held", "Results a sink holds back (the spool at check_result_path_max_files).")
	descLossy       = desc("dialect_lossy_total", "Results the command file, spool or dump file wrote in a lossy form of command_file_dialect (output the core cannot store exactly).")
	descDiskResults = desc("queue_disk_results", "Results waiting in a destination's durable queue on disk (queue_directory).", "sink")
	descDiskBytes   = desc("queue_disk_bytes", "Bytes waiting in a destination's durable queue on disk.", "sink")
	descDiskOldest  = desc("queue_disk_oldest_seconds", "Age of the oldest result in a destination's durable queue; 0 when empty.", "sink")
	descReplayed    = desc("queue_replayed_total", "Results delivered out of a destination's durable queue.", "sink")
	descCorrupt     = desc("queue_corrupt_total", "Damaged regions of a durable queue skipped (torn tail, bad checksum, undecodable record, segment file removed or cut short).", "sink")
	descLost        = desc("queue_lost_results_total", "Results lost to damage of a durable queue, where known.", "sink")
	descLostUnknown = desc("queue_lost_unknown_total", "Damaged regions of a durable queue whose number of lost results is unknown (found at start in files no process had read).", "sink")
	descDecrypt     = desc("decrypt_seconds_total", "Time spent decrypting, by method.", "method")
	descSinkDown    = desc("sink_down", "Sinks whose last write failed (or, before any, that could not be used at start): 1 per pipeline that finds it failing, 0 when it takes results.", "sink")
	descLatency     = desc("result_latency_seconds", "Time from a result's last byte read off its socket to every destination being done with it (written, held back or dropped).")
	descBuild       = desc("build_info", "The binary's version, Go version and source revision; always 1.", "version", "goversion", "revision")
	descReloads     = desc("reloads_total", "Reloads (SIGHUP) attempted, failed ones included.")
	descReloadFails = desc("reload_failures_total", "Reloads that failed: the running configuration was kept.")
	descLastReload  = desc("last_reload_timestamp_seconds", "Unix time of the last reload attempt, or of the start before any.")
	descLastOK      = desc("last_reload_success", "1 if the last reload (or the start, before any) succeeded, else 0.")
	descCPU         = processDesc("cpu_seconds_total", "User and system CPU time spent, by the supervisor and its workers (exited ones included).")
	descRSS         = processDesc("resident_memory_bytes", "Resident memory, summed over the supervisor and its workers.")
	descVSZ         = processDesc("virtual_memory_bytes", "Virtual memory, summed over the supervisor and its workers.")
	descFDs         = processDesc("open_fds", "Open file descriptors, summed over the supervisor and its workers.")
	descStart       = processDesc("start_time_seconds", "Unix time the daemon's main process started.")
	descProcs       = desc("processes", "Processes of the daemon running: the supervisor and its workers, or 1.")
	descSecrets     = desc("secret_matches_total", "Connections whose first packet a secret decrypted, by secret: password/METHOD, password_file:LINE/METHOD or an identity's name (never the password).", "secret")
	descIdentity    = desc("identity_refused_total", "Results refused because the identity that sent them has no right to them (identities_file), by identity.", "identity")
)

// collect writes the current values.
func (c *collector) collect(e *exposition) {
	s := c.src.Snapshot()
	counter := func(d *metricDesc, v uint64, labels ...string) { e.sample(d, "counter", float64(v), labels) }
	gauge := func(d *metricDesc, v int64, labels ...string) { e.sample(d, "gauge", float64(v), labels) }
	counter(descConnections, s.Connections)
	gauge(descOpen, s.Open)
	counter(descRefused, s.Refused)
	counter(descHealth, s.HealthChecks)
	counter(descIncomplete, s.Incomplete)
	counter(descBytes, s.BytesRead)
	counter(descStage, s.Connections, "accept")
	counter(descStage, s.Chunks, "read")
	counter(descStage, s.Received, "decrypt")
	counter(descStage, s.Validated, "validate")
	counter(descStage, s.TotalEmitted(), "emit")
	gauge(descQueued, max(s.Queued(), 0))
	counterFamily := func(d *metricDesc, m map[string]uint64) {
		for _, k := range sortedKeys(m) {
			counter(d, m[k], k)
		}
	}
	counterFamily(descEmitted, s.Emitted)
	dropped := maps.Clone(s.Dropped)
	if dropped == nil {
		dropped = map[string]uint64{}
	}
	for _, r := range DropReasons {
		dropped[r] += 0 // present at zero from the start
	}
	counterFamily(descDropped, dropped)
	counterFamily(descSinkErrors, s.SinkErrors)
	counterFamily(descFellBack, s.FellBack)
	for _, k := range sortedKeys(s.Queues) {
		gauge(descQueue, s.Queues[k], k)
	}
	gauge(descHeld, s.Held)
	counter(descLossy, s.DialectLossy)
	for _, k := range sortedKeys(s.Durable) {
		q := s.Durable[k]
		gauge(descDiskResults, q.Results, k)
		gauge(descDiskBytes, q.Bytes, k)
		e.sample(descDiskOldest, "gauge", q.OldestSeconds, []string{k})
		counter(descReplayed, q.Replayed, k)
		counter(descCorrupt, q.Corrupt, k)
		counter(descLost, q.Lost, k)
		counter(descLostUnknown, q.LostUnknown, k)
	}
	e.sample(descDecrypt, "counter", float64(s.DecryptNanos)/1e9, []string{c.src.Method})
	for _, k := range sortedKeys(s.SinkDown) {
		e.sample(descSinkDown, "gauge", float64(s.SinkDown[k]), []string{k})
	}
	e.histogram(descLatency, s.Latency)
	b := c.src.Build
	e.sample(descBuild, "gauge", 1, []string{b.Version, b.GoVersion, b.Revision})
	if r := c.src.Reloads; r != nil {
		counter(descReloads, r.total.Load())
		counter(descReloadFails, r.failures.Load())
		e.sample(descLastReload, "gauge", float64(r.last.Load())/1e9, nil)
		ok := 0.0
		if !r.lastFailed.Load() {
			ok = 1
		}
		e.sample(descLastOK, "gauge", ok, nil)
	}
	if c.src.Process != nil {
		p := c.src.Process()
		e.sample(descCPU, "counter", p.CPUSeconds, nil)
		gauge(descRSS, p.ResidentBytes)
		gauge(descVSZ, p.VirtualBytes)
		gauge(descFDs, p.OpenFDs)
		e.sample(descStart, "gauge", p.StartTimeUnix, nil)
		gauge(descProcs, p.Processes)
	}
	counterFamily(descSecrets, s.SecretMatches)
	counterFamily(descIdentity, s.IdentityRefused)
}
