package icinga2

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"nsca_fast/stages/emit/internal/emittest"

	"nsca_fast/stages/emit/sink"
)

// decodeRequest parses a body requestBody built into a generic map, so
// the tests see the JSON Icinga sees, not the Go struct.
func decodeRequest(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s is not JSON: %v", body, err)
	}
	return m
}

func TestIcingaRequestService(t *testing.T) {
	it := item(1762153445, "web01", "HTTP", 2, "CRITICAL - Socket timeout|time=10.0s;5;8;0 size=0B")
	got := decodeRequest(t, requestBody(it, "nsca1"))
	want := map[string]any{
		"type":             "Service",
		"service":          "web01!HTTP",
		"exit_status":      2.0,
		"plugin_output":    "CRITICAL - Socket timeout",
		"performance_data": []any{"time=10.0s;5;8;0", "size=0B"},
		"check_source":     "nsca1",
		"execution_start":  1762153445.0,
		"execution_end":    1762153445.0,
		"verbose":          true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestIcingaRequestHost(t *testing.T) {
	got := decodeRequest(t, requestBody(item(1762153445, "web01", "", 1, "PING CRITICAL - Packet loss = 100%"), "nsca1"))
	want := map[string]any{
		"type":             "Host",
		"host":             "web01",
		"exit_status":      1.0,
		"plugin_output":    "PING CRITICAL - Packet loss = 100%",
		"check_source":     "nsca1",
		"execution_start":  1762153445.0,
		"execution_end":    1762153445.0,
		"performance_data": []any{},
		"verbose":          true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// TestIcingaRequestOptional: without a receipt time or a check source the
// fields are left out (Icinga fills in its own), an empty output is still
// sent (plugin_output is required), and no performance data is [], as
// Icinga stores it for a plugin that printed none.
func TestIcingaRequestOptional(t *testing.T) {
	got := decodeRequest(t, requestBody(item(0, "h", "s", 0, ""), ""))
	want := map[string]any{"type": "Service", "service": "h!s", "exit_status": 0.0, "plugin_output": "",
		"performance_data": []any{}, "verbose": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestIcingaRequestReturnCodes(t *testing.T) {
	for _, c := range []struct {
		rc            int16
		service, host float64
	}{
		{0, 0, 0}, {1, 1, 1}, {2, 2, 1}, {3, 3, 1}, {4, 3, 1}, {7, 3, 1}, {255, 3, 1}, {-1, 3, 1}, {-32768, 3, 1},
	} {
		svc := decodeRequest(t, requestBody(item(1, "h", "s", c.rc, "x"), ""))["exit_status"]
		host := decodeRequest(t, requestBody(item(1, "h", "", c.rc, "x"), ""))["exit_status"]
		if svc != c.service || host != c.host {
			t.Errorf("return code %d: service %v, host %v; want %v and %v", c.rc, svc, host, c.service, c.host)
		}
	}
}

// TestIcingaSplitOutput: the output is split as Icinga 2 splits an active
// check's (PluginUtility::ParseCheckOutput and SplitPerfdata); the tests
// in package tests compare with a real Icinga.
func TestIcingaSplitOutput(t *testing.T) {
	none := []string{}
	for _, c := range []struct {
		name, in, text string
		perf           []string
	}{
		{"plain", "OK - all fine", "OK - all fine", none},
		{"empty", "", "", none},
		{"blanks before the pipe stay", "OK - fine | a=1;2;3 b=2ms", "OK - fine ", []string{"a=1;2;3", "b=2ms"}},
		{"no text", "|a=1", "", []string{"a=1"}},
		{"a pipe without = is output", "OK |", "OK |", none},
		{"blanks between", "OK|  a=1 \t b=2  ", "OK", []string{"a=1", "b=2"}},
		{"quoted labels", "OK|'my label'=1ms;2;3 'it''s here'=4 x=5",
			"OK", []string{"'my label'=1ms;2;3", "'it''s here'=4", "x=5"}},
		{"quotes dropped without a space", "OK|'label'=1", "OK", []string{"label=1"}},
		{"a token without = joins the next label", "OK|foo a=1 bar", "OK", []string{"'foo a'=1"}},
		{"check_multi prefix", "OK|c1::a=1 b=2 c2::x=3 y=4", "OK", []string{"c1::a=1", "c1::b=2", "c2::x=3", "c2::y=4"}},
		{"second pipe on the first line is perfdata", "a|b|c=1", "a", []string{"b|c=1"}},
		{"long output", "CRIT - disk\n/ 95%\n/var 80%", "CRIT - disk\n/ 95%\n/var 80%", none},
		{"outer blanks trimmed", "\n  CRIT\nlong\n\n ", "CRIT\nlong", none},
		{"perfdata only on lines with a pipe",
			"DISK OK|/=1\nline two\nline three|/var=2\n/home=3\n'a b'=4",
			"DISK OK\nline two\nline three\n/home=3\n'a b'=4", []string{"/=1", "/var=2"}},
		{"long output after first-line perfdata", "OK|a=1\nmore text\nand more", "OK\nmore text\nand more", []string{"a=1"}},
		{"pipe opening a long output line", "OK\n|a=1", "OK\n", []string{"a=1"}},
		{"leading empty text is dropped", "|a=1\nOK", "OK", []string{"a=1"}},
		{"CR and LF each end a line", "OK|a=1\r\nlong\r\n", "OK\n\nlong", []string{"a=1"}},
		{"backslashes stay", `C:\ is full\n|x=1`, `C:\ is full\n`, []string{"x=1"}},
	} {
		text, perf := splitPluginOutput(c.in)
		if text != c.text || !reflect.DeepEqual(perf, c.perf) {
			t.Errorf("%s: %q gives %q %q, want %q %q", c.name, c.in, text, perf, c.text, c.perf)
		}
	}
}

// TestIcingaRequestInvalidUTF8: NSCA output is bytes, JSON text Unicode:
// bytes that are not UTF-8 are replaced, so the body stays valid JSON.
func TestIcingaRequestInvalidUTF8(t *testing.T) {
	body := requestBody(item(1, "h", "s", 0, "Temp\xb0C \xff|t=1"), "")
	if !utf8.Valid(body) {
		t.Fatalf("body is not UTF-8: %q", body)
	}
	if got := decodeRequest(t, body)["plugin_output"]; got != "Temp\uFFFDC \uFFFD" {
		t.Errorf("plugin_output %q", got)
	}
}

// TestNewIcingaValidates: Validate refuses the options that cannot work,
// New the files it cannot load.
func TestNewIcingaValidates(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	ok := Config{Options: Options{URL: "https://icinga:5665", User: "u", Password: "p"}}
	for _, c := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no url", func(c *Config) { c.URL = "" }, "must start with https://"},
		{"ftp", func(c *Config) { c.URL = "ftp://icinga" }, "must start with https://"},
		{"no host", func(c *Config) { c.URL = "https:///v1" }, "no host"},
		{"credentials in url", func(c *Config) { c.URL = "https://u:p@icinga:5665" }, "credentials"},
		{"query", func(c *Config) { c.URL = "https://icinga:5665/?x=1" }, "query"},
		{"no credentials", func(c *Config) { c.User, c.Password = "", "" }, "needs icinga2_api_user"},
		{"no password", func(c *Config) { c.Password = "" }, "no password"},
		{"cert without key", func(c *Config) { c.CertFile = "/x.crt" }, "go together"},
		{"key without cert", func(c *Config) { c.KeyFile = "/x.key" }, "go together"},
		{"missing cert", func(c *Config) {
			c.CertFile, c.KeyFile = filepath.Join(dir, "x.crt"), filepath.Join(dir, "x.key")
		}, "client certificate"},
		{"missing ca", func(c *Config) { c.CAFile = filepath.Join(dir, "none.crt") }, "ca file"},
		{"ca not pem", func(c *Config) { c.CAFile = notPEM }, "no PEM certificate"},
		{"negative in flight", func(c *Config) { c.MaxInFlight = -1 }, "negative"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "negative"},
		{"negative retries", func(c *Config) { c.Retries = -1 }, "negative"},
	} {
		cfg := ok
		c.change(&cfg)
		// What Validate lets through (the files) New loads.
		err := cfg.Validate()
		if err == nil {
			_, err = New(cfg)
		}
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want errConfig mentioning %q", c.name, err, c.want)
		}
	}
	s, err := New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "icinga2" || s.cfg.MaxInFlight != DefaultMaxInFlight || s.cfg.Timeout != DefaultTimeout || s.retries != 0 {
		t.Errorf("defaults: name %q, in flight %d, timeout %v, retries %d", s.Name(), s.cfg.MaxInFlight, s.cfg.Timeout, s.retries)
	}
	if host, _ := os.Hostname(); host != "" && s.source != host {
		t.Errorf("check source %q, want the host name %q", s.source, host)
	}
}

// fakeIcinga is an HTTPS server answering process-check-result as answer
// says, recording every request.
type fakeIcinga struct {
	t      *testing.T
	srv    *httptest.Server
	caFile string

	mu       sync.Mutex
	reqs     []icingaRequest
	attempts map[string]int // per object and output
	answer   func(r icingaRequest, attempt int) (int, string)
	delay    time.Duration

	inFlight, maxInFlight atomic.Int32
	objBusy               map[string]bool
	overlap               atomic.Bool // two requests for one object at once

	// Set by options, before the server starts.
	check   func(*http.Request) // looks at each request first
	tlsConf *tls.Config
	conns   atomic.Int32 // connections accepted
}

// okAnswer is Icinga's answer to a processed check result.
func okAnswer(r icingaRequest, _ int) (int, string) {
	return 200, fmt.Sprintf(`{"results":[{"code":200,"status":"Successfully processed check result for object '%s'."}]}`, r.object())
}

const (
	unknownAnswer = `{"diagnostic_information":"Error: Object does not exist.\n\nStacktrace:\n 0# __cxa_throw\n","error":404,"status":"No objects found."}`
	noPermission  = `{"diagnostic_information":"Error: Missing permission: actions/process-check-result\n","error":404,"status":"No objects found."}`
)

func (r icingaRequest) object() string { return r.Host + r.Service }

func newFakeIcinga(t *testing.T, answer func(r icingaRequest, attempt int) (int, string), opts ...func(*fakeIcinga)) *fakeIcinga {
	f := &fakeIcinga{t: t, answer: answer, attempts: map[string]int{}, objBusy: map[string]bool{}}
	for _, o := range opts {
		o(f)
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.TLS = f.tlsConf
	f.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	f.caFile = filepath.Join(t.TempDir(), "ca.crt")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(f.caFile, pemCert, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeIcinga) serve(w http.ResponseWriter, r *http.Request) {
	if f.check != nil {
		f.check(r)
	}
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxInFlight.Load()
		if n <= m || f.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/actions/process-check-result") ||
		r.Header.Get("Accept") != "application/json" {
		f.t.Errorf("unexpected request %s %s Accept %q", r.Method, r.URL, r.Header.Get("Accept"))
	}
	var req icingaRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	f.mu.Lock()
	obj := req.object()
	if f.objBusy[obj] {
		f.overlap.Store(true)
	}
	f.objBusy[obj] = true
	f.reqs = append(f.reqs, req)
	key := obj + "\x00" + req.PluginOutput
	f.attempts[key]++
	attempt := f.attempts[key]
	delay := f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	code, body := f.answer(req, attempt)
	f.mu.Lock()
	f.objBusy[obj] = false
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write([]byte(body))
}

func (f *fakeIcinga) requests() []icingaRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]icingaRequest(nil), f.reqs...)
}

// sink returns an Icinga sink for f with short timeouts, verifying f's
// certificate, changed by change.
func (f *fakeIcinga) sink(change func(*Config)) *Icinga {
	f.t.Helper()
	cfg := Config{Options: Options{URL: f.srv.URL, User: "nsca", Password: "secret", CAFile: f.caFile, VerifyTLS: true,
		Timeout: 2 * time.Second, Retries: 2}, CheckSource: "test"}
	if change != nil {
		change(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// rejection is one call of Rejected.
type rejection struct {
	object, output string
	status         int
	reason         string
}

func collectRejected(cfg *Config, into *[]rejection) {
	cfg.Rejected = func(it sink.Item, status int, reason string) {
		*into = append(*into, rejection{it.Result.Host + "!" + it.Result.Service, it.Result.Output, status, reason})
	}
}

func TestIcingaWriteDelivers(t *testing.T) {
	var user, pass string
	var mu sync.Mutex
	f := newFakeIcinga(t, okAnswer, func(f *fakeIcinga) {
		f.check = func(r *http.Request) {
			mu.Lock()
			user, pass, _ = r.BasicAuth()
			mu.Unlock()
			if !strings.HasPrefix(r.URL.Path, "/prefix/v1/") {
				t.Errorf("path %s, want under the URL's /prefix", r.URL.Path)
			}
		}
	})
	s := f.sink(func(c *Config) { c.URL += "/prefix/" })
	its := items(40, 20)
	orig := append([]sink.Item(nil), its...)
	n, err := s.Write(its)
	if n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(its))
	}
	if !reflect.DeepEqual(its, orig) {
		t.Errorf("Write reordered a batch it delivered whole")
	}
	reqs := f.requests()
	if len(reqs) != len(its) {
		t.Errorf("%d requests for %d results", len(reqs), len(its))
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		seen[r.PluginOutput] = true
		if r.CheckSource != "test" {
			t.Errorf("check_source %q", r.CheckSource)
		}
	}
	for _, it := range its {
		if !seen[it.Result.Output] {
			t.Errorf("%q never posted", it.Result.Output)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if user != "nsca" || pass != "secret" {
		t.Errorf("basic auth %q:%q", user, pass)
	}
}

// TestIcingaWriteRejected: 404 (unknown object), 400 (values refused) and a
// per-object 403 (passive checks disabled) are consumed at once, reported
// through Rejected in batch order, never retried and never left for the
// fallback; so are names Icinga objects cannot have.
func TestIcingaWriteRejected(t *testing.T) {
	f := newFakeIcinga(t, func(r icingaRequest, a int) (int, string) {
		switch {
		case strings.HasPrefix(r.object(), "nosuch"):
			return 404, unknownAnswer
		case r.Host == "bad":
			return 400, `{"results":[{"code":400,"status":"Invalid 'exit_status' for Host bad."}]}`
		case r.Service == "h!passive":
			return 403, `{"results":[{"code":403,"status":"Passive checks are disabled for object 'h!passive'."}]}`
		}
		return okAnswer(r, a)
	})
	var rej []rejection
	s := f.sink(func(c *Config) { collectRejected(c, &rej) })
	its := []sink.Item{
		item(1, "h", "ok", 0, "one"),
		item(1, "nosuch", "svc", 0, "two"),
		item(1, "bad", "", 0, "three"),
		item(1, "h", "passive", 0, "four"),
		item(1, "h", "a!b", 0, "five"),
		item(1, "h", "ok", 0, "six"),
		item(1, "nosuch", "svc", 0, "seven"),
	}
	n, err := s.Write(its)
	if n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(its))
	}
	want := []rejection{
		{"nosuch!svc", "two", 404, "No objects found."},
		{"bad!", "three", 400, "Invalid 'exit_status' for Host bad."},
		{"h!passive", "four", 403, "Passive checks are disabled for object 'h!passive'."},
		{"h!a!b", "five", 0, "object names cannot contain '!'"},
		{"nosuch!svc", "seven", 404, "No objects found."},
	}
	if !reflect.DeepEqual(rej, want) {
		t.Errorf("rejected:\n got  %v\n want %v", rej, want)
	}
	for k, a := range f.attempts {
		if a != 1 {
			t.Errorf("%q posted %d times, want once", k, a)
		}
	}
	if len(f.requests()) != 6 {
		t.Errorf("%d requests, want 6 (the name with '!' is not sent)", len(f.requests()))
	}
}

// TestIcingaWriteRetries: a 500 followed by a 200 is retried and delivered.
func TestIcingaWriteRetries(t *testing.T) {
	f := newFakeIcinga(t, func(r icingaRequest, a int) (int, string) {
		if r.PluginOutput == "flaky" && a == 1 {
			return 500, `{"error":500,"status":"Internal Server Error"}`
		}
		return okAnswer(r, a)
	})
	s := f.sink(nil)
	n, err := s.Write([]sink.Item{item(1, "h", "s", 0, "flaky"), item(1, "h", "t", 0, "fine")})
	if n != 2 || err != nil {
		t.Fatalf("Write = %d, %v; want 2, nil", n, err)
	}
	if a := f.attempts["h!s\x00flaky"]; a != 2 {
		t.Errorf("the flaky result was posted %d times, want 2", a)
	}
}

// TestIcingaWriteNoRetries: Retries 0 sends each request once.
func TestIcingaWriteNoRetries(t *testing.T) {
	f := newFakeIcinga(t, func(icingaRequest, int) (int, string) { return 503, "busy" })
	s := f.sink(func(c *Config) { c.Retries = 0; c.MaxInFlight = 1 })
	start := time.Now()
	if n, err := s.Write(items(5, 10)); n != 0 || !errors.Is(err, errUnavailable) || !strings.Contains(err.Error(), "503") {
		t.Errorf("Write = %d, %v; want 0 and the 503", n, err)
	}
	if reqs := len(f.requests()); reqs != 1 || time.Since(start) > 200*time.Millisecond {
		t.Errorf("%d requests in %v, want 1 and no back-off", reqs, time.Since(start))
	}
}

// TestIcingaWriteDown: an API that keeps failing gets Retries retries per
// request; then nothing new is started, the undelivered results are left
// for the fallback with an error saying why, and the next Write fails at
// once until the back-off passed.
func TestIcingaWriteDown(t *testing.T) {
	for _, c := range []struct {
		name, body string
		code       int
		want       error
	}{
		{"500", `{"error":500,"status":"Internal Server Error"}`, 500, errUnavailable},
		{"502 from a proxy", "<html>Bad Gateway</html>", 502, errUnavailable},
		{"401", `{"error":401,"status":"Unauthorized. Please check your user credentials."}`, 401, errAuth},
		{"403", `{"error":403,"status":"No permission"}`, 403, errAuth},
		{"no permission", noPermission, 404, errAuth},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var failing atomic.Bool
			failing.Store(true)
			f := newFakeIcinga(t, func(r icingaRequest, a int) (int, string) {
				if failing.Load() {
					return c.code, c.body
				}
				return okAnswer(r, a)
			})
			var rej []rejection
			s := f.sink(func(c *Config) { c.MaxInFlight = 2; collectRejected(c, &rej) })
			its := items(10, 10)
			orig := append([]sink.Item(nil), its...)
			start := time.Now()
			n, err := s.Write(its)
			took := time.Since(start)
			if n != 0 || !errors.Is(err, c.want) {
				t.Fatalf("Write = %d, %v; want 0, %v", n, err, c.want)
			}
			if !reflect.DeepEqual(its, orig) {
				t.Errorf("the undelivered items are not in their order")
			}
			if len(rej) != 0 {
				t.Errorf("Rejected called: %v", rej)
			}
			// Two lanes start, each tries 3 times (250 + 500 ms back-off).
			if reqs := len(f.requests()); reqs > 6 {
				t.Errorf("%d requests, want at most 2 lanes x 3 attempts", reqs)
			}
			if took < 750*time.Millisecond || took > 3*time.Second {
				t.Errorf("Write took %v, want the back-off of 2 retries (750 ms) and not much more", took)
			}
			// Down: the next batch goes straight to the fallback.
			before := len(f.requests())
			start = time.Now()
			n, err = s.Write(its[:3])
			if n != 0 || !errors.Is(err, errBackoff) || time.Since(start) > 50*time.Millisecond || len(f.requests()) != before {
				t.Errorf("Write while down = %d, %v after %v with %d requests; want 0, errBackoff at once, none sent",
					n, err, time.Since(start), len(f.requests())-before)
			}
			// Back up after the back-off.
			failing.Store(false)
			time.Sleep(icingaDownFirst)
			if n, err := s.Write(its); n != len(its) || err != nil {
				t.Errorf("Write after the back-off = %d, %v; want %d, nil", n, err, len(its))
			}
		})
	}
}

// TestIcingaWriteObjectFailure: a 5xx that Icinga gives for one object
// (a per-object result) holds back that object's results, in order, and
// the results after them; the other objects are delivered and the API is
// not taken as down.
func TestIcingaWriteObjectFailure(t *testing.T) {
	f := newFakeIcinga(t, func(r icingaRequest, a int) (int, string) {
		if r.PluginOutput == "a2" {
			return 500, `{"results":[{"code":500,"status":"Exception while processing the check result."}]}`
		}
		return okAnswer(r, a)
	})
	s := f.sink(nil)
	its := []sink.Item{
		item(1, "h", "a", 0, "a1"), item(1, "h", "b", 0, "b1"), item(1, "h", "a", 0, "a2"),
		item(1, "h", "b", 0, "b2"), item(1, "h", "a", 0, "a3"), item(1, "h", "c", 0, "c1"),
	}
	n, err := s.Write(its)
	if !errors.Is(err, errUnavailable) || !strings.Contains(err.Error(), "h!a") {
		t.Errorf("err %v, want errUnavailable naming h!a", err)
	}
	var outs []string
	for _, it := range its {
		outs = append(outs, it.Result.Output)
	}
	if want := []string{"a1", "b1", "b2", "c1", "a2", "a3"}; n != 4 || !reflect.DeepEqual(outs, want) {
		t.Errorf("Write = %d with items %v; want 4 with %v", n, outs, want)
	}
	if a := f.attempts["h!a\x00a3"]; a != 0 {
		t.Errorf("a3 was posted after a2 failed")
	}
	if a := f.attempts["h!a\x00a2"]; a != 3 {
		t.Errorf("a2 posted %d times, want 3", a)
	}
	if n, err := s.Write([]sink.Item{item(1, "h", "d", 0, "d1")}); n != 1 || err != nil {
		t.Errorf("next Write = %d, %v; want 1, nil (the API is not down)", n, err)
	}
}

// TestIcingaWriteRefused: nothing listens: the batch fails within its bound
// and the error says why.
func TestIcingaWriteRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := New(Config{Options: Options{URL: "https://" + addr, User: "u", Password: "p", VerifyTLS: true, Timeout: time.Second, Retries: 2}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := s.Write(items(50, 10))
	if took := time.Since(start); n != 0 || !errors.Is(err, errUnavailable) || !strings.Contains(err.Error(), "refused") || took > 2*time.Second {
		t.Errorf("Write = %d, %v after %v; want 0, connection refused within 2 s", n, err, took)
	}
}

// TestIcingaWriteTimeout: an API that does not answer costs Timeout per
// attempt, and the batch ends within its bound.
func TestIcingaWriteTimeout(t *testing.T) {
	f := newFakeIcinga(t, okAnswer)
	f.delay = time.Second
	s := f.sink(func(c *Config) { c.Timeout = 100 * time.Millisecond; c.Retries = 1 })
	start := time.Now()
	n, err := s.Write(items(20, 10))
	if took := time.Since(start); n != 0 || !errors.Is(err, errUnavailable) || took > s.batchLimit+500*time.Millisecond {
		t.Errorf("Write = %d, %v after %v; want 0, errUnavailable within %v", n, err, took, s.batchLimit)
	}
}

// TestIcingaWriteVerifiesTLS: with verification on, a server whose
// certificate does not chain to the CA is refused without retries;
// Insecure skips the check.
func TestIcingaWriteVerifiesTLS(t *testing.T) {
	f := newFakeIcinga(t, okAnswer)
	s := f.sink(func(c *Config) { c.CAFile = "" })
	start := time.Now()
	n, err := s.Write(items(3, 10))
	if n != 0 || !errors.Is(err, errUnavailable) || !strings.Contains(err.Error(), "certificate") || time.Since(start) > 200*time.Millisecond {
		t.Errorf("Write = %d, %v after %v; want 0 and a certificate error at once", n, err, time.Since(start))
	}
	s = f.sink(func(c *Config) { c.CAFile = ""; c.VerifyTLS = false })
	if n, err := s.Write(items(3, 10)); n != 3 || err != nil {
		t.Errorf("Insecure: Write = %d, %v; want 3, nil", n, err)
	}
}

// TestIcingaWriteInFlight: never more than MaxInFlight requests at once,
// over at most that many connections, and the bound is used.
func TestIcingaWriteInFlight(t *testing.T) {
	f := newFakeIcinga(t, okAnswer)
	f.delay = 20 * time.Millisecond
	s := f.sink(func(c *Config) { c.MaxInFlight = 3 })
	for range 2 {
		if n, err := s.Write(items(30, 10)); n != 30 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if m := f.maxInFlight.Load(); m != 3 {
		t.Errorf("at most %d requests at once, want 3", m)
	}
	if c := f.conns.Load(); c > 3 {
		t.Errorf("%d connections for two batches, want at most 3 kept alive", c)
	}
}

// TestIcingaWriteOrder: results for one object are posted one at a time in
// batch order, while different objects go in parallel.
func TestIcingaWriteOrder(t *testing.T) {
	f := newFakeIcinga(t, okAnswer)
	f.delay = 2 * time.Millisecond
	s := f.sink(func(c *Config) { c.MaxInFlight = 4 })
	var its []sink.Item
	for i := range 20 {
		for _, h := range []string{"a", "b", "c", "d", "e"} {
			svc := "svc"
			if h == "e" {
				svc = "" // a host check
			}
			its = append(its, item(1, h, svc, 0, fmt.Sprintf("%s-%02d", h, i)))
		}
	}
	if n, err := s.Write(its); n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if f.overlap.Load() {
		t.Errorf("two results for one object were in flight at once")
	}
	next := map[string]int{}
	for _, r := range f.requests() {
		h := r.PluginOutput[:1]
		if want := fmt.Sprintf("%s-%02d", h, next[h]); r.PluginOutput != want {
			t.Errorf("got %s, want %s next", r.PluginOutput, want)
		}
		next[h]++
	}
	if m := f.maxInFlight.Load(); m < 2 {
		t.Errorf("at most %d requests at once: objects were not posted in parallel", m)
	}
}

// TestIcingaClientCert: a client certificate authenticates without a
// password.
func TestIcingaClientCert(t *testing.T) {
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nsca-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f := newFakeIcinga(t, okAnswer, func(f *fakeIcinga) {
		f.tlsConf = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
		f.check = func(r *http.Request) {
			if _, _, ok := r.BasicAuth(); ok || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "nsca-client" {
				t.Errorf("request without the client certificate, or with basic auth")
			}
		}
	})
	s := f.sink(func(c *Config) { c.User, c.Password, c.CertFile, c.KeyFile = "", "", certFile, keyFile })
	if n, err := s.Write(items(3, 10)); n != 3 || err != nil {
		t.Errorf("Write = %d, %v; want 3, nil", n, err)
	}
}

var (
	item  = emittest.Item
	items = emittest.Items
)
