package tests

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// identMetrics starts nothing: it is the metrics address for a daemon's
// config, on a port of its own.
func identMetrics(t *testing.T) string { return "127.0.0.1:" + strconv.Itoa(freePort(t)) }

// identWaitMetric waits until the metric name reaches want and returns
// what it last read.
func identWaitMetric(t *testing.T, addr, name string, want float64) float64 {
	t.Helper()
	var got float64
	waitFor(10*time.Second, func() bool {
		m, err := relScrape(addr)
		got = m[name]
		return err == nil && got >= want
	})
	return got
}

// TestRotation: a site moves from password A to B and from method 1 to
// 14 while its clients change one by one. The server lists both passwords
// (password, password_file) and both methods; four populations of real
// send_nsca clients, one per combination, send at once, several checks
// per connection; every check is delivered once and in order, and each
// secret's matches are counted under its name, never its password. A
// client with a third password is refused.
func TestRotation(t *testing.T) {
	const passA, passB = "rotation-old-secret", "rotation-new-secret"
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "passwords")
	writeFile(t, pwFile, "# the new password\n"+passB+"\n", 0o600)
	metrics := identMetrics(t)
	cmd := commandFile(t, dir)
	d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "password": passA,
		"password_file": pwFile, "decryption_method": "1,14", "metrics_address": metrics})
	type population struct {
		cl     Client
		prefix string
		secret string
	}
	pops := []population{
		{Client{Password: passA, Method: 1}, "a1-", "password/1"},
		{Client{Password: passB, Method: 1}, "b1-", "password_file:2/1"},
		{Client{Password: passA, Method: 14}, "a14-", "password/14"},
		{Client{Password: passB, Method: 14}, "b14-", "password_file:2/14"},
	}
	const clients, per = 4, 20
	var hosts []string
	lo := now()
	var wg sync.WaitGroup
	for _, p := range pops {
		h := seqHosts(p.prefix, clients)
		hosts = append(hosts, h...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendSeqs(t, p.cl, d.Port, h, per)
		}()
	}
	wg.Wait()
	waitFileLines(t, cmd, len(hosts)*per)
	for _, p := range pops {
		name := fmt.Sprintf(`nsca_secret_matches_total{secret=%q}`, p.secret)
		if got := identWaitMetric(t, metrics, name, clients); got != clients {
			t.Errorf("%s = %v, want %d (one per connection)", name, got, clients)
		}
	}
	Client{Password: "rotation-unknown", Method: 14}.sendRejected(t, d.Port, "intruder\tsvc\t0\tno\n")
	if !waitFor(5*time.Second, func() bool {
		m, _ := relScrape(metrics)
		return m[`nsca_results_dropped_total{reason="bad_crc"}`]+m[`nsca_results_dropped_total{reason="bad_version"}`] == 1
	}) {
		t.Errorf("the client with an unknown password was not counted once as bad_crc or bad_version")
	}
	m, _ := relScrape(metrics)
	for k := range m {
		for _, pw := range []string{passA, passB} {
			if strings.Contains(k, pw) {
				t.Errorf("a metric names a password: %s", k)
			}
		}
	}
	hi := now()
	d.Stop()
	assertSeqs(t, commandsIn(t, cmd, lo, hi), hosts, per)
}
