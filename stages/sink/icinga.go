package sink

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"nsca_fast/stages/codec"
)

// Errors of the Icinga 2 API sink. Write wraps the first three with the
// last failure's details; NewIcinga wraps ErrIcingaConfig.
var (
	ErrIcingaUnavailable = errors.New("sink: icinga2: api unavailable")
	ErrIcingaAuth        = errors.New("sink: icinga2: api refused the credentials or permissions")
	ErrIcingaBackoff     = errors.New("sink: icinga2: api unavailable, retrying later")
	ErrIcingaConfig      = errors.New("sink: icinga2: bad configuration")
)

// Defaults: MaxInFlight and Timeout take them when zero; Retries, where 0
// means no retry, is the caller's to default (icinga2_retries=3).
const (
	DefaultIcingaMaxInFlight = 8
	DefaultIcingaTimeout     = 10 * time.Second
	DefaultIcingaRetries     = 3
)

const (
	// icingaFirstBackoff is the wait before the first retry of a request;
	// each further retry waits twice as long, up to icingaMaxBackoff.
	icingaFirstBackoff = 250 * time.Millisecond
	icingaMaxBackoff   = 5 * time.Second
	// icingaIdleTimeout is below the 10 s after which Icinga 2 closes an
	// idle HTTP connection, so that a kept-alive connection is not reused
	// just as Icinga closes it (a POST cannot be replayed transparently).
	icingaIdleTimeout = 5 * time.Second
	// icingaMaxBody bounds how much of a response is read: Icinga's answers
	// are a few hundred bytes, a verbose error with its stack trace a few KB.
	icingaMaxBody = 64 << 10
	// After a batch failed for a reason of the API as a whole, Write hands
	// batches straight to the fallback for a while, doubling from
	// icingaDownFirst to icingaDownMax while the API stays down, so an
	// outage costs the pipeline one retry cycle per interval, not per batch.
	icingaDownFirst = time.Second
	icingaDownMax   = 10 * time.Second
)

// IcingaConfig says where and how the Icinga sink posts results.
type IcingaConfig struct {
	// URL is the API's base URL, e.g. https://icinga.example.org:5665; a
	// path prefix (behind a reverse proxy) is kept. With TLS verification
	// the host must be a name in Icinga's certificate, which Icinga's own
	// CA issues for the NodeName only.
	URL string
	// User and Password authenticate with HTTP basic auth (an ApiUser with
	// password).
	User, Password string
	// CertFile and KeyFile are a PEM client certificate and key (an ApiUser
	// with client_cn), instead of or as well as basic auth.
	CertFile, KeyFile string
	// CAFile is the PEM CA that signed the API's certificate (Icinga's
	// /var/lib/icinga2/certs/ca.crt); "" trusts the system's CAs.
	CAFile string
	// Insecure skips the verification of the API's certificate.
	Insecure bool
	// MaxInFlight bounds the requests under way at once and the kept-alive
	// connections; 0 means DefaultIcingaMaxInFlight.
	MaxInFlight int
	// Timeout bounds one request, connecting included; 0 means
	// DefaultIcingaTimeout.
	Timeout time.Duration
	// Retries is how many times a request that failed for a passing reason
	// is sent again, waiting 250 ms before the first retry and twice as
	// long before each next one (at most 5 s). 0 means none, as
	// icinga2_retries=0 does.
	Retries int
	// CheckSource is reported to Icinga as the results' check_source;
	// "" means this machine's host name.
	CheckSource string
	// Rejected is called for a result Icinga refused for good (404 unknown
	// object, 400 invalid values, 403 passive checks disabled): it is not
	// retried, not handed to the fallback. status is 0 for a result refused
	// without asking Icinga (a name with '!', which no object can have).
	// Write calls it from its own goroutine, in the order of the batch,
	// before it returns.
	Rejected func(it Item, status int, reason string)
}

// Icinga posts check results to Icinga 2's REST API
// (/v1/actions/process-check-result), one request per result over
// kept-alive connections, with a bounded number in flight.
type Icinga struct {
	cfg      IcingaConfig
	endpoint string
	source   string
	client   *http.Client
	retries  int
	// batchLimit bounds one Write: every attempt of one result with its
	// back-off, the longest a result can legitimately take.
	batchLimit time.Duration

	down    backoff // Write fails fast while it lasts
	downErr error

	// scratch buffers reused across Writes (Write is never concurrent).
	state  []itemState
	sorted []Item
}

