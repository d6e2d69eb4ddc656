package nrdp

import (
	"errors"
	"testing"
)

func TestParseJSONValues(t *testing.T) {
	got, err := parseChecks(formatJSON, `{"checkresults":[
		{"checkresult":{"type":"service"},"hostname":"h","servicename":"s","state":2,"output":"o","time":1700000000},
		{"checkresult":{"type":"SERVICE"},"hostname":"h","servicename":"s","state":"1","output":null},
		{"hostname":"h","servicename":"ignored","state":"0"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].isService() || got[0].State != "2" || got[0].TimeField != "1700000000" ||
		!got[1].isService() || got[1].Output != "" || got[2].isService() {
		t.Errorf("parsed %+v", got)
	}
	for _, bad := range []string{"", " {} ", "null", `"x"`, `{"checkresults":[{"hostname":{"a":1}}]}`} {
		if _, err := parseChecks(formatJSON, bad); !errors.Is(err, ErrBadJSON) {
			t.Errorf("%q: %v, want ErrBadJSON", bad, err)
		}
	}
	// NRDP processes an object without checkresults as no results.
	if got, err := parseChecks(formatJSON, `{"other":1}`); err != nil || len(got) != 0 {
		t.Errorf("no checkresults: %v %v", got, err)
	}
}

func TestParseXMLForms(t *testing.T) {
	latin1 := "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><checkresults><checkresult><hostname>caf\xe9</hostname>" +
		"<state>0</state><output><![CDATA[a<b]]></output></checkresult></checkresults>"
	got, err := parseChecks(formatXML, latin1)
	if err != nil || len(got) != 1 || got[0].Host != "café" || got[0].Output != "a<b" {
		t.Errorf("latin-1: %+v %v", got, err)
	}
	// Any root, as NRDP iterates the root's checkresult children.
	if got, err := parseChecks(formatXML, "<x><checkresult><hostname>h</hostname></checkresult><other/></x>"); err != nil || len(got) != 1 {
		t.Errorf("other root: %+v %v", got, err)
	}
	for _, bad := range []string{"", "<a></a><b></b>", "<a>&nbsp;</a>", "<a></a>text", `<?xml version="1.0" encoding="EBCDIC"?><a/>`} {
		if _, err := parseChecks(formatXML, bad); !errors.Is(err, ErrBadXML) {
			t.Errorf("%q: %v, want ErrBadXML", bad, err)
		}
	}
}

func TestStateAndTime(t *testing.T) {
	for s, ok := range map[string]bool{"0": true, " 3 ": true, "4": false, "-1": false, "": false, "x": false, "1.5": false, "None": false} {
		c := check{State: s}
		if _, err := c.state(); (err == nil) != ok {
			t.Errorf("state %q: %v", s, err)
		}
	}
	for s, want := range map[string]int64{"": 0, "0": 0, "1700000000": 1700000000, " 5 ": 5, "x": -1, "-3": -1, "99999999999": -1} {
		c := check{TimeField: s}
		got, err := c.time()
		if want < 0 && err == nil || want >= 0 && (err != nil || got != want) {
			t.Errorf("time %q: %d %v", s, got, err)
		}
	}
}

func TestPHPUnescape(t *testing.T) {
	f := form{}
	parseQuery("a=1+2%20%3B&b=100%&c=%zz&a=later&=x&d", f)
	if f["a"] != "later" || f["b"] != "100%" || f["c"] != "%zz" || f["d"] != "" || len(f) != 4 {
		t.Errorf("parsed %q", f)
	}
	if got := phpUnescape("1+2%20%3b"); got != "1 2 ;" {
		t.Errorf("unescaped %q", got)
	}
}
