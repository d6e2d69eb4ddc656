package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A real Icinga 2 (Debian's icinga2, 2.13) behind nsca_fast's Icinga 2 API
// sink. Each test function starts its own Icinga with startIcinga2; the
// helpers other than the exported-looking Icinga2 methods are prefixed i2.
// The configuration template is testdata/icinga2/icinga2.conf.

const i2Bin = "/usr/sbin/icinga2"

// Bounds on waiting for Icinga 2; it is usually up in half a second.
const (
	i2StartTimeout = 15 * time.Second
	i2StopTimeout  = 10 * time.Second
)

// Icinga2ClientCN is the CN of the client certificate that the ApiUser
// "nsca-cert" accepts.
const Icinga2ClientCN = "nsca-client"

// Icinga2Host is a passive host of the test's Icinga and its passive
// services.
type Icinga2Host struct {
	Name     string
	Services []string
}

// i2DefaultHosts are the objects of an Icinga started without any.
var i2DefaultHosts = []Icinga2Host{
	{"i2-host-a", []string{"svc-1", "svc-2"}},
	{"i2-host-b", []string{"svc-1"}},
}

// Icinga2 is an Icinga 2 daemon started by a test, in its own temporary
// directory, with its API on 127.0.0.1 and a certificate for "localhost"
// signed by a CA of the test's own.
type Icinga2 struct {
	t        testing.TB
	dir      string
	port     int
	password string
	hosts    []Icinga2Host
	caFile   string
	certFile string // client certificate for Icinga2ClientCN
	keyFile  string
	logPath  string
	client   *http.Client

	mu      sync.Mutex
	p       *proc
	pgid    int
	running bool
}

// startIcinga2 starts an Icinga 2 serving hosts (i2DefaultHosts when none)
// and waits until its API answers with every host. Cleanup stops it and
// every process it started. Without icinga2 the test is skipped, or fails
// when CI is set.
func startIcinga2(t testing.TB, hosts ...Icinga2Host) *Icinga2 {
	t.Helper()
	needTool(t, i2Bin, "icinga2")
	if len(hosts) == 0 {
		hosts = i2DefaultHosts
	}
	dir := t.TempDir()
	i := &Icinga2{t: t, dir: dir, hosts: hosts, password: i2Random(), logPath: filepath.Join(dir, "icinga2.out")}
	for _, sub := range []string{"etc", "lib/certs", "log", "cache", "spool", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	i.writeCerts()
	i.writeObjects()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, i.caFile)))
	i.client = &http.Client{Timeout: 5 * time.Second,
		// Icinga closes a connection idle for 10 s.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, IdleConnTimeout: 5 * time.Second}}
	t.Cleanup(func() {
		i.Stop()
		i.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("icinga2 output (last 3000 bytes):\n%s", ngTail(i.Log(), 3000))
		}
	})
	for attempt := 1; ; attempt++ {
		i.port = freePort(t)
		i.writeConfig()
		err := i.start(t)
		if err == nil {
			return i
		}
		// A port found free can be taken before Icinga binds it.
		if attempt < 3 && strings.Contains(i.Log(), "Cannot bind") {
			continue
		}
		t.Fatalf("starting icinga2: %v\noutput:\n%s", err, ngTail(i.Log(), 3000))
	}
}

// i2Random is a fresh random password.
func i2Random() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writeCerts creates what `icinga2 api setup` would (a CA, and the node's
// certificate and key in DataDir/certs named after NodeName) plus a client
// certificate, all with P-256 keys: api setup makes two 4096-bit RSA keys,
// which takes seconds.
func (i *Icinga2) writeCerts() {
	t := i.t
	t.Helper()
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nsca_fast test Icinga CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage []x509.ExtKeyUsage, certPath, keyPath string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usage}
		if cn == "localhost" {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		writeFile(t, certPath, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o644)
		writeFile(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})), 0o600)
	}
	certs := filepath.Join(i.dir, "lib", "certs")
	// Icinga's own certificates serve both ends of cluster connections.
	issue(2, "localhost", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		filepath.Join(certs, "localhost.crt"), filepath.Join(certs, "localhost.key"))
	i.certFile, i.keyFile = filepath.Join(i.dir, "client.crt"), filepath.Join(i.dir, "client.key")
	issue(3, Icinga2ClientCN, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, i.certFile, i.keyFile)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	writeFile(t, filepath.Join(certs, "ca.crt"), caPEM, 0o644)
	i.caFile = filepath.Join(i.dir, "ca.crt")
	writeFile(t, i.caFile, caPEM, 0o644)
}

