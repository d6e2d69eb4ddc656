package nrdp

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"nsca_fast/stages/intake"
)

func TestHelloIsNRDPs(t *testing.T) {
	ts := startServer(t, nil)
	code, body := ts.post(t, "/nrdp/", url.Values{"cmd": {"hello"}})
	want := "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<response>\n    <status>0</status>\n    <message>OK</message>\n" +
		"    <product>nrdp</product>\n    <version>2.0.5</version>\n</response>\n"
	if code != 200 || body != want {
		t.Errorf("hello: %d %q, want 200 %q", code, body, want)
	}
	_, body = ts.post(t, "/", url.Values{"cmd": {"HELLO"}, "output_type": {"json"}})
	if want := `{"response":{"status":0,"message":"OK","product":"nrdp","version":"2.0.5"}}`; body != want {
		t.Errorf("hello in JSON: %q, want %q", body, want)
	}
}

// TestEveryAliasAndPath submits one result in each of NRDP's data fields
// at each path its clients use.
func TestEveryAliasAndPath(t *testing.T) {
	ts := startServer(t, nil)
	doc := map[string]string{
		"XMLDATA": xmlOf(hostXML("web1", "0", "up")), "xmldata": xmlOf(hostXML("web1", "0", "up")), "xml": xmlOf(hostXML("web1", "0", "up")),
		"JSONDATA": `{"checkresults":[{"checkresult":{"type":"host"},"hostname":"web1","state":"0","output":"up"}]}`,
	}
	doc["jsondata"], doc["json"] = doc["JSONDATA"], doc["JSONDATA"]
	jsonOK := `{"result":{"status":0,"message":"OK","meta":{"output":"1 checks processed"}}}`
	n := 0
	for _, path := range []string{"/", "/nrdp", "/nrdp/", "/nrdp/server/", "/nrdp/server/index.php"} {
		for field, data := range doc {
			code, body := ts.post(t, path, url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, field: {data}})
			want := okXML("1")
			if strings.HasPrefix(strings.ToLower(field), "json") {
				want = jsonOK
			}
			if code != 200 || body != want {
				t.Errorf("%s %s: %d %q, want %q", path, field, code, body, want)
			}
			n++
		}
	}
	if got := len(ts.v.results()); got != n {
		t.Errorf("%d results taken, want %d", got, n)
	}
	if code, _ := ts.post(t, "/other/", url.Values{"cmd": {"hello"}}); code != 404 {
		t.Errorf("another path: %d, want 404", code)
	}
}

// TestLaterAliasWins: xml wins over xmldata over XMLDATA, as NRDP's
// grab_xml reads them; XML data wins over JSON data.
func TestLaterAliasWins(t *testing.T) {
	ts := startServer(t, nil)
	ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"},
		"XMLDATA": {xmlOf(hostXML("a1", "0", ""))}, "xmldata": {xmlOf(hostXML("a2", "0", ""))}, "xml": {xmlOf(hostXML("a3", "0", ""))},
		"json": {`{"checkresults":[{"hostname":"j","state":0}]}`}})
	ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"},
		"XMLDATA": {xmlOf(hostXML("b1", "0", ""))}, "xmldata": {xmlOf(hostXML("b2", "0", ""))}})
	ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"},
		"JSONDATA": {`{"checkresults":[{"hostname":"c1","state":0}]}`}, "jsondata": {`{"checkresults":[{"hostname":"c2","state":0}]}`}})
	var hosts []string
	for _, s := range ts.v.results() {
		hosts = append(hosts, s.Result.Host)
	}
	if got := strings.Join(hosts, ","); got != "a3,b2,c2" {
		t.Errorf("hosts taken %s, want a3,b2,c2", got)
	}
}

