package nrdp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

// fakeValidate stands in for the validate stage: it reads the queue and
// tells each submission's source its outcome, refusing a host name with
// ';' (bad_name) and what the identity may not submit (unauthorized).
type fakeValidate struct {
	mu    sync.Mutex
	taken []intake.Submission
	stall chan struct{} // when not nil, wait on it before each outcome
	done  chan struct{}
	// noCommandSink refuses commands as the deliverable rule does when
	// no destination can write them.
	noCommandSink atomic.Bool
}

func (v *fakeValidate) run(q *intake.Queue) {
	defer close(v.done)
	for sub := range q.C {
		if v.stall != nil {
			<-v.stall
		}
		id := sub.Source.Identity
		var r *intake.Refusal
		switch {
		case sub.Malformed != nil:
			r = sub.Malformed
		case identities.UnsafeByte(sub.Result.Host) >= 0 || (sub.Kind == intake.KindResult && sub.Result.Host == ""):
			r = &intake.Refusal{Reason: "bad_name", Err: errors.New("validate: bad host name")}
		case sub.Kind == intake.KindCommand && (id == nil || !id.AllowsCommand(sub.Command)):
			r = &intake.Refusal{Reason: counters.DropUnauthorized, Err: errors.New("validate: command not allowed")}
		case sub.Kind == intake.KindCommand && v.noCommandSink.Load():
			r = &intake.Refusal{Reason: counters.DropDestinationDown, Err: intake.ErrNoCommandSink}
		case sub.Kind == intake.KindResult && id != nil &&
			!id.AllowsResult(sub.Result.Host, sub.Result.Service, sub.Result.ReturnCode, sub.Result.Output):
			r = &intake.Refusal{Reason: counters.DropUnauthorized, Err: errors.New("validate: not this identity's host")}
		}
		if r != nil {
			if sub.Source.Outcomes != nil {
				sub.Source.Outcomes.Refused(&sub, *r)
			}
			continue
		}
		v.mu.Lock()
		v.taken = append(v.taken, sub)
		v.mu.Unlock()
		if sub.Source.Outcomes != nil {
			sub.Source.Outcomes.Taken(&sub)
		}
	}
}

// results returns what was taken so far.
func (v *fakeValidate) results() []intake.Submission {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]intake.Submission(nil), v.taken...)
}

const testIdentities = `
authorize "web" {
	token = "webtoken"
	hosts = "web[0-9]+"
	services = ".*@web[0-9]+"
}
authorize "ops" {
	token = { "opstoken", "opstoken2" }
	hosts = ".*"
	services = ".*"
	commands = "ENABLE_HOST_NOTIFICATIONS;.*"
}
authorize "far" {
	token = "fartoken"
	hosts = ".*"
	networks = "10.0.0.0/8"
}
authorize "ng" { password = "psk"; hosts = ".*" }
`

// testServer runs a server with nrdp_tokens "anytoken", the identities
// above and the fake validation, for the test's life.
type testServer struct {
	*Server
	v   *fakeValidate
	url string
}

func startServer(t testing.TB, edit func(*Config)) *testServer {
	t.Helper()
	return start(t, edit, false)
}

// start is startServer with a validation that, when stalled, decides
// nothing until the test ends.
func start(t testing.TB, edit func(*Config), stalled bool) *testServer {
	t.Helper()
	ids, err := identities.Parse("ids.cfg", []byte(testIdentities), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	q := intake.NewQueue(16)
	cfg := Config{Options: Options{Listen: ln.Addr().String(), Tokens: []string{"anytoken"}, Timeout: 2 * time.Second},
		Identities: ids, Queue: q, Listener: ln}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := &fakeValidate{done: make(chan struct{})}
	if stalled {
		v.stall = make(chan struct{})
	}
	go v.run(q)
	go s.Run()
	t.Cleanup(func() {
		if v.stall != nil {
			close(v.stall)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
		<-v.done
	})
	return &testServer{Server: s, v: v, url: "http://" + ln.Addr().String()}
}

// post posts fields url-encoded to path and returns the status and body.
func (ts *testServer) post(t *testing.T, path string, fields url.Values) (int, string) {
	t.Helper()
	resp, err := http.PostForm(ts.url+path, fields)
	if err != nil {
		t.Fatal(err)
	}
	return readResp(t, resp)
}

func readResp(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// xmlOf is a checkresults document of the given checkresult elements.
func xmlOf(checks ...string) string {
	return "<?xml version='1.0'?>\n<checkresults>\n" + strings.Join(checks, "\n") + "\n</checkresults>\n"
}

func hostXML(host, state, output string) string {
	return "<checkresult type='host' checktype='1'><hostname>" + host + "</hostname><state>" + state +
		"</state><output>" + output + "</output></checkresult>"
}

func serviceXML(host, service, state, output string) string {
	return "<checkresult type='service' checktype='1'><hostname>" + host + "</hostname><servicename>" + service +
		"</servicename><state>" + state + "</state><output>" + output + "</output></checkresult>"
}

// okXML is NRDP's answer to n results all taken.
func okXML(n string) string {
	return "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<result>\n    <status>0</status>\n    <message>OK</message>\n" +
		"    <meta>\n        <output>" + n + " checks processed</output>\n    </meta>\n</result>\n"
}

// errXML is NRDP's error answer.
func errXML(msg string) string {
	return "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<result>\n    <status>-1</status>\n    <message>" + msg +
		"</message>\n</result>\n"
}
