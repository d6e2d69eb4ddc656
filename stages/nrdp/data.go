package nrdp

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors of a submitcheck's data, answered as NRDP's BAD XML or BAD JSON
// with the error as its information.
var (
	ErrBadXML  = errors.New("nrdp: bad XML")
	ErrBadJSON = errors.New("nrdp: bad JSON")
)

// The reasons this package refuses a result itself, before validation:
// what the counters and the response call them.
const (
	ReasonBadState  = "bad_state"  // state is no integer 0..3
	ReasonBadTime   = "bad_time"   // time is no integer
	ReasonNoService = "no_service" // type="service" without a servicename
)

// check is one <checkresult> (or JSON checkresult) as the client wrote
// it, its fields as text.
type check struct {
	Type                                    string
	Host, Service, State, Output, TimeField string
}

// format is how a submitcheck's data is written.
type format uint8

const (
	formatXML format = iota
	formatJSON
)

// parseChecks reads a submitcheck's data. As NRDP, the results are the
// root element's checkresult children, whatever the root is called, or
// the JSON object's checkresults list; an empty document is bad.
func parseChecks(f format, data string) ([]check, error) {
	if f == formatJSON {
		return parseJSON(data)
	}
	return parseXML(data)
}

// xmlCheck is a <checkresult> for encoding/xml.
type xmlCheck struct {
	Type    string `xml:"type,attr"`
	Host    string `xml:"hostname"`
	Service string `xml:"servicename"`
	State   string `xml:"state"`
	Output  string `xml:"output"`
	Time    string `xml:"time"`
}

func parseXML(data string) ([]check, error) {
	var doc struct {
		XMLName xml.Name
		Checks  []xmlCheck `xml:"checkresult"`
	}
	d := xml.NewDecoder(strings.NewReader(data))
	d.CharsetReader = charsetReader
	if err := d.Decode(&doc); err != nil {
		if err == io.EOF {
			err = errors.New("no XML document")
		}
		return nil, fmt.Errorf("%w: %v", ErrBadXML, err)
	}
	// What follows the root must be whitespace, comments or processing
	// instructions: a second element means the document is not one.
	for {
		t, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: after the root element: %v", ErrBadXML, err)
		}
		if _, ok := t.(xml.StartElement); ok {
			return nil, fmt.Errorf("%w: a second root element", ErrBadXML)
		}
		if cd, ok := t.(xml.CharData); ok && len(bytes.TrimSpace(cd)) > 0 {
			return nil, fmt.Errorf("%w: text after the root element", ErrBadXML)
		}
	}
	out := make([]check, len(doc.Checks))
	for i, c := range doc.Checks {
		out[i] = check{Type: c.Type, Host: c.Host, Service: c.Service, State: c.State, Output: c.Output, TimeField: c.Time}
	}
	return out, nil
}

// charsetReader reads the encodings besides UTF-8 that an XML
// declaration may name and that clients use: Latin-1 and ASCII.
func charsetReader(charset string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "latin1", "latin-1", "iso_8859-1":
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, len(b)*2)
		for _, c := range b {
			out = utf8.AppendRune(out, rune(c))
		}
		return bytes.NewReader(out), nil
	}
	return nil, fmt.Errorf("unsupported encoding %q (use UTF-8)", charset)
}

// scalar is a JSON field NRDP reads with strval: a string, a number (as
// written) or a boolean; null is empty.
type scalar string

// UnmarshalJSON takes a string, number, boolean or null.
func (s *scalar) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = scalar(v)
	case string(b) == "null" || string(b) == "false":
		*s = ""
	case string(b) == "true":
		*s = "1"
	case len(b) > 0 && (b[0] == '{' || b[0] == '['):
		return errors.New("an object or list where a value belongs")
	default:
		*s = scalar(b)
	}
	return nil
}

// jsonCheck is one entry of the JSON checkresults list.
type jsonCheck struct {
	Attrs   struct{ Type scalar } `json:"checkresult"`
	Host    scalar                `json:"hostname"`
	Service scalar                `json:"servicename"`
	State   scalar                `json:"state"`
	Output  scalar                `json:"output"`
	Time    scalar                `json:"time"`
}

func parseJSON(data string) ([]check, error) {
	var doc struct {
		Checks *[]jsonCheck `json:"checkresults"`
	}
	trimmed := strings.TrimSpace(data)
	// NRDP refuses what PHP's json_decode makes falsy: nothing, {}, [],
	// null, false, 0, "".
	switch trimmed {
	case "", "{}", "[]", "null", "false", "0", `""`:
		return nil, fmt.Errorf("%w: empty", ErrBadJSON)
	}
	if !strings.HasPrefix(trimmed, "{") {
		return nil, fmt.Errorf("%w: not an object with a checkresults list", ErrBadJSON)
	}
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if doc.Checks == nil {
		return nil, nil
	}
	out := make([]check, len(*doc.Checks))
	for i, c := range *doc.Checks {
		out[i] = check{Type: string(c.Attrs.Type), Host: string(c.Host), Service: string(c.Service),
			State: string(c.State), Output: string(c.Output), TimeField: string(c.Time)}
	}
	return out, nil
}

// isService says whether a check is a service's: type="service" (in any
// case); as NRDP, a missing or other type is a host's, servicename or not.
func (c *check) isService() bool { return strings.EqualFold(strings.TrimSpace(c.Type), "service") }

// state is the check's return code, or why it has none: an integer 0..3,
// blanks around it allowed (the plugin API's codes; Nagios reads anything
// else as UNKNOWN, NRDP passes it through unchecked).
func (c *check) state() (int16, error) {
	s := strings.TrimSpace(c.State)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 3 {
		return 0, fmt.Errorf("state %q is not 0, 1, 2 or 3", c.State)
	}
	return int16(n), nil
}

// time is the check's own time (unix seconds), 0 when it has none: no
// time element, an empty one or 0, as NRDP reads it.
func (c *check) time() (int64, error) {
	s := strings.TrimSpace(c.TimeField)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<32-1 {
		return 0, fmt.Errorf("time %q is not a unix time in seconds", c.TimeField)
	}
	return n, nil
}
