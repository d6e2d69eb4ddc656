package stages

import (
	"nsca_fast/conf"
	"nsca_fast/stages/emit"
	"nsca_fast/stages/nsca"
)

// Check refuses, before anything serves, what the pipeline could not run
// with: a method no engine can serve as decryption_engine asks, and a
// remote sink whose key file or certificates do not load.
func Check(cfg *conf.Config) error {
	if err := nsca.CheckCipher(cfg); err != nil {
		return err
	}
	return emit.Check(cfg)
}

// ServeInetd serves the single connection on fd, as under inetd, with a
// pipeline of its own.
func ServeInetd(cfg *conf.Config, fd int) error {
	srv, err := newStandalone(cfg, nil)
	if err != nil {
		return err
	}
	return srv.ServeOne(fd)
}

// Describe is the start-up line's account of how the pipeline serves.
func Describe(cfg *conf.Config) string { return nsca.Describe(cfg) }

// DescribeCipher is --check-config's account of the cipher and who
// serves it.
func DescribeCipher(cfg *conf.Config) string { return nsca.DescribeCipher(cfg) }
