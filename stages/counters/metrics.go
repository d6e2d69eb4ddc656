package counters

import (
	"bytes"
	"net/http"
	"reflect"
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
	return appendSortedKeys(make([]string, 0, len(m)), m)
}

// scrape is what one scrape renders: the snapshot, read once, and the
// process metrics, read once when a row first needs them.
type scrape struct {
	e    *exposition
	s    Snapshot
	src  Source
	proc *ProcessStats
}

// collect writes the current values, row by row of the table.
func (c *collector) collect(e *exposition) {
	sc := &scrape{e: e, s: c.src.Snapshot(), src: c.src}
	for _, r := range rows {
		switch {
		case r.desc == nil:
		case r.samples != nil:
			r.samples(sc, r)
		case r.shape == keyed:
			sc.family(r)
		default:
			sc.put(r, float(r.in(&sc.s)))
		}
	}
}

// put writes one sample of r's family.
func (sc *scrape) put(r *row, v float64, labelValues ...string) {
	sc.e.sample(r.desc, r.kind, v, labelValues)
}

// family writes r's family by key, in the order of the keys, with its
// zero keys present at zero from the start.
func (sc *scrape) family(r *row) {
	m := r.in(&sc.s)
	keys := slices.Clone(r.zero)
	for it := m.MapRange(); it.Next(); {
		keys = append(keys, it.Key().String())
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		v := 0.0
		if n := m.MapIndex(reflect.ValueOf(k)); n.IsValid() {
			v = float(n)
		}
		sc.put(r, v, k)
	}
}

// process reads the process metrics, nil when none are served.
func (sc *scrape) process() *ProcessStats {
	if sc.proc == nil && sc.src.Process != nil {
		p := sc.src.Process()
		sc.proc = &p
	}
	return sc.proc
}

// The derived families of the table: from several fields, or from the
// Source rather than the snapshot.

func stageItems(sc *scrape, r *row) {
	s := sc.s
	sc.put(r, float64(s.Connections), "accept")
	sc.put(r, float64(s.Chunks), "read")
	sc.put(r, float64(s.Received), "decrypt")
	sc.put(r, float64(s.Validated), "validate")
	sc.put(r, float64(s.TotalEmitted()), "emit")
}

func queued(sc *scrape, r *row) { sc.put(r, float64(max(sc.s.Queued(), 0))) }

func decryptSeconds(sc *scrape, r *row) {
	sc.put(r, float64(sc.s.DecryptNanos)/1e9, sc.src.Method)
}

func latency(sc *scrape, r *row) { sc.e.histogram(r.desc, sc.s.Latency) }

func buildInfo(sc *scrape, r *row) {
	b := sc.src.Build
	sc.put(r, 1, b.Version, b.GoVersion, b.Revision)
}

// durable renders one value of every destination's durable queue.
func durable(value func(DurableQueue) float64) func(*scrape, *row) {
	return func(sc *scrape, r *row) {
		for _, k := range sortedKeys(sc.s.Durable) {
			sc.put(r, value(sc.s.Durable[k]), k)
		}
	}
}

// reloads renders one value of the Source's Reloads, if it has one.
func reloads(value func(*Reloads) float64) func(*scrape, *row) {
	return func(sc *scrape, r *row) {
		if sc.src.Reloads != nil {
			sc.put(r, value(sc.src.Reloads))
		}
	}
}

func lastReloadSucceeded(r *Reloads) float64 {
	if r.lastFailed.Load() {
		return 0
	}
	return 1
}

// process renders one of the process metrics, if they are served.
func process(value func(ProcessStats) float64) func(*scrape, *row) {
	return func(sc *scrape, r *row) {
		if p := sc.process(); p != nil {
			sc.put(r, value(*p))
		}
	}
}
