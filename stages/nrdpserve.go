package stages

import (
	"net/netip"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/nrdp"
)

// nrdpConfigOf is the NRDP front end's settings for cfg, checked with the
// identities of identities_file, with its listener bound (so that a
// reload's new pipeline listens before the old one stops). It lives here,
// not in package nrdp, because conf nests that package's options.
func nrdpConfigOf(cfg *conf.Config, allowed []netip.Prefix, stats *counters.Stats, log *counters.RateLog) (*nrdp.Config, error) {
	ids, err := cfg.Identities()
	if err != nil {
		return nil, err
	}
	n := &nrdp.Config{Options: cfg.NRDP, Identities: ids, Allowed: allowed, Stats: stats, Log: log}
	if err := n.Check(); err != nil {
		return nil, cfg.PathError("nrdp_listen", err)
	}
	if n.Listener, err = nrdp.Listen(cfg.NRDP.Listen); err != nil {
		return nil, cfg.PathError("nrdp_listen", err)
	}
	return n, nil
}
