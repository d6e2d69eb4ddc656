package icinga2

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/counters"
)

// Errors of the Icinga 2 API sink. Write wraps the first three with the
// last failure's details; Validate and New wrap errConfig.
var (
	errUnavailable = errors.New("sink: icinga2: api unavailable")
	errAuth        = errors.New("sink: icinga2: api refused the credentials or permissions")
	errBackoff     = errors.New("sink: icinga2: api unavailable, retrying later")
	errConfig      = errors.New("sink: icinga2: bad configuration")
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

// Config says where and how the Icinga sink posts results: its options,
// checked by Options.Validate, and what the daemon gives it besides.
type Config struct {
	Options
	// CheckSource is reported to Icinga as the results' check_source;
	// "" means this machine's host name.
	CheckSource string
	// Stats and Log, when set, count and log the results Icinga refused for
	// good (404 unknown object, 400 bad values) as dropped: they are not
	// retried, and no fallback would make Icinga take them.
	Stats *counters.Stats
	Log   *counters.RateLog
	// Rejected, when set, is also told of each such result. status is 0 for
	// a result refused without asking Icinga (a name with '!', which no
	// object can have). Write calls it from its own goroutine, in the order
	// of the batch, before it returns.
	Rejected func(it sink.Item, status int, reason string)
}

// Icinga posts check results to Icinga 2's REST API
// (/v1/actions/process-check-result), one request per result over
// kept-alive connections, with a bounded number in flight.
type Icinga struct {
	cfg      Config
	endpoint string
	source   string
	client   *http.Client
	retries  int
	// batchLimit bounds one Write: every attempt of one result with its
	// back-off, the longest a result can legitimately take.
	batchLimit time.Duration

	down    sink.Backoff // Write fails fast while it lasts
	downErr error
	refused atomic.Uint64

	// scratch buffers reused across Writes (Write is never concurrent).
	state  []itemState
	sorted []sink.Item
}

// New loads cfg's certificates; cfg.Options are valid (Validate). It does
// not connect: the first Write does.
func New(cfg Config) (*Icinga, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errConfig, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, bad("url %q: %v", cfg.URL, err)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	retries := cfg.Retries
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !cfg.VerifyTLS}
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
		down:       sink.Backoff{First: icingaDownFirst, Max: icingaDownMax},
	}, nil
}

// Name is "icinga2", the sink's name in counters and logs.
func (s *Icinga) Name() string { return "icinga2" }

// dropRejected counts results Icinga 2 refused for good: an unknown
// host or service (404), or values it would not take (400).
const dropRejected = "icinga2_rejected"

// Refused is how many results Icinga 2 has refused for good so far: the
// emit stage counts them as dropped rather than emitted.
func (s *Icinga) Refused() uint64 { return s.refused.Load() }

// rejected accounts for one result Icinga refused for good.
func (s *Icinga) rejected(it sink.Item, status int, reason string) {
	s.refused.Add(1)
	if s.cfg.Rejected != nil {
		s.cfg.Rejected(it, status, reason)
	}
	if s.cfg.Stats != nil {
		s.cfg.Stats.DroppedInSink(dropRejected, 1)
	}
	if s.cfg.Log == nil {
		return
	}
	why := "not sent"
	if status != 0 {
		why = fmt.Sprintf("HTTP %d", status)
	}
	s.cfg.Log.Warningf("sink:icinga2", "icinga2 refused the result for host=%q service=%q (%s): %s; not retried",
		it.Result.Host, it.Result.Service, why, reason)
}

// Close drops the kept-alive connections.
func (s *Icinga) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
