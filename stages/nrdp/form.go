package nrdp

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
)

// errTooLarge is a request body over nrdp_max_request_size.
var errTooLarge = errors.New("nrdp: request body too large")

// form is a request's fields as NRDP reads them: GET's and POST's merged,
// POST winning, and of a field given twice the later value, as PHP's
// $_GET, $_POST and their merge in NRDP's grab_request_vars.
type form map[string]string

// get is field name's value, "" when absent.
func (f form) get(name string) string { return f[name] }

// last returns the later of aliases present with a non-empty value, as
// NRDP's grab_xml and grab_json read their aliases.
func (f form) last(aliases ...string) string {
	v := ""
	for _, a := range aliases {
		if s, ok := f[a]; ok {
			// NRDP's grab_request_var takes a present field even empty.
			v = s
		}
	}
	return v
}

// readForm reads r's fields: the URL's query, then an url-encoded or
// multipart body of at most limit bytes. File parts of a multipart body
// are skipped, as PHP puts them in $_FILES, which NRDP never reads.
func readForm(w http.ResponseWriter, r *http.Request, limit int64) (form, error) {
	f := form{}
	parseQuery(r.URL.RawQuery, f)
	body := http.MaxBytesReader(w, r.Body, limit)
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var err error
	switch {
	case r.Method != http.MethodPost:
	case ct == "application/x-www-form-urlencoded":
		err = readURLEncoded(body, f)
	case ct == "multipart/form-data":
		err = readMultipart(body, params["boundary"], f)
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errTooLarge
	}
	return f, err
}

func readURLEncoded(body io.Reader, f form) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	parseQuery(string(b), f)
	return nil
}

// parseQuery adds the fields of an url-encoded text to f as PHP reads
// them, which is leniently: fields split at & only (send_nrdp.sh posts
// its XML unencoded when it has no file, semicolons and all), + is a
// blank, and a % not followed by two hex digits is itself.
func parseQuery(q string, f form) {
	for _, pair := range strings.Split(q, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if k = phpUnescape(k); k != "" {
			f[k] = phpUnescape(v)
		}
	}
}

// phpUnescape is PHP's urldecode.
func phpUnescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func readMultipart(body io.Reader, boundary string, f form) error {
	if boundary == "" {
		return errors.New("multipart body without a boundary")
	}
	mr := multipart.NewReader(body, boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := p.FormName()
		if p.FileName() != "" || name == "" {
			if _, err := io.Copy(io.Discard, p); err != nil {
				return err
			}
			continue
		}
		var v strings.Builder
		if _, err := io.Copy(&v, p); err != nil {
			return err
		}
		f[name] = v.String()
	}
}
