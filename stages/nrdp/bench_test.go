package nrdp

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkSubmitCheck100 posts requests of 100 service results to a
// server whose validation takes everything, over one kept-alive
// connection: the front end's own cost per result (b.N requests).
func BenchmarkSubmitCheck100(b *testing.B) {
	ts := startServer(b, nil)
	checks := make([]string, 100)
	for i := range checks {
		checks[i] = serviceXML(fmt.Sprintf("web%d", i), "load", "0", "OK - load average: 0.01, 0.02, 0.03|load1=0.010;5;10;0")
	}
	body := url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "XMLDATA": {xmlOf(checks...)}}.Encode()
	b.SetBytes(100)
	b.ResetTimer()
	for range b.N {
		resp, err := http.Post(ts.url+"/nrdp/", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkParseXML100 parses a document of 100 service results.
func BenchmarkParseXML100(b *testing.B) {
	checks := make([]string, 100)
	for i := range checks {
		checks[i] = serviceXML(fmt.Sprintf("web%d", i), "load", "0", "OK - load average: 0.01, 0.02, 0.03|load1=0.010;5;10;0")
	}
	doc := xmlOf(checks...)
	b.SetBytes(int64(len(doc)))
	for range b.N {
		if _, err := parseXML(doc); err != nil {
			b.Fatal(err)
		}
	}
}
