package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nrdpIdentities are the identities of the NRDP tests: tokens held to
// hosts, one that may also submit a command, one from elsewhere only.
const nrdpIdentities = `
authorize "web" {
	token = "web-token"
	hosts = "web[0-9]+"
	services = ".*@web[0-9]+"
}
authorize "ops" {
	token = "ops-token"
	hosts = ".*"
	services = ".*"
	commands = "ENABLE_HOST_NOTIFICATIONS;.*"
}
authorize "far" {
	token = "far-token"
	hosts = ".*"
	networks = "10.0.0.0/8"
}
`

// nrdpDaemon is a daemon with an NRDP listener, nrdp_tokens any-token and
// the identities above; its command file is a FIFO the test reads.
type nrdpDaemon struct {
	*Daemon
	url     string // http(s)://127.0.0.1:PORT
	fifo    *FIFOReader
	metrics string
	client  *http.Client
}

func startNRDP(t *testing.T, extra Config) *nrdpDaemon {
	t.Helper()
	dir := t.TempDir()
	fifo := makeFIFO(t, dir)
	r := openFIFOReader(t, fifo)
	ids := filepath.Join(dir, "identities.cfg")
	writeFile(t, ids, nrdpIdentities, 0o600)
	port := freePort(t)
	metrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	base := Config{"command_file": fifo}
	if extra["check_result_path"] != "" {
		// The spool takes results only where command_file cannot.
		base = nil
	}
	d := startDaemonWith(t, merge(base, Config{"password": "legacy-secret", "identities_file": ids,
		"nrdp_listen": "127.0.0.1:" + strconv.Itoa(port), "nrdp_tokens": "any-token", "metrics_address": metrics}, extra),
		daemonOpts{dir: dir})
	n := &nrdpDaemon{Daemon: d, url: "http://127.0.0.1:" + strconv.Itoa(port), fifo: r, metrics: metrics,
		client: &http.Client{Timeout: 15 * time.Second}}
	if extra["nrdp_tls_cert"] != "" {
		n.url = strings.Replace(n.url, "http:", "https:", 1)
		n.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	}
	if !waitFor(10*time.Second, func() bool {
		resp, err := n.client.PostForm(n.url+"/nrdp/", url.Values{"cmd": {"hello"}})
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		t.Fatalf("NRDP listener not up on %s:\n%s", n.url, d.Stderr())
	}
	return n
}

// post posts fields as NCPA and NSClient++ do and returns status and body.
func (n *nrdpDaemon) post(t *testing.T, fields url.Values) (int, string) {
	t.Helper()
	resp, err := n.client.PostForm(n.url+"/nrdp/", fields)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func nrdpCheck(typ, host, svc, state, output string) string {
	attr := ""
	if typ != "" {
		attr = " type='" + typ + "'"
	}
	s := "<checkresult" + attr + " checktype='1'><hostname>" + host + "</hostname>"
	if svc != "" {
		s += "<servicename>" + svc + "</servicename>"
	}
	return s + "<state>" + state + "</state><output>" + output + "</output></checkresult>"
}

func nrdpXML(checks ...string) string {
	return "<?xml version='1.0'?>\n<checkresults>\n" + strings.Join(checks, "\n") + "\n</checkresults>\n"
}

func nrdpOK(n int) string {
	return "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<result>\n    <status>0</status>\n    <message>OK</message>\n" +
		"    <meta>\n        <output>" + strconv.Itoa(n) + " checks processed</output>\n    </meta>\n</result>\n"
}

// TestNRDPResults: host and service results in XML and JSON, in every
// field alias, with multi-line output and the check's own time, reach the
// command file as every front end's do.
func TestNRDPResults(t *testing.T) {
	n := startNRDP(t, nil)
	lo := now()
	sent := []struct {
		field, data, want string
	}{
		{"XMLDATA", nrdpXML(nrdpCheck("service", "web1", "disk", "0", "disk ok")), "PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;disk ok"},
		{"xmldata", nrdpXML(nrdpCheck("host", "web2", "", "1", "down")), "PROCESS_HOST_CHECK_RESULT;web2;1;down"},
		{"xml", nrdpXML(nrdpCheck("", "web3", "ignored", "0", "up")), "PROCESS_HOST_CHECK_RESULT;web3;0;up"},
		{"XMLDATA", nrdpXML(nrdpCheck("service", "web1", "multi", "2", "first line\nsecond \\ line\nthird|perf=1")),
			`PROCESS_SERVICE_CHECK_RESULT;web1;multi;2;first line\nsecond \\ line\nthird|perf=1`},
		{"JSONDATA", `{"checkresults":[{"checkresult":{"type":"service"},"hostname":"web4","servicename":"load","state":"1","output":"high"}]}`,
			"PROCESS_SERVICE_CHECK_RESULT;web4;load;1;high"},
		{"jsondata", `{"checkresults":[{"checkresult":{"type":"host"},"hostname":"web5","state":0,"output":"json host"}]}`,
			"PROCESS_HOST_CHECK_RESULT;web5;0;json host"},
		{"json", `{"checkresults":[{"checkresult":{"type":"service"},"hostname":"web6","servicename":"s","state":3,"output":"?"}]}`,
			"PROCESS_SERVICE_CHECK_RESULT;web6;s;3;?"},
	}
	var want []string
	for _, s := range sent {
		code, body := n.post(t, url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, s.field: {s.data}})
		if code != 200 || !strings.Contains(body, "<status>0</status>") && !strings.Contains(body, `"status":0`) {
			t.Errorf("%s: %d %q", s.field, code, body)
		}
		want = append(want, s.want)
	}
	hi := now()
	assertLines(t, stripTimes(t, n.fifo.Collect(t, len(want)), lo, hi), want)

	// The check's own time is the line's.
	n.post(t, url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "xml": {strings.Replace(
		nrdpXML(nrdpCheck("host", "web7", "", "0", "timed")), "</output>", "</output><time>"+strconv.FormatInt(lo-5, 10)+"</time>", 1)}})
	if got := n.fifo.Collect(t, 1); !strings.HasPrefix(got[0], "["+strconv.FormatInt(lo-5, 10)+"] PROCESS_HOST_CHECK_RESULT;web7;0;timed") {
		t.Errorf("line %q does not carry the check's time %d", got[0], lo-5)
	}
}