// writeConfig fills in the template for the current port.
func (i *Icinga2) writeConfig() {
	tmpl, err := os.ReadFile(filepath.Join("testdata", "icinga2", "icinga2.conf"))
	if err != nil {
		i.t.Fatal(err)
	}
	conf := strings.NewReplacer("@PORT@", strconv.Itoa(i.port), "@PASSWORD@", i.password).Replace(string(tmpl))
	writeFile(i.t, filepath.Join(i.dir, "etc", "icinga2.conf"), conf, 0o644)
}

// writeObjects writes the hosts and services into objects.conf.
func (i *Icinga2) writeObjects() {
	var b strings.Builder
	for _, h := range i.hosts {
		fmt.Fprintf(&b, "object Host %s {\n  import \"nsca-passive-host\"\n}\n", i2Quote(i.t, h.Name))
		for _, s := range h.Services {
			fmt.Fprintf(&b, "object Service %s {\n  import \"nsca-passive-service\"\n  host_name = %s\n}\n", i2Quote(i.t, s), i2Quote(i.t, h.Name))
		}
	}
	writeFile(i.t, filepath.Join(i.dir, "etc", "objects.conf"), b.String(), 0o644)
}

// i2Quote quotes an object name for the Icinga DSL, whose escapes for
// printable ASCII are those of Go.
func i2Quote(t testing.TB, s string) string {
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			t.Fatalf("object name %q: keep test object names printable ASCII", s)
		}
	}
	return strconv.Quote(s)
}

// daemonArgs run `icinga2 daemon` in the foreground with every directory
// in the temporary one.
func (i *Icinga2) daemonArgs() []string {
	args := []string{"daemon", "-c", filepath.Join(i.dir, "etc", "icinga2.conf")}
	for _, d := range []struct{ name, sub string }{
		{"ConfigDir", "etc"}, {"DataDir", "lib"}, {"LogDir", "log"}, {"CacheDir", "cache"},
		{"SpoolDir", "spool"}, {"InitRunDir", "run"},
	} {
		args = append(args, fmt.Sprintf("-D%s=%s", d.name, filepath.Join(i.dir, d.sub)))
	}
	return args
}

// start runs Icinga in the foreground in a process group of its own (it
// forks a worker, which forks a process spawn helper) and waits until the
// API lists every host. t is the test calling, maybe a subtest of i.t.
func (i *Icinga2) start(t testing.TB) error {
	t.Helper()
	out, err := os.OpenFile(i.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// Icinga drops privileges to ICINGA2_USER/GROUP (Debian's default is
	// nagios); keep those the test runs as.
	usr, grp := "root", "root"
	if u, err := user.Current(); err == nil {
		usr = u.Username
		if g, err := user.LookupGroupId(u.Gid); err == nil {
			grp = g.Name
		}
	}
	cmd := exec.Command(i2Bin, i.daemonArgs()...)
	cmd.Dir = i.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "ICINGA2_USER="+usr, "ICINGA2_GROUP="+grp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := mustStart(t, "icinga2", cmd)
	i.mu.Lock()
	i.p, i.pgid, i.running = p, p.cmd.Process.Pid, true
	i.mu.Unlock()
	var lastErr error
	ready := waitFor(i2StartTimeout, func() bool {
		if p.hasExited() {
			return true
		}
		var names []string
		names, lastErr = i.hostNames()
		return lastErr == nil && len(names) == len(i.hosts)
	})
	if p.hasExited() {
		i.Stop()
		return fmt.Errorf("icinga2 exited: %v", p.state)
	}
	if !ready {
		i.Stop()
		return fmt.Errorf("the API did not list the %d hosts within %v: %v", len(i.hosts), i2StartTimeout, lastErr)
	}
	return nil
}

// Restart stops Icinga if it runs and starts it again on the same port,
// with the state it saved; t is the test calling.
func (i *Icinga2) Restart(t testing.TB) {
	t.Helper()
	i.Stop()
	if err := i.start(t); err != nil {
		t.Fatalf("restarting icinga2: %v\noutput:\n%s", err, ngTail(i.Log(), 3000))
	}
}

// Stop ends Icinga: SIGTERM to the process the test started, SIGKILL to
// its process group after i2StopTimeout, and any process of the group still
// there after that is killed by its PID and fails the test.
func (i *Icinga2) Stop() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.running {
		return
	}
	i.running = false
	t, p := i.t, i.p
	if !p.hasExited() {
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-p.exited:
	case <-time.After(i2StopTimeout):
		t.Errorf("icinga2 (pid %d) did not exit within %v of SIGTERM; killing its process group", p.cmd.Process.Pid, i2StopTimeout)
		syscall.Kill(-i.pgid, syscall.SIGKILL)
		<-p.exited
	}
	// The worker and the spawn helper follow the umbrella process.
	if left := waitGone(i2Group(i.pgid), i2StopTimeout); len(left) > 0 {
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("icinga2 processes %v outlived the main process; killed", left)
	}
}

