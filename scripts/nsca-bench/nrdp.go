package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sendNRDP is client w posting to the NRDP server at --nrdp: one request
// (cmd=submitcheck, the token, XMLDATA) per --checks-per-conn results, one
// after the other on a kept-alive connection, until the ids or the time
// run out. Every request counts as a connection; one whose answer is not
// NRDP's "N checks processed" counts as a failed write (its results as
// sent).
func (r *run) sendNRDP(w int, client *http.Client) {
	for {
		first, count := r.take()
		if count == 0 || !r.pace(first) {
			return
		}
		body := nrdpBody(r.o.NRDPToken, first, count)
		want := "<output>" + strconv.FormatUint(count, 10) + " checks processed</output>"
		now := r.clock()
		for id := first; id < first+count; id++ {
			r.sent.set(id, now)
		}
		r.sentCount.Add(count)
		r.connections.Add(1)
		resp, err := client.Post(r.o.NRDP, "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			r.failed.Add(1)
			r.noteErr(fmt.Errorf("client %d: %w", w, err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(want)) {
			r.failed.Add(1)
			r.noteErr(fmt.Errorf("client %d: %s (%v): %.200s", w, resp.Status, err, b))
		}
	}
}

// nrdpClient is the HTTP client of --conns NRDP clients: a kept-alive
// connection each.
func nrdpClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: 3 * timeout, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// nrdpBody is the form an NRDP client posts for checks first..first+n-1.
func nrdpBody(token string, first, n uint64) string {
	var x bytes.Buffer
	x.WriteString("<?xml version='1.0'?>\n<checkresults>\n")
	for id := first; id < first+n; id++ {
		res := ResultFor(id)
		x.WriteString("<checkresult type='service' checktype='1'><hostname>")
		xml.EscapeText(&x, []byte(res.Host))
		x.WriteString("</hostname><servicename>")
		xml.EscapeText(&x, []byte(res.Service))
		x.WriteString("</servicename><state>" + strconv.Itoa(int(res.ReturnCode)) + "</state><output>")
		xml.EscapeText(&x, []byte(res.Output))
		x.WriteString("</output></checkresult>\n")
	}
	x.WriteString("</checkresults>\n")
	return url.Values{"token": {token}, "cmd": {"submitcheck"}, "XMLDATA": {x.String()}}.Encode()
}