// TestNRDPSendNRDPCurl posts as send_nrdp.sh does with a file, with curl.
func TestNRDPSendNRDPCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	n := startNRDP(t, nil)
	file := filepath.Join(t.TempDir(), "checks.xml")
	writeFile(t, file, nrdpXML(nrdpCheck("service", "web1", "http", "0", "HTTP OK: 200 &amp; fine|time=0.01s;1;2;0"),
		nrdpCheck("host", "web2", "", "0", "PING OK")), 0o600)
	out, err := exec.Command(curl, "-f", "--silent", "--insecure", "-d", "token=web-token&cmd=submitcheck",
		"--data-urlencode", "xml@"+file, n.url+"/nrdp/").Output()
	if err != nil || string(out) != nrdpOK(2) {
		t.Errorf("curl: %v %q", err, out)
	}
	// send_nrdp.sh reads the answer with sed.
	status := regexp.MustCompile(`.*<status>(.*)</status>.*`).FindStringSubmatch(strings.ReplaceAll(string(out), "\n", " "))
	if status == nil || status[1] != "0" {
		t.Errorf("send_nrdp.sh would read status %v", status)
	}
	assertLines(t, stripTimes(t, n.fifo.Collect(t, 2), now()-10, now()), []string{
		"PROCESS_SERVICE_CHECK_RESULT;web1;http;0;HTTP OK: 200 & fine|time=0.01s;1;2;0", "PROCESS_HOST_CHECK_RESULT;web2;0;PING OK"})
}

