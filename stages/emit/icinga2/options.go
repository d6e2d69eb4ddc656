package icinga2

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"nsca_fast/conf/option"
)

// Defaults of the options the sink itself needs: New takes MaxInFlight and
// Timeout as these when zero. Rows declares them as the defaults of
// icinga2_max_in_flight, icinga2_timeout and icinga2_retries.
const (
	DefaultMaxInFlight = 8
	DefaultTimeout     = 10 * time.Second
	DefaultRetries     = 3
)

// Options are the Icinga 2 sink's settings, the icinga2_* options of
// nsca.cfg: Rows parses each into these fields (checking its range or
// form), and Validate checks them as a whole.
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
	// settings of the destination rather than of the sink, so package
	// conf, which resolves and checks the fallbacks of every engine, adds
	// the icinga2_fallback row.
	QueueSize int
	Fallback  string
}

// Rows are the icinga2_* options of nsca.cfg, in the order of the
// documentation and Dump, each filling its field of Options; package conf
// nests them into its table.
func Rows() []option.Row[Options] {
	return []option.Row[Options]{
		{Name: "icinga2_api_url", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.URL }, option.Optional(checkURL)),
			Doc: "Base URL of an Icinga 2 API (https://host:5665): every result is also posted to " +
				"/v1/actions/process-check-result. Empty: off."},
		{Name: "icinga2_api_user", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.User }, nil),
			Doc:  "ApiUser name for basic authentication; it needs the permission actions/process-check-result."},
		{Name: "icinga2_api_password", Origin: option.OriginNew, Secret: true,
			Kind: option.Text(func(o *Options) *string { return &o.Password }, nil),
			Doc:  "Password of icinga2_api_user."},
		{Name: "icinga2_client_cert", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.CertFile }, nil),
			Doc:  "PEM client certificate to authenticate with instead of a password (an ApiUser with client_cn)."},
		{Name: "icinga2_client_key", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.KeyFile }, nil),
			Doc:  "PEM private key of icinga2_client_cert."},
		{Name: "icinga2_ca_file", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.CAFile }, nil),
			Doc:  "PEM CA certificate(s) that sign the API's certificate. Empty: the system's CAs."},
		{Name: "icinga2_verify_tls", Default: "1", Origin: option.OriginNew,
			Kind: option.Boolean(func(o *Options) *bool { return &o.VerifyTLS }),
			Doc:  "1: verify the API's certificate and name. 0: do not (only for testing)."},
		{Name: "icinga2_max_in_flight", Default: strconv.Itoa(DefaultMaxInFlight), Origin: option.OriginNew,
			Kind: option.Integer(func(o *Options) *int { return &o.MaxInFlight }, 1, 1024, ""),
			Doc:  "Most requests to the API at once, 1..1024, over keep-alive connections."},
		{Name: "icinga2_timeout", Default: option.SecondsText(DefaultTimeout), Origin: option.OriginNew,
			Kind: option.Seconds(func(o *Options) *time.Duration { return &o.Timeout }, 1, 300),
			Doc:  "Seconds one request may take, 1..300."},
		{Name: "icinga2_retries", Default: strconv.Itoa(DefaultRetries), Origin: option.OriginNew,
			Kind: option.Integer(func(o *Options) *int { return &o.Retries }, 0, 100, ""),
			Doc: "Retries, with doubling back-off, of a request that failed with 5xx, 401, 403 or a lost connection, " +
				"0..100; then the result goes to icinga2_fallback. A result refused for good (404 unknown object, " +
				"400) is logged, counted and not retried."},
		{Name: "icinga2_queue_size", Default: "10000", Origin: option.OriginNew,
			Kind: option.Integer(func(o *Options) *int { return &o.QueueSize }, 1, 1000000, ""),
			Doc: "Results waiting for the API, 1..1000000; when the queue is full, further results go to " +
				"icinga2_fallback at once, so a slow API never stalls the other sinks."},
	}
}

// checkURL checks the form of icinga2_api_url, for its row and Validate:
// an http or https base URL with a host. Its messages read after
// "icinga2_api_url=value ".
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "https" && u.Scheme != "http":
		// Icinga itself speaks HTTPS only; plain HTTP can only reach a proxy.
		return errors.New("must start with https:// (or http://)")
	case u.Host == "":
		return errors.New("has no host")
	}
	return nil
}

// On says whether the sink is configured: URL is set.
func (o *Options) On() bool { return o.URL != "" }

// Files names the options whose files New reads (when set), so that a
// configuration check can try them as the daemon's user.
func (o *Options) Files() []string {
	return []string{"icinga2_client_cert", "icinga2_client_key", "icinga2_ca_file"}
}

// Validate checks the options of an Icinga 2 sink (URL set) as a whole; a
// *option.Error names the option to fix.
func (o *Options) Validate() error {
	conflict := func(name, reason string) error {
		return &option.Error{Option: name, Conflict: true, Reason: reason, Kind: errConfig}
	}
	bad := func(format string, args ...any) error {
		return &option.Error{Option: "icinga2_api_url", Reason: fmt.Sprintf(format, args...), Kind: errConfig}
	}
	if o.User == "" && o.CertFile == "" {
		return conflict("icinga2_api_url", "icinga2_api_url needs icinga2_api_user and icinga2_api_password, "+
			"or icinga2_client_cert and icinga2_client_key")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return conflict("icinga2_client_cert", "icinga2_client_cert and icinga2_client_key go together")
	}
	if err := checkURL(o.URL); err != nil {
		return bad("url %q %v", o.URL, err)
	}
	// The form is checked: the URL parses.
	u, _ := url.Parse(o.URL)
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