// TestGetAndPostMerge: fields come from the query and the body, the
// body's winning, whatever the method.
func TestGetAndPostMerge(t *testing.T) {
	ts := startServer(t, nil)
	q := url.Values{"token": {"anytoken"}, "cmd": {"hello"}}
	resp, err := http.PostForm(ts.url+"/nrdp/?"+q.Encode(), url.Values{"cmd": {"submitcheck"}, "xml": {xmlOf(hostXML("m1", "1", "x"))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, body := readResp(t, resp); body != okXML("1") {
		t.Errorf("merged request: %q", body)
	}
	resp, err = http.Get(ts.url + "/nrdp/?" + url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "xml": {xmlOf(hostXML("m2", "1", "x"))}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if _, body := readResp(t, resp); body != okXML("1") {
		t.Errorf("GET: %q", body)
	}
	if got := len(ts.v.results()); got != 2 {
		t.Errorf("%d taken, want 2", got)
	}
}

func TestMultipart(t *testing.T) {
	ts := startServer(t, nil)
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("token", "anytoken")
	mw.WriteField("cmd", "submitcheck")
	fw, _ := mw.CreateFormFile("xml", "ignored.xml") // a file part: PHP's $_FILES, which NRDP never reads
	fw.Write([]byte(xmlOf(hostXML("file", "0", ""))))
	mw.WriteField("XMLDATA", xmlOf(serviceXML("mp", "disk", "2", "full")))
	mw.Close()
	resp, err := http.Post(ts.url+"/nrdp/", mw.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	if _, body := readResp(t, resp); body != okXML("1") {
		t.Errorf("multipart: %q", body)
	}
	got := ts.v.results()
	if len(got) != 1 || got[0].Result.Host != "mp" || got[0].Result.Service != "disk" || got[0].Result.ReturnCode != 2 || got[0].Result.Output != "full" {
		t.Errorf("taken %+v", got)
	}
}

// TestSendNRDPUnencoded posts as send_nrdp.sh does without a file: the
// XML raw in the body, semicolons, + and all.
func TestSendNRDPUnencoded(t *testing.T) {
	ts := startServer(t, nil)
	body := "token=anytoken&cmd=submitcheck&xml=" + xmlOf(serviceXML("web1", "load", "0", "OK|load=1.00;5;10;0 100%"))
	resp, err := http.Post(ts.url+"/nrdp/", "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if _, b := readResp(t, resp); b != okXML("1") {
		t.Errorf("answer %q", b)
	}
	if got := ts.v.results(); len(got) != 1 || got[0].Result.Output != "OK|load=1.00;5;10;0 100%" {
		t.Errorf("taken %+v", got)
	}
}

// TestFields: a missing type is a host result even with servicename, a
// service result keeps its name, output stays as sent, time is the
// check's time and Sent.
func TestFields(t *testing.T) {
	ts := startServer(t, nil)
	data := xmlOf(
		"<checkresult><hostname>h1</hostname><servicename>ignored</servicename><state>1</state><output>a\nb &amp; c</output></checkresult>",
		"<checkresult type='service'><hostname>h2</hostname><servicename>s2</servicename><state> 2 </state><output>x</output><time>1700000000</time></checkresult>",
	)
	before := time.Now().Unix()
	ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "xml": {data}})
	got := ts.v.results()
	if len(got) != 2 {
		t.Fatalf("taken %+v", got)
	}
	h, s := got[0], got[1]
	if h.Result.Service != "" || h.Result.Output != "a\nb & c" || h.Sent != 0 || h.Time < before || h.Kind != intake.KindResult {
		t.Errorf("host result %+v", h)
	}
	if s.Result.Service != "s2" || s.Result.ReturnCode != 2 || s.Time != 1700000000 || s.Sent != 1700000000 {
		t.Errorf("service result %+v", s)
	}
	if h.Source.Front != intake.Front("nrdp") || h.Source.Identity != nil || h.Source.ID < intake.IDBase(2) {
		t.Errorf("source %+v", h.Source)
	}
}

func TestTokens(t *testing.T) {
	ts := startServer(t, nil)
	data := xmlOf(hostXML("web1", "0", "up"))
	for _, c := range []struct {
		token, want string
	}{
		{"", errXML("NO TOKEN")},
		{"wrong", errXML("BAD TOKEN")},
		{"fartoken", errXML("BAD TOKEN")}, // outside its networks
		{"webtoken", okXML("1")},
		{"opstoken2", okXML("1")},
	} {
		code, body := ts.post(t, "/nrdp/", url.Values{"token": {c.token}, "cmd": {"submitcheck"}, "XMLDATA": {data}})
		if code != 200 || body != c.want {
			t.Errorf("token %q: %d %q, want %q", c.token, code, body, c.want)
		}
	}
	got := ts.v.results()
	if len(got) != 2 || got[0].Source.Identity.Name != "web" || got[1].Source.Identity.Name != "ops" {
		t.Errorf("taken %+v", got)
	}
	_, body := ts.post(t, "/", url.Values{"token": {"x"}, "cmd": {"submitcheck"}, "json": {"{}"}})
	if want := `{"result":{"status":-1,"message":"BAD TOKEN"}}`; body != want {
		t.Errorf("JSON bad token %q, want %q", body, want)
	}
}

func TestBadData(t *testing.T) {
	ts := startServer(t, nil)
	for _, c := range []struct {
		field, data, want string
	}{
		{"xml", "", "BAD XML"},
		{"xml", "<checkresults><checkresult>", "BAD XML"},
		{"xml", "not xml", "BAD XML"},
		{"json", "{", "BAD JSON"},
		{"json", "[]", "BAD JSON"},
		{"json", `{"checkresults":{"a":1}}`, "BAD JSON"},
	} {
		code, body := ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, c.field: {c.data}})
		if code != 200 || !strings.Contains(body, ">"+c.want+"<") && !strings.Contains(body, `"`+c.want+`"`) ||
			!strings.Contains(body, "information") {
			t.Errorf("%s %q: %d %q, want %s with information", c.field, c.data, code, body, c.want)
		}
	}
	_, body := ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "xml": {"<a"}})
	if !strings.HasPrefix(body, "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<result>\n    <status>-1</status>\n    <message>BAD XML</message>\n    <information>") {
		t.Errorf("BAD XML answer %q", body)
	}
}

