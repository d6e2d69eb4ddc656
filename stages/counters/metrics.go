package counters

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves Prometheus metrics read from snapshot at scrape
// time, so metrics cost the pipeline nothing between scrapes. method labels
// the decryption time (for example "tripledes").
func MetricsHandler(snapshot func() Snapshot, method string) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{snapshot: snapshot, method: method},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

type collector struct {
	snapshot func() Snapshot
	method   string
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("nsca_"+name, help, labels, nil)
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
	descCorrupt     = desc("queue_corrupt_total", "Damaged regions of a durable queue skipped (torn tail, bad checksum, undecodable record).", "sink")
	descDecrypt     = desc("decrypt_seconds_total", "Time spent decrypting, by method.", "method")
)

// Describe sends the descriptions of every metric.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

// Collect sends the current values.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
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
	for k, v := range s.Emitted {
		counter(descEmitted, v, k)
	}
	for k, v := range s.Dropped {
		counter(descDropped, v, k)
	}
	for k, v := range s.SinkErrors {
		counter(descSinkErrors, v, k)
	}
	for k, v := range s.FellBack {
		counter(descFellBack, v, k)
	}
	for k, v := range s.Queues {
		gauge(descQueue, v, k)
	}
	gauge(descHeld, s.Held)
	counter(descLossy, s.DialectLossy)
	for k, q := range s.Durable {
		gauge(descDiskResults, q.Results, k)
		gauge(descDiskBytes, q.Bytes, k)
		ch <- prometheus.MustNewConstMetric(descDiskOldest, prometheus.GaugeValue, q.OldestSeconds, k)
		counter(descReplayed, q.Replayed, k)
		counter(descCorrupt, q.Corrupt, k)
	}
	ch <- prometheus.MustNewConstMetric(descDecrypt, prometheus.CounterValue, float64(s.DecryptNanos)/1e9, c.method)
}