// NewIcinga checks cfg and loads its certificates. It does not connect:
// the first Write does.
func NewIcinga(cfg IcingaConfig) (*Icinga, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrIcingaConfig, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, bad("url %q: %v", cfg.URL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		// Icinga itself speaks HTTPS only; plain HTTP can only reach a proxy.
		return nil, bad("url %q: scheme must be https (or http to a proxy)", cfg.URL)
	}
	if u.Host == "" {
		return nil, bad("url %q has no host", cfg.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, bad("url %q: give credentials as user and password, and no query or fragment", cfg.URL)
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, bad("a client certificate needs both its certificate and its key file")
	}
	if cfg.User == "" && cfg.CertFile == "" {
		return nil, bad("no credentials: give a user and password, or a client certificate and key")
	}
	if cfg.User != "" && cfg.Password == "" {
		return nil, bad("user %q has no password", cfg.User)
	}
	switch {
	case cfg.MaxInFlight < 0:
		return nil, bad("max in flight %d is negative", cfg.MaxInFlight)
	case cfg.MaxInFlight == 0:
		cfg.MaxInFlight = DefaultIcingaMaxInFlight
	}
	switch {
	case cfg.Timeout < 0:
		return nil, bad("timeout %v is negative", cfg.Timeout)
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultIcingaTimeout
	}
	if cfg.Retries < 0 {
		return nil, bad("retries %d is negative", cfg.Retries)
	}
	retries := cfg.Retries
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, bad("ca file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, bad("ca file %s holds no PEM certificate", cfg.CAFile)
		}
		tlsConf.RootCAs = pool
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, bad("client certificate: %v", err)
		}
		tlsConf.Certificates = []tls.Certificate{cert}
	}
	source := cfg.CheckSource
	if source == "" {
		if source, err = os.Hostname(); err != nil || source == "" {
			source = "nsca_fast"
		}
	}
	transport := &http.Transport{
		// No Proxy: HTTPS_PROXY and friends in a daemon's environment must
		// not reroute check results.
		DialContext:         (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: cfg.Timeout,
		MaxConnsPerHost:     cfg.MaxInFlight,
		MaxIdleConns:        cfg.MaxInFlight,
		MaxIdleConnsPerHost: cfg.MaxInFlight,
		IdleConnTimeout:     icingaIdleTimeout,
	}
	var retryWaits time.Duration
	for i := 0; i < retries; i++ {
		retryWaits += retryWait(i)
	}
	return &Icinga{
		cfg:      cfg,
		endpoint: strings.TrimRight(u.String(), "/") + "/v1/actions/process-check-result",
		source:   source,
		client: &http.Client{
			Transport: transport,
			// A redirect would turn the POST into a GET or resend it
			// elsewhere; it is reported as a failure instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		retries:    retries,
		batchLimit: time.Duration(retries+1)*cfg.Timeout + retryWaits,
		down:       backoff{first: icingaDownFirst, max: icingaDownMax},
	}, nil
}

// retryWait is the back-off before retry i (0 for the first).
func retryWait(i int) time.Duration {
	d := icingaFirstBackoff
	for ; i > 0 && d < icingaMaxBackoff; i-- {
		d *= 2
	}
	return min(d, icingaMaxBackoff)
}

// Name is "icinga2", the sink's name in counters and logs.
func (s *Icinga) Name() string { return "icinga2" }

// Close drops the kept-alive connections.
func (s *Icinga) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// icingaRequest is the body of a process-check-result request. The object
// is named in the body ("host", or "service" as host!service: the
// parameters Icinga 2.13 documents for naming one object), which Icinga
// looks up directly; a "filter" would be evaluated against every object.
type icingaRequest struct {
	Type            string   `json:"type"`
	Host            string   `json:"host,omitempty"`
	Service         string   `json:"service,omitempty"`
	ExitStatus      int      `json:"exit_status"`
	PluginOutput    string   `json:"plugin_output"`
	PerformanceData []string `json:"performance_data,omitempty"`
	CheckSource     string   `json:"check_source,omitempty"`
	ExecutionStart  int64    `json:"execution_start,omitempty"`
	ExecutionEnd    int64    `json:"execution_end,omitempty"`
	// Verbose makes Icinga say why a request found no object: an unknown
	// object, or an ApiUser lacking the permission, which Icinga also
	// answers with 404 and which must not drop results.
	Verbose bool `json:"verbose"`
}

// IcingaRequest returns the JSON body posted to
// /v1/actions/process-check-result for it; the URL has no query part.
//
// What NSCA carries is mapped onto what Icinga accepts:
//   - The output is split as Nagios splits plugin output: the first line is
//     `text|perfdata`; the following lines are long output up to the first
//     line holding a `|`, whose text before the `|` is still long output
//     and whose rest, with every line after it, is more performance data.
//     plugin_output is the text (short output, then the long output lines,
//     trailing blanks of a text cut at `|` and trailing empty lines
//     removed); multi-line output stays multi-line.
//   - performance_data is the performance data split at blanks outside
//     single quotes, so `'my label'=1` stays one item as the plugin wrote
//     it; it is left out when empty.
//   - A service's return code outside 0..3 becomes 3 (UNKNOWN), as Icinga
//     would read it anyway. A host's 0 stays 0 (UP) and everything else
//     becomes 1 (DOWN): Icinga refuses other host codes, and 2
//     (UNREACHABLE for a Nagios passive host check) and 3 (a plugin's
//     UNKNOWN) are not UP.
//   - execution_start and execution_end are it.Time, the receipt time,
//     which is the time the command file path gives Icinga too; the
//     client's own clock may be off. Icinga ignores (with a 200) a result
//     older than the object's last one, so two results for one object in
//     the same second both count only because they are posted in order.
//     A zero Time leaves them out and Icinga uses its own time.
//   - check_source is checkSource, left out when empty.
func IcingaRequest(it Item, checkSource string) []byte {
	r := it.Result
	req := icingaRequest{CheckSource: checkSource, Verbose: true}
	req.PluginOutput, req.PerformanceData = splitPluginOutput(r.Output)
	if r.Service == "" {
		req.Type, req.Host = "Host", r.Host
		if r.ReturnCode != 0 {
			req.ExitStatus = 1
		}
	} else {
		req.Type, req.Service = "Service", r.Host+"!"+r.Service
		req.ExitStatus = int(r.ReturnCode)
		if req.ExitStatus < 0 || req.ExitStatus > 3 {
			req.ExitStatus = 3
		}
	}
	if it.Time > 0 {
		req.ExecutionStart, req.ExecutionEnd = it.Time, it.Time
	}
	// Marshal cannot fail on this type. JSON text is Unicode: bytes of the
	// output that are not UTF-8 (a Latin-1 plugin) become U+FFFD.
	b, _ := json.Marshal(req)
	return b
}

// splitPluginOutput splits raw plugin output into Icinga's plugin_output
// and performance_data by Nagios's rule, see IcingaRequest.
func splitPluginOutput(out string) (text string, perf []string) {
	lines := strings.Split(out, "\n")
	var b strings.Builder
	var perfText []string
	inPerf := false
	for i, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if inPerf {
			perfText = append(perfText, line)
			continue
		}
		if j := strings.IndexByte(line, '|'); j >= 0 {
			perfText = append(perfText, line[j+1:])
			line = strings.TrimRight(line[:j], " \t")
			// Nagios: after the first line, a `|` starts performance data
			// that runs to the end of the output.
			inPerf = i > 0
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	text = strings.TrimRight(b.String(), "\n")
	return text, splitPerfdata(strings.Join(perfText, " "))
}

// splitPerfdata splits performance data at blanks outside single quotes.
// A quote inside a quoted label is written as two quotes, which toggle
// twice and so need no special case.
func splitPerfdata(s string) []string {
	var out []string
	start, quoted := -1, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case !quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// itemState is what became of one item of a batch.
type itemState struct {
	done     bool // delivered or rejected: consumed
	rejected bool
	status   int // rejected: the HTTP status (0: refused without sending)
	reason   string
}

// failure is why a request did not deliver its result.
type failure struct {
	err error
	// object: Icinga answered for the object (a 5xx in a per-object
	// result): other objects may still be fine. Otherwise the API as a
	// whole failed (connection, TLS, authentication, proxy error), and
	// the batch stops.
	object bool
	// final: retrying cannot help (the API's certificate does not verify).
	final bool
}

// batch is the shared state of one Write.
type batch struct {
	ctx     context.Context // ends at the batch's deadline
	stop    chan struct{}   // closed when the API failed: start nothing new
	once    sync.Once
	mu      sync.Mutex
	err     error // the first failure that left items undelivered
	apiDown bool  // a failure of the API as a whole
}

func (b *batch) fail(err error, apiDown bool) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.apiDown = b.apiDown || apiDown
	b.mu.Unlock()
	if apiDown {
		b.once.Do(func() { close(b.stop) })
	}
}

func (b *batch) stopped() bool {
	select {
	case <-b.stop:
		return true
	default:
		return b.ctx.Err() != nil
	}
}

// Write posts items, up to MaxInFlight at once. Results for one object
// (host, or host and service) are posted one after the other in their
// order, and once one of them could not be delivered the later ones are
// not sent either, so Icinga never sees them out of order.
//
// Write reorders items in place: on return items[:n] are the items
// consumed, delivered or rejected for good (reported through Rejected),
// and items[n:] the items to hand to the fallback, each part in the
// original order. err says why items[n:] were not delivered.
//
// A request that fails for a passing reason (connection, timeout, 5xx,
// 401, an ApiUser lacking the permission) is retried; once its retries are
// used up the API is taken as down: no further request is started, and
// for a while after, Write returns ErrIcingaBackoff at once. A result whose
// request Icinga received but whose answer was lost may be posted again, or
// also handed to the fallback: delivery is at least once. Write returns
// within (Retries+1) times Timeout plus the retries' back-off.
func (s *Icinga) Write(items []Item) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	if left := s.down.left(); left > 0 {
		return 0, fmt.Errorf("%w for %v: %v", ErrIcingaBackoff, left.Round(time.Millisecond), s.downErr)
	}
	if cap(s.state) < len(items) {
		s.state = make([]itemState, len(items))
	} else {
		s.state = s.state[:len(items)]
		clear(s.state)
	}
	lanes := s.lanes(items)

	ctx, cancel := context.WithTimeout(context.Background(), s.batchLimit)
	defer cancel()
	b := &batch{ctx: ctx, stop: make(chan struct{})}
	work := make(chan []int, len(lanes))
	for _, l := range lanes {
		work <- l
	}
	close(work)
	var wg sync.WaitGroup
	for range min(s.cfg.MaxInFlight, len(lanes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lane := range work {
				s.postLane(b, items, lane)
			}
		}()
	}
	wg.Wait()

	if b.err == nil && ctx.Err() != nil {
		b.err = fmt.Errorf("%w: the batch took longer than %v", ErrIcingaUnavailable, s.batchLimit)
	}
	if b.apiDown {
		s.down.failed()
		s.downErr = b.err
	} else {
		s.down.succeeded()
	}
	if s.cfg.Rejected != nil {
		for i, st := range s.state {
			if st.rejected {
				s.cfg.Rejected(items[i], st.status, st.reason)
			}
		}
	}
	n := s.partition(items)
	if n == len(items) {
		return n, nil
	}
	return n, b.err
}

// lanes groups the indexes of items by object, each lane in batch order.
func (s *Icinga) lanes(items []Item) [][]int {
	type object struct{ host, service string }
	index := make(map[object]int, len(items))
	var lanes [][]int
	for i, it := range items {
		k := object{it.Result.Host, it.Result.Service}
		l, ok := index[k]
		if !ok {
			l = len(lanes)
			index[k] = l
			lanes = append(lanes, nil)
		}
		lanes[l] = append(lanes[l], i)
	}
	return lanes
}

// postLane posts the items of one object in order, stopping at the first
// that could not be delivered.
func (s *Icinga) postLane(b *batch, items []Item, lane []int) {
	for _, i := range lane {
		if b.stopped() {
			return
		}
		r := items[i].Result
		if strings.Contains(r.Host, "!") || strings.Contains(r.Service, "!") {
			s.state[i] = itemState{done: true, rejected: true, reason: "object names cannot contain '!'"}
			continue
		}
		status, reason, f := s.post(b, items[i])
		if f != nil {
			if f.object {
				b.fail(fmt.Errorf("%s: %w", objectName(r), f.err), false)
			} else {
				b.fail(f.err, true)
			}
			return
		}
		s.state[i] = itemState{done: true, rejected: status < 200 || status > 299, status: status, reason: reason}
	}
}

// objectName is the name Icinga gives the object r is for.
func objectName(r codec.Result) string {
	if r.Service == "" {
		return r.Host
	}
	return r.Host + "!" + r.Service
}

// post sends one result with its retries. It returns the status with which
// Icinga consumed the result (200, or the rejection's status and reason),
// or why it was not delivered.
func (s *Icinga) post(b *batch, it Item) (int, string, *failure) {
	body := IcingaRequest(it, s.source)
	for attempt := 0; ; attempt++ {
		status, reason, f := s.attempt(b.ctx, body)
		if f == nil {
			return status, reason, nil
		}
		if f.final || attempt >= s.retries || b.ctx.Err() != nil {
			return 0, "", f
		}
		select {
		case <-time.After(retryWait(attempt)):
		case <-b.stop:
			return 0, "", f
		case <-b.ctx.Done():
			return 0, "", f
		}
	}
}

// icingaAnswer is what Icinga answers: per-object results, or an error
// for the request as a whole.
type icingaAnswer struct {
	Results []struct {
		Code   float64 `json:"code"`
		Status string  `json:"status"`
	} `json:"results"`
	Error      float64 `json:"error"`
	Status     string  `json:"status"`
	Diagnostic string  `json:"diagnostic_information"`
}

// attempt sends one request and classifies the answer.
func (s *Icinga) attempt(ctx context.Context, body []byte) (int, string, *failure) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, "", &failure{err: fmt.Errorf("%w: %v", ErrIcingaUnavailable, err), final: true}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nsca_fast")
	if s.cfg.User != "" {
		req.SetBasicAuth(s.cfg.User, s.cfg.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var verify *tls.CertificateVerificationError
		return 0, "", &failure{err: fmt.Errorf("%w: %v", ErrIcingaUnavailable, err), final: errors.As(err, &verify)}
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, icingaMaxBody))
	// Drain what is left so the connection can be kept alive.
	io.Copy(io.Discard, io.LimitReader(resp.Body, icingaMaxBody))
	resp.Body.Close()
	return classify(resp.StatusCode, data)
}