// TestNRDPRefusals: tokens, bad data and results outside a token's rights
// are refused as NRDP's clients expect, each refused result named.
func TestNRDPRefusals(t *testing.T) {
	n := startNRDP(t, nil)
	good := nrdpXML(nrdpCheck("host", "web1", "", "0", "up"))
	for _, c := range []struct {
		name   string
		fields url.Values
		want   string
	}{
		{"no token", url.Values{"cmd": {"submitcheck"}, "xml": {good}}, "<message>NO TOKEN</message>"},
		{"bad token", url.Values{"token": {"nope"}, "cmd": {"submitcheck"}, "xml": {good}}, "<message>BAD TOKEN</message>"},
		{"outside its networks", url.Values{"token": {"far-token"}, "cmd": {"submitcheck"}, "xml": {good}}, "<message>BAD TOKEN</message>"},
		{"bad XML", url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "xml": {"<checkresults><oops>"}}, "<message>BAD XML</message>\n    <information>"},
		{"bad JSON", url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "json": {"{"}}, `"message":"BAD JSON","information":`},
		{"unauthorized host", url.Values{"token": {"web-token"}, "cmd": {"submitcheck"}, "xml": {nrdpXML(
			nrdpCheck("host", "web1", "", "0", "mine"), nrdpCheck("host", "db1", "", "0", "not mine"))}},
			"<output>1 checks processed, 1 refused</output>\n        <refused>\n            <checkresult index=\"1\" hostname=\"db1\" reason=\"unauthorized\""},
		{"bad state", url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "xml": {nrdpXML(nrdpCheck("host", "web1", "", "7", "x"))}},
			`<message>REFUSED: bad_state</message>`},
		{"semicolon in host", url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "xml": {nrdpXML(nrdpCheck("host", "web1;x", "", "0", "x"))}},
			`hostname="web1;x"`},
		{"command allowed", url.Values{"token": {"ops-token"}, "cmd": {"submitcmd"}, "command": {"ENABLE_HOST_NOTIFICATIONS;web1"}},
			"<status>0</status>\n    <message>OK</message>\n</result>"},
		{"command not allowed", url.Values{"token": {"ops-token"}, "cmd": {"submitcmd"}, "command": {"SHUTDOWN_PROGRAM"}}, "<message>DENIED TOKEN</message>"},
		{"command without commands", url.Values{"token": {"any-token"}, "cmd": {"submitcmd"}, "command": {"ENABLE_HOST_NOTIFICATIONS;web1"}},
			"<message>DENIED TOKEN</message>"},
	} {
		code, body := n.post(t, c.fields)
		if code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want %q in it", c.name, code, body, c.want)
		}
	}
	assertLines(t, stripTimes(t, n.fifo.Collect(t, 2), now()-20, now()), []string{
		"PROCESS_HOST_CHECK_RESULT;web1;0;mine", "ENABLE_HOST_NOTIFICATIONS;web1"})
	if extra, ok := n.fifo.Next(500 * time.Millisecond); ok {
		t.Errorf("a refused submission was written: %q", extra)
	}
	if got := identWaitMetric(t, n.metrics, `nsca_results_dropped_total{reason="unauthorized"}`, 2); got != 2 {
		t.Errorf("unauthorized drops counted %v, want 2", got)
	}
	if !regexp.MustCompile(`refused the token of identity "far": 127\.0\.0\.1 is outside its networks`).MatchString(n.Stderr()) {
		t.Errorf("the log does not say why far-token was refused:\n%s", n.Stderr())
	}
	// /clients names the source and its last failure: a wrong path last.
	resp, err := http.Post(n.url+"/nrdp/wrong/", "application/x-www-form-urlencoded", strings.NewReader("cmd=hello"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a wrong path answered %d, want 404", resp.StatusCode)
	}
	if page := identGet(t, "http://"+n.metrics+"/clients"); !strings.Contains(page, `nrdp: a request for "/nrdp/wrong/", not an NRDP path`) {
		t.Errorf("/clients does not name the wrong path:\n%s", page)
	}
	if got := identWaitMetric(t, n.metrics, `nsca_front_refused_total{front="nrdp"}`, 3); got < 3 {
		t.Errorf("refused of the nrdp front end: %v, want at least the 2 unauthorized and the bad state", got)
	}
}

