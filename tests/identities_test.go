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

// TestIdentities: identities with their own passwords, methods, networks
// and rights beside the server's own password, whose clients get the
// rights of the "*" block. Allowed results are written, the others refused
// (never written, the connection kept), counted per identity and logged;
// an identity is only tried for the networks it lists, the most specific
// first.
func TestIdentities(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "identities.cfg")
	writeFile(t, ids, `# nsca-ng syntax, with networks and decryption_method of ours
authorize "web" {
	password = "web-secret"
	hosts = "web[0-9]+"
	services = { "disk@web[0-9]+", "load" }
	networks = { "127.0.0.0/8" }
	decryption_method = 14
}
authorize "outside" { password = "outside-secret"; services = ".*"; networks = "10.99.0.0/16" }
authorize "wide" { password = "same-secret"; services = ".*"; networks = "127.0.0.0/8" }
authorize "narrow" { password = "same-secret"; services = "narrow_.*"; networks = "127.0.0.1" }
include("fallback.cfg")
`, 0o600)
	writeFile(t, filepath.Join(dir, "fallback.cfg"), `authorize "*" { services = "ping" }`+"\n", 0o600)
	metrics := identMetrics(t)
	cmd := commandFile(t, dir)
	d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "password": "shared-secret",
		"decryption_method": "1", "identities_file": ids, "metrics_address": metrics})
	lo := now()
	web := Client{Password: "web-secret", Method: 14}
	web.send(t, d.Port, "web1\tdisk\t0\tdisk ok\x17web7\tload\t1\tload high\x17db1\tdb_x\t0\tnot web's\x17web2\t0\tup\x17", 4)
	same := Client{Password: "same-secret", Method: 1}
	same.send(t, d.Port, "h\tnarrow_a\t0\tnarrow's\x17h\tother\t0\twide's, but narrow is more specific\x17", 2)
	shared := Client{Password: "shared-secret", Method: 1}
	shared.send(t, d.Port, "h\tping\t0\tpong\x17h\tdisk\t0\tnot the fallback's\x17", 2)
	Client{Password: "outside-secret", Method: 1}.sendRejected(t, d.Port, "h\tping\t0\tfrom outside its networks\n")
	want := []string{
		"PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;disk ok",
		"PROCESS_SERVICE_CHECK_RESULT;web7;load;1;load high",
		"PROCESS_HOST_CHECK_RESULT;web2;0;up",
		"PROCESS_SERVICE_CHECK_RESULT;h;narrow_a;0;narrow's",
		"PROCESS_SERVICE_CHECK_RESULT;h;ping;0;pong",
	}
	waitFileLines(t, cmd, len(want))
	for id, n := range map[string]float64{"web": 1, "narrow": 1, "*": 1} {
		name := fmt.Sprintf(`nsca_identity_refused_total{identity=%q}`, id)
		if got := identWaitMetric(t, metrics, name, n); got != n {
			t.Errorf("%s = %v, want %v", name, got, n)
		}
	}
	m, _ := relScrape(metrics)
	if got := m[`nsca_results_dropped_total{reason="unauthorized"}`]; got != 3 {
		t.Errorf("dropped as unauthorized: %v, want 3", got)
	}
	if got := m[`nsca_identity_refused_total{identity="wide"}`]; got != 0 {
		t.Errorf("wide refused %v results: it should never have been tried before narrow", got)
	}
	for secret, n := range map[string]float64{"web": 1, "narrow": 1, "password/1": 1} {
		name := fmt.Sprintf(`nsca_secret_matches_total{secret=%q}`, secret)
		if m[name] != n {
			t.Errorf("%s = %v, want %v", name, m[name], n)
		}
	}
	if got := m[`nsca_secret_matches_total{secret="outside"}`]; got != 0 {
		t.Errorf("the identity for 10.99.0.0/16 matched a client from 127.0.0.1")
	}
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), want)
	if !strings.Contains(d.Stderr(), `identity "web" (`+ids+`:2) may not submit results for host "db1" service "db_x"`) {
		t.Errorf("the refusal of web's result for db1 was not logged with the identity and its place")
	}
}

// TestIdentitiesBadFile: a mistake in the identities file stops the
// daemon with the file, the line and the reason.
func TestIdentitiesBadFile(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "identities.cfg")
	writeFile(t, ids, "authorize \"a\" {\n password = \"x\"\n hosts = \"[\"\n}\n", 0o600)
	cmd := commandFile(t, dir)
	_, code, out := runDaemonExpectFailure(t, fmt.Sprintf("command_file=%s\nidentities_file=%s\n", cmd, ids))
	if code == 0 || !strings.Contains(out, ids+":1: hosts pattern \"[\"") {
		t.Errorf("exit %d, output:\n%s\nwant a failure naming %s:1 and the pattern", code, out, ids)
	}
}
