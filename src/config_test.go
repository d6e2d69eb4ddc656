package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nsca_fast/conf"
)

// Without -c the daemon reads the first of the default paths that exists,
// and refuses to start when none does, naming them all and both ways out;
// the embedded default runs only when asked for by name.
func TestFindConfig(t *testing.T) {
	dir := t.TempDir()
	debian, cpp := filepath.Join(dir, "nsca.cfg"), filepath.Join(dir, "nagios", "nsca.cfg")
	paths := []string{debian, cpp}
	_, err := findConfig(paths)
	if !errors.Is(err, errNoConfig) {
		t.Fatalf("no file: %v, want errNoConfig", err)
	}
	for _, want := range []string{debian + " nor " + cpp + " exists", "-c FILE", "-c builtin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no file: %q does not say %q", err, want)
		}
	}
	os.MkdirAll(filepath.Dir(cpp), 0o755)
	os.WriteFile(cpp, nil, 0o600)
	if got, err := findConfig(paths); got != cpp || err != nil {
		t.Errorf("only the second: %q, %v", got, err)
	}
	os.WriteFile(debian, nil, 0o600)
	if got, err := findConfig(paths); got != debian || err != nil {
		t.Errorf("both: %q, %v; want the first", got, err)
	}
	cfg, err := loadConfig(&options{configFile: builtinConfig, workers: -1, threads: -1})
	if err != nil || cfg.File != conf.EmbeddedFile {
		t.Fatalf("-c builtin: %v, file %q", err, cfg.File)
	}
	if line := describe(cfg); !strings.Contains(line, "running on the embedded default configuration (-c builtin") {
		t.Errorf("start-up line %q does not say it runs on the embedded default", line)
	}
}