// TestNRDPBatchesToSpool: batches of 1 and 500 results, to the spool.
func TestNRDPBatchesToSpool(t *testing.T) {
	spool := makeSpoolDir(t, t.TempDir())
	n := startNRDP(t, Config{"check_result_path": spool})
	code, body := n.post(t, url.Values{"token": {"web-token"}, "cmd": {"submitcheck"}, "XMLDATA": {nrdpXML(nrdpCheck("service", "web0", "one", "1", "a\nb"))}})
	if code != 200 || body != nrdpOK(1) {
		t.Errorf("batch of 1: %d %q", code, body)
	}
	checks := make([]string, 500)
	for i := range checks {
		checks[i] = nrdpCheck("service", fmt.Sprintf("web%d", i+1), "disk", "0", fmt.Sprintf("result %d", i+1))
	}
	code, body = n.post(t, url.Values{"token": {"web-token"}, "cmd": {"submitcheck"}, "XMLDATA": {nrdpXML(checks...)}})
	if code != 200 || body != nrdpOK(500) {
		t.Errorf("batch of 500: %d %q", code, body)
	}
	files := readSpool(t, spool, 501)
	if len(files) != 501 {
		t.Fatalf("%d spool files, want 501", len(files))
	}
	for _, f := range files {
		if f.host == "web0" && !strings.Contains(f.content, "service_description=one\n") {
			t.Errorf("spool file of the batch of 1:\n%s", f.content)
		}
	}
}

// TestNRDPHTTPS: NRDP over HTTPS with a certificate made for the test.
func TestNRDPHTTPS(t *testing.T) {
	cert, key := nrdpCert(t)
	n := startNRDP(t, Config{"nrdp_tls_cert": cert, "nrdp_tls_key": key})
	code, body := n.post(t, url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "xml": {nrdpXML(nrdpCheck("host", "web1", "", "0", "tls"))}})
	if code != 200 || body != nrdpOK(1) {
		t.Errorf("over HTTPS: %d %q", code, body)
	}
	if got := n.fifo.Collect(t, 1); !strings.HasSuffix(got[0], "PROCESS_HOST_CHECK_RESULT;web1;0;tls") {
		t.Errorf("line %q", got[0])
	}
}

// nrdpCert writes a self-signed certificate for 127.0.0.1 and its key.
func nrdpCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nrdp test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "nrdp.crt"), filepath.Join(dir, "nrdp.key")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o644)
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), 0o600)
	if _, err := os.Stat(keyFile); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestNRDPReload: across SIGHUP the NRDP port keeps serving (the new
// pipeline listens beside the old one, SO_REUSEPORT), and a request under
// way when the old pipeline stops is finished, not cut off.
func TestNRDPReload(t *testing.T) {
	n := startNRDP(t, nil)
	n.client.Transport = &http.Transport{DisableKeepAlives: true}
	post := func(host string) (int, string) {
		return n.post(t, url.Values{"token": {"any-token"}, "cmd": {"submitcheck"}, "xml": {nrdpXML(nrdpCheck("host", host, "", "0", "up"))}})
	}
	if code, body := post("before"); code != 200 || body != nrdpOK(1) {
		t.Fatalf("before the reload: %d %q", code, body)
	}
	n.Signal(syscall.SIGHUP)
	n.waitLog(regexp.MustCompile(`SIGHUP: configuration reloaded`), 10*time.Second)
	for i := range 5 {
		if code, body := post(fmt.Sprintf("after%d", i)); code != 200 || body != nrdpOK(1) {
			t.Errorf("after the reload: %d %q", code, body)
		}
	}
	want := []string{"PROCESS_HOST_CHECK_RESULT;before;0;up"}
	for i := range 5 {
		want = append(want, fmt.Sprintf("PROCESS_HOST_CHECK_RESULT;after%d;0;up", i))
	}
	assertLines(t, stripTimes(t, n.fifo.Collect(t, 6), now()-20, now()), want)
}
