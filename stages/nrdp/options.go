package nrdp

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"nsca_fast/conf/option"
)

// Defaults of the nrdp_* options; New takes a zero field as its default.
const (
	DefaultMaxConnections = 128
	DefaultMaxRequestSize = 2 << 20
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultTimeout        = 30 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
)

// Options are the NRDP front end's settings, the nrdp_* options of
// nsca.cfg: Rows parses each into these fields, and Validate checks them
// as a whole.
type Options struct {
	// Listen is ADDRESS:PORT to serve NRDP on; "" means off.
	Listen string
	// CertFile and KeyFile are a PEM certificate and key: with them the
	// listener speaks HTTPS only.
	CertFile, KeyFile string
	// Tokens are tokens with any-host rights, which cannot submit
	// commands; identities_file's token keys name identities.
	Tokens []string
	// MaxConnections caps the connections served at once; more wait in
	// the listen queue.
	MaxConnections int
	// MaxRequestSize caps a request's body, in bytes.
	MaxRequestSize int
	// HeaderTimeout bounds the reading of a request's headers; Timeout
	// the reading of its body, and again the handing in of its results
	// and the wait for their outcomes; IdleTimeout a kept-alive
	// connection's wait for its next request.
	HeaderTimeout, Timeout, IdleTimeout time.Duration
}

// Rows are the nrdp_* options of nsca.cfg, in the order of the
// documentation and Dump; package conf nests them into its table.
func Rows() []option.Row[Options] {
	return []option.Row[Options]{
		{Name: "nrdp_listen", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.Listen }, option.Optional(checkListen)),
			Doc: "ADDRESS:PORT to serve NRDP (Nagios Remote Data Processor: NCPA, NSClient++'s NRDPClient, " +
				"send_nrdp) on, at /, /nrdp/, /nrdp/server/ and /nrdp/server/index.php; its results take the " +
				"road of every other front end's. Needs nrdp_tokens or a token in identities_file. Empty: off."},
		{Name: "nrdp_tls_cert", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.CertFile }, nil),
			Doc: "PEM certificate (with its chain) to serve NRDP over HTTPS only; tokens travel in every " +
				"request, in clear over plain HTTP. Empty: plain HTTP."},
		{Name: "nrdp_tls_key", Origin: option.OriginNew,
			Kind: option.Text(func(o *Options) *string { return &o.KeyFile }, nil),
			Doc:  "PEM private key of nrdp_tls_cert."},
		{Name: "nrdp_tokens", Origin: option.OriginNew, Secret: true,
			Kind: tokenList(),
			Doc: "Comma-separated NRDP tokens that may submit results for any host and service, and no " +
				"command. A token limited to some hosts, services, networks or allowed commands is a token " +
				"key of an identity in identities_file instead (authorize \"name\" { token = \"...\"; hosts = ... })."},
		{Name: "nrdp_max_connections", Default: strconv.Itoa(DefaultMaxConnections), Origin: option.OriginNew,
			Kind: option.Integer(func(o *Options) *int { return &o.MaxConnections }, 1, 65536, ""),
			Doc: "NRDP connections served at once, 1..65536; further ones wait in the listen queue. Memory " +
				"for requests is bounded by about 4 × nrdp_max_request_size per connection."},
		{Name: "nrdp_max_request_size", Default: strconv.Itoa(DefaultMaxRequestSize), Origin: option.OriginNew,
			Kind: option.Integer(func(o *Options) *int { return &o.MaxRequestSize }, 65536, 1<<30, " bytes"),
			Doc: "Bytes an NRDP request body may hold, 65536..2^30; a larger one is answered 413. The default " +
				"holds several thousand results."},
		{Name: "nrdp_header_timeout", Default: option.SecondsText(DefaultHeaderTimeout), Origin: option.OriginNew,
			Kind: option.Seconds(func(o *Options) *time.Duration { return &o.HeaderTimeout }, 1, 300),
			Doc:  "Seconds a client may take to send a request's headers, 1..300."},
		{Name: "nrdp_timeout", Default: option.SecondsText(DefaultTimeout), Origin: option.OriginNew,
			Kind: option.Seconds(func(o *Options) *time.Duration { return &o.Timeout }, 1, 300),
			Doc: "Seconds a client may take to send a request's body, 1..300, and again the most the server " +
				"waits for the pipeline to take or refuse its results before it answers 503."},
		{Name: "nrdp_idle_timeout", Default: option.SecondsText(DefaultIdleTimeout), Origin: option.OriginNew,
			Kind: option.Seconds(func(o *Options) *time.Duration { return &o.IdleTimeout }, 1, 3600),
			Doc:  "Seconds a kept-alive NRDP connection may wait for its next request, 1..3600."},
	}
}

// tokenList is the kind of nrdp_tokens: comma-separated, blanks around
// each token dropped, no empty token.
func tokenList() option.Kind[Options] {
	parse := func(s string) ([]string, error) {
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		var out []string
		for _, t := range strings.Split(s, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				return nil, errors.New("has an empty token (two commas, or one at an end)")
			}
			out = append(out, t)
		}
		return out, nil
	}
	valid := func(ts []string) error {
		for _, t := range ts {
			if strings.ContainsAny(t, ",\x00") || t != strings.TrimSpace(t) || t == "" {
				return errors.New("holds a token with a comma, a NUL or surrounding blanks")
			}
		}
		return nil
	}
	return option.Field[Options, []string]{Ptr: func(o *Options) *[]string { return &o.Tokens },
		Parse: parse, Valid: valid, Format: func(ts []string) string { return strings.Join(ts, ",") }}
}

// checkListen checks the form of nrdp_listen; its messages read after
// "nrdp_listen=value ".
func checkListen(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("is not ADDRESS:PORT: %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("needs a port 1..65535")
	}
	return nil
}

// On says whether the front end is configured: Listen is set.
func (o *Options) On() bool { return o.Listen != "" }

// Validate checks the options as a whole when the front end is on; a
// *option.Error names the option to fix.
func (o *Options) Validate() error {
	if !o.On() {
		return nil
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return &option.Error{Option: "nrdp_tls_cert", Conflict: true, Kind: ErrConfig,
			Reason: "nrdp_tls_cert and nrdp_tls_key go together"}
	}
	if err := checkListen(o.Listen); err != nil {
		return &option.Error{Option: "nrdp_listen", Kind: ErrConfig, Reason: fmt.Sprintf("%q %v", o.Listen, err)}
	}
	return nil
}

// withDefaults is o with each zero limit at its default.
func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxConnections, DefaultMaxConnections)
	def(&o.MaxRequestSize, DefaultMaxRequestSize)
	defDur(&o.HeaderTimeout, DefaultHeaderTimeout)
	defDur(&o.Timeout, DefaultTimeout)
	defDur(&o.IdleTimeout, DefaultIdleTimeout)
	return o
}