// i2Group lists the live processes in process group pgid (a zombie has
// ended: it only waits for a parent, maybe init, to reap it).
func i2Group(pgid int) []int {
	var pids []int
	for _, pid := range procPIDs() {
		if st, err := procStat(pid); err == nil && len(st) > 2 && st[2] == strconv.Itoa(pgid) && !procGone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// URL is the API's base URL, by the name in its certificate.
func (i *Icinga2) URL() string { return fmt.Sprintf("https://localhost:%d", i.port) }

// User is the ApiUser allowed to post check results and query objects.
func (i *Icinga2) User() string { return "nsca" }

// Password is User's password, and the password of the ApiUser
// "nsca-readonly", which may query objects but not post results.
func (i *Icinga2) Password() string { return i.password }

// CAFile is the PEM CA that signed the API's certificate.
func (i *Icinga2) CAFile() string { return i.caFile }

// ClientCert is a PEM client certificate and key (CN Icinga2ClientCN) that
// the API accepts instead of a password.
func (i *Icinga2) ClientCert() (certFile, keyFile string) { return i.certFile, i.keyFile }

// Log is what Icinga has printed so far (its only log).
func (i *Icinga2) Log() string {
	b, _ := os.ReadFile(i.logPath)
	return string(b)
}

// i2Object is the part of an object query's answer the tests look at.
type i2Object struct {
	Name  string `json:"name"`
	Attrs struct {
		State           float64 `json:"state"`
		LastCheckResult *struct {
			State           float64  `json:"state"`
			Output          string   `json:"output"`
			PerformanceData []string `json:"performance_data"`
			CheckSource     string   `json:"check_source"`
			ExecutionEnd    float64  `json:"execution_end"`
		} `json:"last_check_result"`
	} `json:"attrs"`
}

// query runs GET /v1/objects/<kind>?params and returns the objects; 404
// (no such object) returns none.
func (i *Icinga2) query(kind string, params url.Values) ([]i2Object, error) {
	req, err := http.NewRequest(http.MethodGet, i.URL()+"/v1/objects/"+kind+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(i.User(), i.password)
	req.Header.Set("Accept", "application/json")
	resp, err := i.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Results []i2Object `json:"results"`
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, fmt.Errorf("GET %s: %v", req.URL, err)
	}
	return answer.Results, nil
}

// hostNames lists the hosts the API knows.
func (i *Icinga2) hostNames() ([]string, error) {
	objs, err := i.query("hosts", url.Values{"attrs": {"name"}})
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	return names, err
}

// Icinga2Result is an object's state and last check result.
type Icinga2Result struct {
	State        int // service: 0 OK .. 3 UNKNOWN; host: 0 UP, 1 DOWN
	Output       string
	PerfData     []string
	CheckSource  string
	ExecutionEnd float64 // unix seconds
}

// Result returns the state and last check result of host!service, or of
// the host when service is ""; ok is false when the object does not exist
// or has no result yet.
func (i *Icinga2) Result(t testing.TB, host, service string) (r Icinga2Result, ok bool) {
	t.Helper()
	kind, params := "hosts", url.Values{"host": {host}}
	if service != "" {
		kind, params = "services", url.Values{"service": {host + "!" + service}}
	}
	params["attrs"] = []string{"last_check_result", "state"}
	objs, err := i.query(kind, params)
	if err != nil {
		t.Fatalf("querying %s %s!%s: %v", kind, host, service, err)
	}
	if len(objs) != 1 || objs[0].Attrs.LastCheckResult == nil {
		return r, false
	}
	cr := objs[0].Attrs.LastCheckResult
	return Icinga2Result{State: int(objs[0].Attrs.State), Output: cr.Output, PerfData: cr.PerformanceData,
		CheckSource: cr.CheckSource, ExecutionEnd: cr.ExecutionEnd}, true
}

// Service returns the last check result of host!service: its state
// (0 OK .. 3 UNKNOWN), output and performance data; ok is false when the
// service does not exist or has no result yet.
func (i *Icinga2) Service(t testing.TB, host, service string) (state int, output string, perfdata []string, ok bool) {
	t.Helper()
	r, ok := i.Result(t, host, service)
	return r.State, r.Output, r.PerfData, ok
}

// Host returns the host's state (0 UP, 1 DOWN) and the output and
// performance data of its last check result; ok is false when the host
// does not exist or has no result yet.
func (i *Icinga2) Host(t testing.TB, host string) (state int, output string, perfdata []string, ok bool) {
	t.Helper()
	r, ok := i.Result(t, host, "")
	return r.State, r.Output, r.PerfData, ok
}

// WaitService waits until the last result of host!service has wantOutput
// and returns its state and performance data; it fails the test after
// timeout.
func (i *Icinga2) WaitService(t testing.TB, host, service, wantOutput string, timeout time.Duration) (state int, perfdata []string) {
	t.Helper()
	var output string
	var ok bool
	if !waitFor(timeout, func() bool {
		state, output, perfdata, ok = i.Service(t, host, service)
		return ok && output == wantOutput
	}) {
		t.Fatalf("service %s!%s has output %q (has a result: %v) after %v, want %q", host, service, output, ok, timeout, wantOutput)
	}
	return state, perfdata
}

// WaitHost is WaitService for a host.
func (i *Icinga2) WaitHost(t testing.TB, host, wantOutput string, timeout time.Duration) (state int, perfdata []string) {
	t.Helper()
	var output string
	var ok bool
	if !waitFor(timeout, func() bool {
		state, output, perfdata, ok = i.Host(t, host)
		return ok && output == wantOutput
	}) {
		t.Fatalf("host %s has output %q (has a result: %v) after %v, want %q", host, output, ok, timeout, wantOutput)
	}
	return state, perfdata
}

// i2Hosts are the objects TestIcinga2Sink posts to.
var i2Hosts = []Icinga2Host{
	{"i2-web", []string{"ok", "warning", "critical", "unknown", "seven", "perf", "multi", "after-unknown", "cert", "password", "stopped", "noverify", "readonly"}},
	{"i2-db", []string{"disk"}},
	{"i2-seq", []string{"seq-1", "seq-2", "seq-3", "seq-4", "seq-5"}},
	{"i2-down", nil},
	{"i2-unreachable", nil},
}

// i2Config is the daemon's configuration for the sink of i: basic auth,
// TLS verified against Icinga's CA, the dump file as fallback, changed by
// extra ("" removes an option).
func i2Config(i *Icinga2, dump string, extra Config) Config {
	c := merge(Config{
		"icinga2_api_url":       i.URL(),
		"icinga2_api_user":      i.User(),
		"icinga2_api_password":  i.Password(),
		"icinga2_ca_file":       i.CAFile(),
		"icinga2_verify_tls":    "1",
		"icinga2_max_in_flight": "8",
		"icinga2_timeout":       "2",
		"icinga2_retries":       "1",
		"alternate_dump_file":   dump,
	}, extra)
	for k, v := range c {
		if v == "" {
			delete(c, k)
		}
	}
	return c
}

// TestIcinga2Sink: nsca_fast with icinga2_api_url and no command_file
// delivers what the real send_nsca sends to a real Icinga 2: service and
// host states mapped onto what Icinga accepts, output and performance data
// split as Icinga shows a plugin's; an unknown object is logged, not
// dumped; when Icinga refuses the credentials or is down, the results land
// in alternate_dump_file.
func TestIcinga2Sink(t *testing.T) {
	i2 := startIcinga2(t, i2Hosts...)
	const wait = 10 * time.Second

	t.Run("delivers", func(t *testing.T) {
		dump := filepath.Join(t.TempDir(), "nsca.dump")
		d, cl := startKeyed(t, 1, shortPassword, i2Config(i2, dump, nil))
		lo := now()
		input := "i2-web\tok\t0\tOK - all good\x17" +
			"i2-web\twarning\t1\tWARNING - load 5\x17" +
			"i2-web\tcritical\t2\tCRITICAL - down\x17" +
			"i2-web\tunknown\t3\tUNKNOWN - no idea\x17" +
			"i2-web\tseven\t7\tcode seven\x17" +
			"i2-web\tperf\t0\tPERF OK - 3 items |'my label'=5ms;10;20;0 items=3;5;10 size=10B\x17" +
			"i2-db\tdisk\t1\tDISK WARNING - /var 85%|/=50%;80;90\n/ 50%\n/var 85%|/var=85%;80;90\n/home=10%;80;90\x17" +
			"i2-web\tmulti\t0\tfirst line\nsecond line\nthird; line \\ with backslash\x17" +
			"i2-web\t0\tPING OK - rta 1ms|rta=1ms;100;200;0\x17" +
			"i2-down\t1\thost is down\x17" +
			"i2-unreachable\t2\thost unreachable\x17"
		cl.send(t, d.Port, input, 11)
		hi := now()
		for _, c := range []struct {
			svc, output string
			state       int
			perf        []string
		}{
			{"ok", "OK - all good", 0, nil},
			{"warning", "WARNING - load 5", 1, nil},
			{"critical", "CRITICAL - down", 2, nil},
			{"unknown", "UNKNOWN - no idea", 3, nil},
			{"seven", "code seven", 3, nil},
			// Icinga keeps the blank before the `|`, as for its own checks.
			{"perf", "PERF OK - 3 items ", 0, []string{"'my label'=5ms;10;20;0", "items=3;5;10", "size=10B"}},
			{"multi", "first line\nsecond line\nthird; line \\ with backslash", 0, nil},
		} {
			state, perf := i2.WaitService(t, "i2-web", c.svc, c.output, wait)
			if state != c.state || !slices.Equal(perf, c.perf) {
				t.Errorf("i2-web!%s: state %d perfdata %q, want %d %q", c.svc, state, perf, c.state, c.perf)
			}
		}
		// Icinga takes performance data only from lines with a `|`: the
		// last line stays output (TestDurableIcinga2Corpus compares with
		// Icinga's own check of the same bytes).
		state, perf := i2.WaitService(t, "i2-db", "disk", "DISK WARNING - /var 85%\n/ 50%\n/var 85%\n/home=10%;80;90", wait)
		if want := []string{"/=50%;80;90", "/var=85%;80;90"}; state != 1 || !slices.Equal(perf, want) {
			t.Errorf("i2-db!disk: state %d perfdata %q, want 1 %q", state, perf, want)
		}
		for _, c := range []struct {
			host, output string
			state        int
			perf         []string
		}{
			{"i2-web", "PING OK - rta 1ms", 0, []string{"rta=1ms;100;200;0"}},
			{"i2-down", "host is down", 1, nil},
			{"i2-unreachable", "host unreachable", 1, nil}, // 2 becomes DOWN
		} {
			state, perf := i2.WaitHost(t, c.host, c.output, wait)
			if state != c.state || !slices.Equal(perf, c.perf) {
				t.Errorf("host %s: state %d perfdata %q, want %d %q", c.host, state, perf, c.state, c.perf)
			}
		}
		// The check source is the daemon's host name, the execution time the
		// time of receipt.
		source, _ := os.Hostname()
		if r, _ := i2.Result(t, "i2-web", "ok"); r.CheckSource != source || r.ExecutionEnd < float64(lo) || r.ExecutionEnd > float64(hi) {
			t.Errorf("check_source %q, execution_end %.3f; want %q and a time in [%d, %d]", r.CheckSource, r.ExecutionEnd, source, lo, hi)
		}
		d.Stop()
		if got := readFile(t, dump); got != "" {
			t.Errorf("the dump file holds results Icinga took:\n%s", got)
		}
	})

	t.Run("order and keep-alive", func(t *testing.T) {
		// 20 results for each of 5 services, in one second or two: Icinga
		// keeps the one posted last, which must be the last one sent, over
		// at most icinga2_max_in_flight connections.
		dump := filepath.Join(t.TempDir(), "nsca.dump")
		d, cl := startKeyed(t, 1, shortPassword, i2Config(i2, dump, Config{"icinga2_max_in_flight": "4"}))
		logStart := len(i2.Log())
		var input strings.Builder
		for n := range 20 {
			for s := 1; s <= 5; s++ {
				fmt.Fprintf(&input, "i2-seq\tseq-%d\t%d\tseq %02d|n=%d\x17", s, n%4, n, n)
			}
		}
		cl.send(t, d.Port, input.String(), 100)
		for s := 1; s <= 5; s++ {
			if state, perf := i2.WaitService(t, "i2-seq", fmt.Sprintf("seq-%d", s), "seq 19", wait); state != 3 || !slices.Equal(perf, []string{"n=19"}) {
				t.Errorf("seq-%d: state %d perfdata %q, want 3 [n=19]", s, state, perf)
			}
		}
		// Icinga logs each request with the client's port and agent.
		ports := map[string]int{}
		re := regexp.MustCompile(`Request: POST /v1/actions/process-check-result \(from \[127\.0\.0\.1\]:(\d+)\), user: nsca, agent: nsca_fast`)
		for _, m := range re.FindAllStringSubmatch(i2.Log()[logStart:], -1) {
			ports[m[1]]++
		}
		t.Logf("100 posts over connections from ports %v", ports)
		if total := i2Sum(ports); total != 100 || len(ports) > 4 {
			t.Errorf("Icinga logged %d posts over %d connections %v, want 100 over at most 4", total, len(ports), ports)
		}
	})

	t.Run("unknown object", func(t *testing.T) {
		dump := filepath.Join(t.TempDir(), "nsca.dump")
		d, cl := startKeyed(t, 1, shortPassword, i2Config(i2, dump, nil))
		cl.send(t, d.Port, "i2-web\tno-such-svc\t2\tlost result\x17"+
			"no-such-host\t1\tlost host result\x17"+
			"i2-web\tafter-unknown\t0\tdelivered after the unknown\x17", 3)
		i2.WaitService(t, "i2-web", "after-unknown", "delivered after the unknown", wait)
		t.Logf("logged: %s", d.waitLog(regexp.MustCompile(`no-such-svc`), wait))
		t.Logf("logged: %s", d.waitLog(regexp.MustCompile(`no-such-host`), wait))
		d.Stop()
		if got := readFile(t, dump); strings.Contains(got, "no-such") {
			t.Errorf("results for unknown objects went to the dump file:\n%s", got)
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		cert, key := i2.ClientCert()
		dump := filepath.Join(t.TempDir(), "nsca.dump")
		d, cl := startKeyed(t, 1, shortPassword, i2Config(i2, dump, Config{
			"icinga2_api_user": "", "icinga2_api_password": "",
			"icinga2_client_cert": cert, "icinga2_client_key": key}))
		cl.send(t, d.Port, "i2-web\tcert\t1\tby certificate|x=1\x17", 1)
		if state, perf := i2.WaitService(t, "i2-web", "cert", "by certificate", wait); state != 1 || !slices.Equal(perf, []string{"x=1"}) {
			t.Errorf("state %d perfdata %q, want 1 [x=1]", state, perf)
		}
	})

	t.Run("verification off", func(t *testing.T) {
		dump := filepath.Join(t.TempDir(), "nsca.dump")
		d, cl := startKeyed(t, 1, shortPassword, i2Config(i2, dump, Config{"icinga2_ca_file": "", "icinga2_verify_tls": "0"}))
		cl.send(t, d.Port, "i2-web\tnoverify\t0\tnot verified\x17", 1)
		i2.WaitService(t, "i2-web", "noverify", "not verified", wait)
	})

	// i2Dumped sends one result that Icinga must not get and checks that it
	// lands in the dump file and not in Icinga.
	stopped := false
	i2Dumped := func(t *testing.T, extra Config, svc string) {
		t.Helper()
		dump := filepath.Join(t.TempDir(), "nsca.dump")
		d, cl := startKeyed(t, 1, shortPassword, i2Config(i2, dump, extra))
		lo := now()
		output := "dumped " + svc
		cl.send(t, d.Port, "i2-web\t"+svc+"\t2\t"+output+"\x17", 1)
		waitFileLines(t, dump, 1)
		hi := now()
		d.Stop()
		assertLines(t, commandsIn(t, dump, lo, hi), []string{serviceLine("i2-web", svc, 2, output)})
		if !stopped {
			if _, got, _, _ := i2.Service(t, "i2-web", svc); got == output {
				t.Errorf("i2-web!%s reached Icinga", svc)
			}
		}
	}

	t.Run("wrong password", func(t *testing.T) {
		i2Dumped(t, Config{"icinga2_api_password": "wrong"}, "password")
	})
	t.Run("no permission", func(t *testing.T) {
		i2Dumped(t, Config{"icinga2_api_user": "nsca-readonly"}, "readonly")
	})
	t.Run("unknown CA", func(t *testing.T) {
		i2Dumped(t, Config{"icinga2_ca_file": ""}, "noverify")
	})
	t.Run("icinga2 stopped", func(t *testing.T) {
		i2.Stop()
		stopped = true
		i2Dumped(t, nil, "stopped")
	})
}

// i2Sum adds up the counts in m.
func i2Sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestIcinga2Harness: the harness itself: the API takes a result posted
// by hand, a restarted Icinga keeps it, and no Icinga process outlives
// Stop.
func TestIcinga2Harness(t *testing.T) {
	i2 := startIcinga2(t)
	if _, _, _, ok := i2.Service(t, "i2-host-a", "svc-1"); ok {
		t.Fatalf("i2-host-a!svc-1 has a result before any was posted")
	}
	if _, _, _, ok := i2.Service(t, "i2-host-a", "no-such-svc"); ok {
		t.Fatalf("an unknown service has a result")
	}
	body := `{"type":"Service","service":"i2-host-a!svc-1","exit_status":2,"plugin_output":"by hand","performance_data":["a=1"]}`
	req, _ := http.NewRequest(http.MethodPost, i2.URL()+"/v1/actions/process-check-result", strings.NewReader(body))
	req.SetBasicAuth(i2.User(), i2.Password())
	req.Header.Set("Accept", "application/json")
	resp, err := i2.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("posting a result: %s", resp.Status)
	}
	check := func() {
		t.Helper()
		if state, perf := i2.WaitService(t, "i2-host-a", "svc-1", "by hand", 5*time.Second); state != 2 || !slices.Equal(perf, []string{"a=1"}) {
			t.Errorf("state %d perfdata %q, want 2 [a=1]", state, perf)
		}
	}
	check()
	pgid := i2.pgid
	if n := len(i2Group(pgid)); n < 2 {
		t.Errorf("%d icinga2 processes, want the umbrella process and its worker at least", n)
	}
	i2.Restart(t)
	if left := i2Group(pgid); len(left) > 0 {
		t.Errorf("processes %v of the first icinga2 are still there", left)
	}
	check()
	i2.Stop()
	if left := i2Group(i2.pgid); len(left) > 0 {
		t.Errorf("processes %v are still there after Stop", left)
	}
}
