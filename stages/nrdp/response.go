package nrdp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// NRDP's messages, as its clients show them.
const (
	msgOK               = "OK"
	msgNoToken          = "NO TOKEN"
	msgBadToken         = "BAD TOKEN"
	msgBadXML           = "BAD XML"
	msgBadJSON          = "BAD JSON"
	msgNoCommand        = "NO COMMAND"
	msgCommandsDisabled = "COMMANDS DISABLED"
	msgDeniedToken      = "DENIED TOKEN"
	msgNoCommandFile    = "NO COMMAND FILE"
	msgWriteError       = "WRITE ERROR"
	// Ours: NRDP has no word for these.
	msgBadCommand   = "BAD COMMAND"
	msgRefused      = "REFUSED"
	msgBusy         = "BUSY"
	msgNoHandler    = "NO REQUEST HANDLER"
	msgTooLarge     = "REQUEST TOO LARGE"
	msgBadRequest   = "BAD REQUEST"
	protocolVersion = "2.0.5" // the NRDP whose protocol is served
)

// refusedCheck is one result the response says was refused: its place in
// the request (from 0), its names and why.
type refusedCheck struct {
	Index   int    `json:"index"`
	Host    string `json:"hostname"`
	Service string `json:"servicename,omitempty"`
	Reason  string `json:"reason"`
	Error   string `json:"error"`
	// noCommandSink: a command no destination can write.
	noCommandSink bool
}

// response is what a request is answered: NRDP's result (or hello's
// response) element.
type response struct {
	code    int  // HTTP status
	hello   bool // <response> with product and version, not <result>
	status  int  // 0 or -1
	message string
	info    string // information, for BAD XML and BAD JSON
	// meta: output and the refused results, for submitcheck.
	hasMeta bool
	output  string
	refused []refusedCheck
}

// fail is an error answer of NRDP's shape.
func fail(code int, message, info string) *response {
	return &response{code: code, status: -1, message: message, info: info}
}

// answerForm is the form of an answer.
type answerForm uint8

const (
	answerXML answerForm = iota
	answerJSON
	answerPrettyJSON
)

// write sends r as XML or JSON. The XML is NRDP's, byte for byte where
// it has the element: a declaration line, then one element a line, four
// spaces deeper per level; the refused list is ours, in attributes (its
// clients read the first message and output elements, or grep the last
// <status> and <message>: none of which it holds).
func (r *response) write(w http.ResponseWriter, as answerForm) {
	var body string
	if as != answerXML {
		w.Header().Set("Content-Type", "application/json")
		body = r.json(as == answerPrettyJSON)
	} else {
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		body = r.xml()
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(r.code)
	_, _ = w.Write([]byte(body))
}

func (r *response) xml() string {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n")
	root := "result"
	if r.hello {
		root = "response"
	}
	b.WriteString("<" + root + ">\n")
	elem := func(depth int, name, text string) {
		b.WriteString(strings.Repeat("    ", depth) + "<" + name + ">" + xmlEscape(text) + "</" + name + ">\n")
	}
	elem(1, "status", strconv.Itoa(r.status))
	elem(1, "message", r.message)
	if r.info != "" {
		elem(1, "information", r.info)
	}
	if r.hello {
		elem(1, "product", "nrdp")
		elem(1, "version", protocolVersion)
	}
	if r.hasMeta {
		b.WriteString("    <meta>\n")
		elem(2, "output", r.output)
		if len(r.refused) > 0 {
			b.WriteString("        <refused>\n")
			for _, c := range r.refused {
				b.WriteString(`            <checkresult index="` + strconv.Itoa(c.Index) + `" hostname="` + xmlEscape(c.Host) + `"`)
				if c.Service != "" {
					b.WriteString(` servicename="` + xmlEscape(c.Service) + `"`)
				}
				b.WriteString(` reason="` + xmlEscape(c.Reason) + `" error="` + xmlEscape(c.Error) + "\"/>\n")
			}
			b.WriteString("        </refused>\n")
		}
		b.WriteString("    </meta>\n")
	}
	b.WriteString("</" + root + ">\n")
	return b.String()
}

// xmlEscape escapes as NRDP's xmlentities does, and writes the control
// characters XML 1.0 cannot hold (a host name may carry one) as U+FFFD,
// so that a client's parser never fails on the answer.
func xmlEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		case '\n':
			b.WriteString("&#10;")
		case '\t', '\r':
			b.WriteString("&#" + strconv.Itoa(int(c)) + ";")
		default:
			if c < 0x20 || c == 0xFFFE || c == 0xFFFF {
				c = '\uFFFD'
			}
			b.WriteRune(c)
		}
	}
	return b.String()
}

// jsonResult is NRDP's JSON answer, fields in its order.
type jsonResult struct {
	Status  int       `json:"status"`
	Message string    `json:"message"`
	Info    string    `json:"information,omitempty"`
	Product string    `json:"product,omitempty"`
	Version string    `json:"version,omitempty"`
	Meta    *jsonMeta `json:"meta,omitempty"`
}

type jsonMeta struct {
	Output  string         `json:"output"`
	Refused []refusedCheck `json:"refused,omitempty"`
}

func (r *response) json(pretty bool) string {
	res := jsonResult{Status: r.status, Message: r.message, Info: r.info}
	root := "result"
	if r.hello {
		root, res.Product, res.Version = "response", "nrdp", protocolVersion
	}
	if r.hasMeta {
		res.Meta = &jsonMeta{Output: r.output, Refused: r.refused}
	}
	v := map[string]jsonResult{root: res}
	if pretty {
		b, _ := json.MarshalIndent(v, "", "    ")
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
