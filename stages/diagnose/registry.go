package diagnose

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Registry is the table of the sources seen in the last hour: for each
// address its connections, rejected connections, the secret (identity)
// and method it last used, and its last error. It holds at most Max
// sources: when full, those not seen for an hour go, then the least
// recently seen tenth.
type Registry struct {
	mu      sync.Mutex
	sources map[netip.Addr]*Source
	// Max bounds the table; 0 means DefaultMaxSources.
	Max int
}

// DefaultMaxSources bounds a Registry's memory (about 2 MB).
const DefaultMaxSources = 10000

// sourceTTL is how long a source stays listed after it was last seen.
const sourceTTL = time.Hour

// Source is one address's entry.
// Its JSON form is how a worker hands its table to the supervisor.
type Source struct {
	Addr        netip.Addr `json:"a"`
	Connections uint64     `json:"c"`
	Rejected    uint64     `json:"r,omitempty"`
	Secret      string     `json:"s,omitempty"`
	Method      string     `json:"m,omitempty"`
	LastError   string     `json:"e,omitempty"`
	ErrorAt     time.Time  `json:"et"`
	LastSeen    time.Time  `json:"t"`
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{sources: map[netip.Addr]*Source{}} }

// entry returns addr's entry, making room for it; r.mu is held.
func (r *Registry) entry(addr netip.Addr, now time.Time) *Source {
	s, ok := r.sources[addr]
	if ok {
		return s
	}
	limit := r.Max
	if limit <= 0 {
		limit = DefaultMaxSources
	}
	if len(r.sources) >= limit {
		r.evict(now, limit)
	}
	s = &Source{Addr: addr}
	r.sources[addr] = s
	return s
}

// evict drops the sources not seen for sourceTTL and, if that is not
// enough, the least recently seen tenth: O(n) once per tenth of the
// table's size of new sources.
func (r *Registry) evict(now time.Time, limit int) {
	for a, s := range r.sources {
		if now.Sub(s.LastSeen) > sourceTTL {
			delete(r.sources, a)
		}
	}
	if len(r.sources) < limit {
		return
	}
	all := make([]*Source, 0, len(r.sources))
	for _, s := range r.sources {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *Source) int { return a.LastSeen.Compare(b.LastSeen) })
	for _, s := range all[:max(1, len(all)/10)] {
		delete(r.sources, s.Addr)
	}
}

// Seen records a connection from addr whose first packet secret decrypted
// with method.
func (r *Registry) Seen(addr netip.Addr, secret, method string) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	s := r.entry(addr, now)
	s.Connections++
	s.Secret, s.Method, s.LastSeen = secret, method, now
	r.mu.Unlock()
}

// Failed records a connection from addr that was refused for err.
func (r *Registry) Failed(addr netip.Addr, err string) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	s := r.entry(addr, now)
	s.Connections++
	s.Rejected++
	s.LastSeen = now
	if s.LastError == "" || !strings.HasPrefix(s.LastError, "diagnosis: ") || now.Sub(s.ErrorAt) > time.Minute {
		s.LastError, s.ErrorAt = err, now
	}
	r.mu.Unlock()
}

// Diagnosed records the diagnosis of addr as its last error.
func (r *Registry) Diagnosed(addr netip.Addr, text string) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	s := r.entry(addr, now)
	s.LastError, s.ErrorAt = "diagnosis: "+text, now
	if s.LastSeen.IsZero() {
		s.LastSeen = now
	}
	r.mu.Unlock()
}

// Sources returns the entries seen in the last hour, most recent first.
func (r *Registry) Sources() []Source {
	now := time.Now()
	r.mu.Lock()
	out := make([]Source, 0, len(r.sources))
	for _, s := range r.sources {
		if now.Sub(s.LastSeen) <= sourceTTL {
			out = append(out, *s)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Source) int { return b.LastSeen.Compare(a.LastSeen) })
	return out
}

// Handler serves the table as text, one source per line.
func (r *Registry) Handler() http.Handler {
	return Handler(func() ([]Source, []string) { return r.Sources(), nil })
}

// Handler serves the sources that list returns as text, one per line,
// after its notes (what is missing from the list), one comment line each.
func Handler(list func() (sources []Source, notes []string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sources, notes := list()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var b strings.Builder
		b.WriteString("# sources seen in the last hour, most recent first\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "# %s\n", n)
		}
		b.WriteString("# source\tconnections\trejected\tsecret\tmethod\tlast_seen\tlast_error\n")
		for _, s := range sources {
			fmt.Fprintf(&b, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Addr, s.Connections, s.Rejected, dash(s.Secret), dash(s.Method),
				s.LastSeen.UTC().Format(time.RFC3339), dash(s.LastError))
		}
		w.Write([]byte(b.String()))
	})
}

// Merge joins the tables of several processes that serve the same port
// into one, as one process's table would read: a source that several saw
// has the sum of their counts, the last error of the one that erred last
// and the secret and method of the one that last decrypted its packets.
// It keeps the limit most recently seen sources (0: DefaultMaxSources)
// seen in the last hour, most recent first.
func Merge(limit int, tables ...[]Source) []Source {
	if limit <= 0 {
		limit = DefaultMaxSources
	}
	merged := map[netip.Addr]*Source{}
	// secretSeen is when the merged entry's secret was last seen used.
	secretSeen := map[netip.Addr]time.Time{}
	for _, table := range tables {
		for _, s := range table {
			m, ok := merged[s.Addr]
			if !ok {
				c := s
				merged[s.Addr] = &c
				secretSeen[s.Addr] = s.LastSeen
				continue
			}
			m.Connections += s.Connections
			m.Rejected += s.Rejected
			if s.Method != "" && (m.Method == "" || s.LastSeen.After(secretSeen[s.Addr])) {
				m.Secret, m.Method = s.Secret, s.Method
				secretSeen[s.Addr] = s.LastSeen
			}
			if s.LastError != "" && (m.LastError == "" || s.ErrorAt.After(m.ErrorAt)) {
				m.LastError, m.ErrorAt = s.LastError, s.ErrorAt
			}
			if s.LastSeen.After(m.LastSeen) {
				m.LastSeen = s.LastSeen
			}
		}
	}
	out := make([]Source, 0, len(merged))
	now := time.Now()
	for _, m := range merged {
		if now.Sub(m.LastSeen) <= sourceTTL {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b Source) int { return b.LastSeen.Compare(a.LastSeen) })
	return out[:min(len(out), limit)]
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
