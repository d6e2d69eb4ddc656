package nscang

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf"
	"nsca_fast/stages/frontend"
)

// errNoIdentities: nsca-ng clients authenticate as identities.
var errNoIdentities = errors.New("nscang: nsca_ng_listen needs identities_file")

// ConfigFrom is the listener's settings for cfg, with the identities of
// identities_file (whose settings other than authorize blocks the
// configuration warns about, once each) and grace for open sessions after
// a stop.
func ConfigFrom(cfg *conf.Config, allowed []netip.Prefix, grace time.Duration) (*Config, error) {
	if err := openssl.Available(); err != nil {
		return nil, cfg.PathError("nsca_ng_listen", err)
	}
	// The file Secrets read: identities_file is read once per load.
	f, err := cfg.Identities()
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, cfg.PathError("identities_file", errNoIdentities)
	}
	ng := &Config{
		Listen:              cfg.NscaNGListen,
		Threads:             cfg.NscaNGThreads,
		MaxSessions:         cfg.NscaNGMaxSessions,
		HandshakeTimeout:    time.Duration(cfg.NscaNGHandshakeTimeout) * time.Second,
		Timeout:             time.Duration(cfg.NscaNGTimeout) * time.Second,
		MaxCommandSize:      cfg.NscaNGMaxCommandSize,
		HandshakesPerSource: cfg.MaxHandshakesPerSource,
		Ciphers:             cfg.NscaNGCiphers,
		Identities:          FileIdentities(f),
		Allowed:             allowed,
		Grace:               grace,
		Debug:               cfg.Debug,
	}
	if ng.Listener, err = frontend.ListenReusePort(cfg.NscaNGListen, "nsca-ng listener"); err != nil {
		return nil, fmt.Errorf("%w: %s: nsca_ng_listen=%s: %w", errListener, cfg.Where("nsca_ng_listen"), cfg.NscaNGListen, err)
	}
	return ng, nil
}