// classify maps Icinga's answer to an outcome: 2xx delivered; a refusal of
// the result itself (400, 404 unknown object, a 4xx in a per-object result
// such as 403 passive checks disabled) consumed for good; anything else a
// failure to retry.
func classify(code int, data []byte) (int, string, *failure) {
	var a icingaAnswer
	parsed := json.Unmarshal(data, &a) == nil
	reason := strings.TrimSpace(a.Status)
	perObject := parsed && len(a.Results) > 0
	if perObject {
		reason = strings.TrimSpace(a.Results[0].Status)
	}
	if reason == "" {
		reason = http.StatusText(code)
	}
	what := fmt.Sprintf("%d %s", code, reason)
	switch {
	case code >= 200 && code < 300:
		return code, "", nil
	case code == http.StatusNotFound && strings.Contains(a.Diagnostic, "Missing permission"):
		// Icinga answers 404 when the ApiUser may not run the action.
		perm := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(a.Diagnostic, "\n", 2)[0], "Error: "))
		return 0, "", &failure{err: fmt.Errorf("%w: %s (%s)", ErrIcingaAuth, what, perm)}
	case code == http.StatusBadRequest || code == http.StatusNotFound:
		return code, reason, nil
	case code >= 400 && code < 500 && perObject:
		return code, reason, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return 0, "", &failure{err: fmt.Errorf("%w: %s", ErrIcingaAuth, what)}
	case code >= 500 && perObject:
		return 0, "", &failure{err: fmt.Errorf("%w: %s", ErrIcingaUnavailable, what), object: true}
	}
	return 0, "", &failure{err: fmt.Errorf("%w: %s", ErrIcingaUnavailable, what)}
}

// partition moves the consumed items to the front, keeping the order
// within both parts, and returns how many there are.
func (s *Icinga) partition(items []Item) int {
	s.sorted = s.sorted[:0]
	for i, it := range items {
		if s.state[i].done {
			s.sorted = append(s.sorted, it)
		}
	}
	n := len(s.sorted)
	for i, it := range items {
		if !s.state[i].done {
			s.sorted = append(s.sorted, it)
		}
	}
	copy(items, s.sorted)
	clear(s.sorted) // drop the references to outputs
	return n
}
