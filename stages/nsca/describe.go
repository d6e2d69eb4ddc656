package nsca

import (
	"fmt"
	"strconv"
	"strings"

	"nsca_fast/conf"
)

// CheckCipher refuses a method no engine can serve as decryption_engine
// asks (one libmcrypt cannot open, or whose native engine is missing or
// fails its self-test under decryption_engine=native), naming the option
// to fix.
func CheckCipher(cfg *conf.Config) error {
	if _, err := cipherOf(cfg); err != nil {
		return fmt.Errorf("conf: %s: %w", cfg.Where(cipherOption(cfg)), err)
	}
	return nil
}

// cipherOption is the option to fix when no engine serves the method: the
// engine when one was asked for, else the method.
func cipherOption(cfg *conf.Config) string {
	if cfg.Lines["decryption_engine"] > 0 {
		return "decryption_engine"
	}
	return "decryption_method"
}

// Describe is the start-up line's account of how the pipeline serves.
func Describe(cfg *conf.Config) string {
	m := cfg.Method()
	addr := cfg.ServerAddress
	if strings.TrimSpace(addr) == "" {
		addr = "all addresses"
	}
	return fmt.Sprintf("listening on %s port %d, decryption_method=%s (%s) by %s%s, decryption_mode=%d, %d decrypt goroutines, payload_length=%s",
		addr, cfg.ServerPort, conf.NameOf(m), m.Name, servedBy(cfg), secretsNote(cfg), cfg.DecryptionMode, DecryptThreads(cfg), payloadLengths(cfg))
}

// secretsNote names the secrets a connection's first packet is tried
// with, when there is more than the one of password and decryption_method.
func secretsNote(cfg *conf.Config) string {
	cc, err := cipherOf(cfg)
	if err != nil || len(cc.Candidates) == 0 {
		return ""
	}
	names := make([]string, len(cc.Candidates))
	for i, c := range cc.Candidates {
		names[i] = c.Name
	}
	return fmt.Sprintf(", %d secrets tried in turn (%s)", len(names), strings.Join(names, ", "))
}

// servedBy names the engine that decrypts and why: the check that ran
// before the line is written has chosen it, so this only looks it up.
func servedBy(cfg *conf.Config) string {
	if _, err := cipherOf(cfg); err != nil {
		return "no engine (" + err.Error() + ")"
	}
	choice, _ := cfg.Cipher()
	return choice.Report()
}

// DescribeCipher is --check-config's account of the decryption: which engine
// serves the method and what its self-test found.
func DescribeCipher(cfg *conf.Config) string {
	m := cfg.Method()
	return fmt.Sprintf("decryption: decryption_method=%s (%s) is served by %s%s; payload_length=%s", conf.NameOf(m), m.Name, servedBy(cfg), secretsNote(cfg), payloadLengths(cfg))
}

func payloadLengths(cfg *conf.Config) string {
	parts := make([]string, len(cfg.PayloadLengths))
	for i, n := range cfg.PayloadLengths {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
