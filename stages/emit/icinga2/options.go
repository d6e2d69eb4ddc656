package icinga2

import (
	"fmt"
	"net/url"
	"time"

	"nsca_fast/stages/emit/sink"
)

// Defaults of the options the sink itself needs: New takes MaxInFlight and
// Timeout as these when zero. Package conf's table declares them as the
// defaults of icinga2_max_in_flight, icinga2_timeout and icinga2_retries.
const (
	DefaultMaxInFlight = 8
	DefaultTimeout     = 10 * time.Second
	DefaultRetries     = 3
)

// Options are the Icinga 2 sink's settings, the icinga2_* options of
// nsca.cfg: package conf's table parses each into these fields (checking
// its range or form), and Validate checks them as a whole.
type Options struct {
	// URL is the API's base URL (icinga2_api_url), e.g.
	// https://icinga.example.org:5665; a path prefix (behind a reverse
	// proxy) is kept. With TLS verification the host must be a name in
	// Icinga's certificate, which Icinga's own CA issues for the NodeName
	// only. "" means no Icinga 2 sink.
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
	// VerifyTLS checks the API's certificate; without it, it is not checked.
	VerifyTLS bool
	// MaxInFlight bounds the requests under way at once and the kept-alive
	// connections; 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Timeout bounds one request, connecting included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Retries is how many times a request that failed for a passing reason
	// is sent again, waiting 250 ms before the first retry and twice as
	// long before each next one (at most 5 s). 0 means none.
	Retries int
	// QueueSize bounds the results queued for the destination, and
	// Fallback is where those it cannot deliver go (see conf.Fallback):
	// settings of the destination rather than of the sink.
	QueueSize int
	Fallback  string
}

// Validate checks the options of an Icinga 2 sink (URL set) as a whole; a
// *sink.OptionError names the option to fix.
func (o *Options) Validate() error {
	conflict := func(option, reason string) error {
		return &sink.OptionError{Option: option, Conflict: true, Reason: reason, Kind: errConfig}
	}
	bad := func(format string, args ...any) error {
		return &sink.OptionError{Option: "icinga2_api_url", Reason: fmt.Sprintf(format, args...), Kind: errConfig}
	}
	if o.User == "" && o.CertFile == "" {
		return conflict("icinga2_api_url", "icinga2_api_url needs icinga2_api_user and icinga2_api_password, "+
			"or icinga2_client_cert and icinga2_client_key")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return conflict("icinga2_client_cert", "icinga2_client_cert and icinga2_client_key go together")
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return bad("url %q: %v", o.URL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		// Icinga itself speaks HTTPS only; plain HTTP can only reach a proxy.
		return bad("url %q: scheme must be https (or http to a proxy)", o.URL)
	}
	if u.Host == "" {
		return bad("url %q has no host", o.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return bad("url %q: give credentials as user and password, and no query or fragment", o.URL)
	}
	if o.User != "" && o.Password == "" {
		return bad("user %q has no password", o.User)
	}
	switch {
	case o.MaxInFlight < 0:
		return bad("max in flight %d is negative", o.MaxInFlight)
	case o.Timeout < 0:
		return bad("timeout %v is negative", o.Timeout)
	case o.Retries < 0:
		return bad("retries %d is negative", o.Retries)
	}
	return nil
}