// TestRefusals: each refused result is listed by index with its reason,
// in attributes that none of the clients' element lookups meets; the
// status stays 0 while anything was taken.
func TestRefusals(t *testing.T) {
	ts := startServer(t, nil)
	data := xmlOf(hostXML("web1", "0", "up"), hostXML("db1", "0", "up"), hostXML("web2", "x", ""),
		"<checkresult type='service'><hostname>web3</hostname><state>0</state></checkresult>", hostXML("web;4", "0", ""))
	code, body := ts.post(t, "/", url.Values{"token": {"webtoken"}, "cmd": {"submitcheck"}, "xml": {data}})
	want := "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<result>\n    <status>0</status>\n    <message>OK</message>\n    <meta>\n" +
		"        <output>1 checks processed, 4 refused</output>\n        <refused>\n" +
		`            <checkresult index="1" hostname="db1" reason="unauthorized" error="validate: not this identity&apos;s host"/>` + "\n" +
		`            <checkresult index="2" hostname="web2" reason="bad_state" error="nrdp: bad check result: state &quot;x&quot; is not 0, 1, 2 or 3"/>` + "\n" +
		`            <checkresult index="3" hostname="web3" reason="no_service" error="nrdp: bad check result: type is service and servicename is empty"/>` + "\n" +
		`            <checkresult index="4" hostname="web;4" reason="bad_name" error="validate: bad host name"/>` + "\n" +
		"        </refused>\n    </meta>\n</result>\n"
	if code != 200 || body != want {
		t.Errorf("answer %d\n%s\nwant\n%s", code, body, want)
	}
	// All refused: status -1, so that send_nrdp.sh and NSClient++ say so.
	_, body = ts.post(t, "/", url.Values{"token": {"webtoken"}, "cmd": {"submitcheck"}, "output_type": {"json"}, "xml": {xmlOf(hostXML("db1", "0", "up"))}})
	want = `{"result":{"status":-1,"message":"REFUSED: unauthorized","meta":{"output":"0 checks processed, 1 refused",` +
		`"refused":[{"index":0,"hostname":"db1","reason":"unauthorized","error":"validate: not this identity's host"}]}}}`
	if body != want {
		t.Errorf("all refused:\n%s\nwant\n%s", body, want)
	}
}

