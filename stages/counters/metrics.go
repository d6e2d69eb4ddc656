package counters

import (
	"bytes"
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// MetricsHandler serves Prometheus metrics in the text exposition format,
// read from snapshot at scrape time, so metrics cost the pipeline nothing
// between scrapes. method labels the decryption time (for example
// "tripledes"). It writes the format itself: the Prometheus client library
// and its protobuf dependency made up a third of the binary, whose pages
// every worker process maps.
func MetricsHandler(snapshot func() Snapshot, method string) http.Handler {
	c := &collector{snapshot: snapshot, method: method}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var e exposition
		c.collect(&e)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(e.bytes())
	})
}

type collector struct {
	snapshot func() Snapshot
	method   string
}

// metricDesc is one metric family: its name, help text and label names.
type metricDesc struct {
	name, help string
	labels     []string
}

func desc(name, help string, labels ...string) *metricDesc {
	return &metricDesc{name: "nsca_" + name, help: help, labels: labels}
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
	if e.samples == nil {
		e.kinds, e.samples = map[*metricDesc]string{}, map[*metricDesc]*bytes.Buffer{}
	}
	b, ok := e.samples[d]
	if !ok {
		b = new(bytes.Buffer)
		e.order, e.kinds[d], e.samples[d] = append(e.order, d), kind, b
	}
	b.WriteString(d.name)
	for i, l := range d.labels {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		b.WriteString(sep + l + "=" + strconv.Quote(labelValues[i]))
	}
	if len(d.labels) > 0 {
		b.WriteByte('}')
	}
	b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
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
	descReceived    = desc("packets_total", "Packets received, by result: emitted or dropped.", "result")
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
	descSecrets     = desc("secret_matches_total", "Connections whose first packet a secret decrypted, by secret: password/METHOD, password_file:LINE/METHOD or an identity's name (never the password).", "secret")
	descIdentity    = desc("identity_refused_total", "Results refused because the identity that sent them has no right to them (identities_file), by identity.", "identity")
)

// collect writes the current values.
func (c *collector) collect(e *exposition) {
	s := c.snapshot()
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
	counter(descReceived, s.TotalEmitted(), "emitted")
	counter(descReceived, s.TotalDropped(), "dropped")
	gauge(descQueued, max(s.Queued(), 0))
	counterFamily := func(d *metricDesc, m map[string]uint64) {
		for _, k := range sortedKeys(m) {
			counter(d, m[k], k)
		}
	}
	counterFamily(descEmitted, s.Emitted)
	counterFamily(descDropped, s.Dropped)
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
	e.sample(descDecrypt, "counter", float64(s.DecryptNanos)/1e9, []string{c.method})
	counterFamily(descSecrets, s.SecretMatches)
	counterFamily(descIdentity, s.IdentityRefused)
}
