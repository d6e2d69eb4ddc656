package main

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// runOn runs the generator with o against a server the test plays, which
// writes to o.FIFO, and checks that every check arrived once.
func runOn(t *testing.T, o Options) *Result {
	t.Helper()
	o.Host, o.Method, o.Quiet, o.Timeout = "127.0.0.1", 1, 2*time.Second, 5*time.Second
	return runDelivered(t, o)
}

// --ng-client runs the program once per --checks-per-conn results, with
// the results on its standard input as nsca-ng's send_nsca reads them;
// here a stand-in writes them into the command file as nsca-ng's server.
func TestNGClient(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "nagios.cmd")
	cfg := filepath.Join(dir, "client.cfg")
	prog := filepath.Join(dir, "send_nsca")
	if err := os.WriteFile(cfg, []byte(fifo), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n[ \"$1\" = -c ] || exit 2\n" +
		`awk -F'\t' 'BEGIN{RS="\027"} NF {printf "[1] PROCESS_SERVICE_CHECK_RESULT;%s;%s;%s;%s\n", $1, $2, $3, $4}' >> "$(cat "$2")"` + "\n"
	if err := os.WriteFile(prog, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	res := runOn(t, Options{FIFO: fifo, NGClient: prog, NGConfig: cfg, ChecksPerConn: 5, Conns: 2, Total: 23})
	if res.Sent != 23 || res.Connections != 5 || res.Generator != "nsca-ng send_nsca" {
		t.Errorf("sent %d in %d sessions by %q, want 23 in 5 by nsca-ng send_nsca", res.Sent, res.Connections, res.Generator)
	}
	if res.ClientCPUUsPerCheck <= 0 || res.LatencyMaxMs <= 0 {
		t.Errorf("the client processes' CPU or the latency is missing: %+v", res)
	}
}

// nrdpForm is the XMLDATA of an NRDP submitcheck.
type nrdpForm struct {
	Results []struct {
		Type    string `xml:"type,attr"`
		Host    string `xml:"hostname"`
		Service string `xml:"servicename"`
		State   string `xml:"state"`
		Output  string `xml:"output"`
	} `xml:"checkresult"`
}

// --nrdp posts --checks-per-conn results per request with the token, and
// --spool reads check result files as the real NRDP writes them (here a
// stand-in written after its nrdp_write_check_output_to_cmd).
func TestNRDPWithSpool(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	os.Mkdir(spool, 0o700)
	var requests, n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		requests.Add(1)
		var f nrdpForm
		if req.FormValue("token") != "tok" || req.FormValue("cmd") != "submitcheck" ||
			xml.Unmarshal([]byte(req.FormValue("XMLDATA")), &f) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		for _, c := range f.Results {
			name := filepath.Join(spool, fmt.Sprintf("c%06d", n.Add(1)))
			body := fmt.Sprintf("### NRDP Check ###\nstart_time=1700000000.0\n# Time: now\nhost_name=%s\nservice_description=%s\n"+
				"check_type=1\nearly_timeout=1\nexited_ok=1\nreturn_code=%s\noutput=%s\\n\n", c.Host, c.Service, c.State, c.Output)
			if c.Type != "service" || os.WriteFile(name, []byte(body), 0o600) != nil || os.WriteFile(name+".ok", nil, 0o600) != nil {
				http.Error(w, "cannot write", http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintf(w, "<result><status>0</status><message>OK</message><meta><output>%d checks processed</output></meta></result>\n", len(f.Results))
	}))
	defer srv.Close()
	res := runOn(t, Options{FIFO: filepath.Join(dir, "nagios.cmd"), NRDP: srv.URL, NRDPToken: "tok", Spool: spool,
		ChecksPerConn: 10, Conns: 2, Total: 45})
	if res.Sent != 45 || res.Connections != 5 || requests.Load() != 5 {
		t.Errorf("sent %d in %d requests (%d served), want 45 in 5", res.Sent, res.Connections, requests.Load())
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("%d files left in the spool", len(left))
	}
}

// A host result's file becomes PROCESS_HOST_CHECK_RESULT.
func TestSpoolHostLine(t *testing.T) {
	got := string(spoolLine([]byte("### NRDP Check ###\nstart_time=17.0\nhost_name=h1\ncheck_type=1\nreturn_code=2\noutput=down\\n\n")))
	if want := "[17] PROCESS_HOST_CHECK_RESULT;h1;2;down"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.HasPrefix(ngLine(7), "bench-host\tbench-svc\t3\tbench id=7 ") {
		t.Errorf("ngLine(7) = %q", ngLine(7))
	}
}