func TestCommands(t *testing.T) {
	ts := startServer(t, nil)
	ok := "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<result>\n    <status>0</status>\n    <message>OK</message>\n</result>\n"
	for _, c := range []struct {
		token, cmd, command, want string
	}{
		{"opstoken", "submitcmd", "ENABLE_HOST_NOTIFICATIONS;web1", ok},
		{"opstoken", "submitrawcmd", "ENABLE_HOST_NOTIFICATIONS;web2\n", ok},
		{"opstoken", "submitcmd", "DISABLE_HOST_NOTIFICATIONS;web1", "DENIED TOKEN"},
		{"opstoken", "submitcmd", "", "NO COMMAND"},
		{"opstoken", "submitcmd", "ENABLE_HOST_NOTIFICATIONS;a\nSHUTDOWN_PROGRAM", "BAD COMMAND"},
		{"webtoken", "submitcmd", "ENABLE_HOST_NOTIFICATIONS;web1", "DENIED TOKEN"},
		{"anytoken", "submitcmd", "ENABLE_HOST_NOTIFICATIONS;web1", "DENIED TOKEN"},
	} {
		_, body := ts.post(t, "/", url.Values{"token": {c.token}, "cmd": {c.cmd}, "command": {c.command}})
		if body != c.want && !strings.Contains(body, "<message>"+c.want+"</message>") {
			t.Errorf("%s %q by %s: %q, want %s", c.cmd, c.command, c.token, body, c.want)
		}
	}
	got := ts.v.results()
	if len(got) != 2 || got[0].Kind != intake.KindCommand || got[0].Command != "ENABLE_HOST_NOTIFICATIONS;web1" ||
		got[1].Command != "ENABLE_HOST_NOTIFICATIONS;web2" {
		t.Errorf("taken %+v", got)
	}
}

func TestCommandsDisabled(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Identities.Identities[1].Commands = nil })
	_, body := ts.post(t, "/", url.Values{"token": {"opstoken"}, "cmd": {"submitcmd"}, "command": {"X"}})
	if !strings.Contains(body, "<message>COMMANDS DISABLED</message>") {
		t.Errorf("answer %q", body)
	}
	ts = startServer(t, nil)
	ts.v.noCommandSink.Store(true)
	_, body = ts.post(t, "/", url.Values{"token": {"opstoken"}, "cmd": {"submitcmd"}, "command": {"ENABLE_HOST_NOTIFICATIONS;web1"}})
	if !strings.Contains(body, "<message>NO COMMAND FILE</message>") {
		t.Errorf("answer without a command file %q", body)
	}
}

func TestBatchOf500(t *testing.T) {
	ts := startServer(t, nil)
	checks := make([]string, 500)
	for i := range checks {
		checks[i] = serviceXML(fmt.Sprintf("web%d", i), "disk", "1", fmt.Sprintf("line 1\nline %d", i))
	}
	code, body := ts.post(t, "/", url.Values{"token": {"webtoken"}, "cmd": {"submitcheck"}, "XMLDATA": {xmlOf(checks...)}})
	if code != 200 || body != okXML("500") {
		t.Errorf("answer %d %q", code, body)
	}
	got := ts.v.results()
	if len(got) != 500 || got[499].Result.Host != "web499" || got[7].Result.Output != "line 1\nline 7" {
		t.Errorf("%d taken", len(got))
	}
}

func TestOtherAnswers(t *testing.T) {
	ts := startServer(t, nil)
	if code, body := ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"nosuch"}}); code != 400 || !strings.Contains(body, "NO REQUEST HANDLER") {
		t.Errorf("unknown cmd: %d %q", code, body)
	}
	if code, _ := ts.post(t, "/", url.Values{}); code != 200 {
		t.Errorf("no cmd: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPut, ts.url+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := readResp(t, resp); code != 405 {
		t.Errorf("PUT: %d", code)
	}
}

// TestPrettyJSON: pretty indents JSON as PHP's JSON_PRETTY_PRINT does.
func TestPrettyJSON(t *testing.T) {
	ts := startServer(t, nil)
	_, body := ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "pretty": {"1"},
		"json": {`{"checkresults":[{"hostname":"web1","state":0,"output":"up"}]}`}})
	want := "{\n    \"result\": {\n        \"status\": 0,\n        \"message\": \"OK\",\n        \"meta\": {\n" +
		"            \"output\": \"1 checks processed\"\n        }\n    }\n}"
	if body != want {
		t.Errorf("pretty answer %q, want %q", body, want)
	}
}
