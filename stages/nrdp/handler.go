package nrdp

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/intake"
)

// paths are where NRDP's clients find it: the root, its Apache alias
// /nrdp/ (send_nrdp and NCPA post to the URL given, usually that), and
// the server folder NSClient++ defaults to, with or without index.php.
var paths = map[string]bool{
	"/": true, "/index.php": true,
	"/nrdp": true, "/nrdp/": true, "/nrdp/index.php": true,
	"/nrdp/server": true, "/nrdp/server/": true, "/nrdp/server/index.php": true,
}

// request is one NRDP request on its way: its fields and whom it came from.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	f    form
	peer netip.AddrPort
	// as is the answer's form: XML, or JSON (output_type, or JSON data
	// and no XML), indented with pretty.
	as answerForm
}

// ServeHTTP serves one NRDP request: its fields, its command, its token,
// then the command's handler, and one answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		w.Header().Set("Retry-After", "5")
		fail(http.StatusServiceUnavailable, msgBusy, "the server is shutting down").write(w, answerXML)
		return
	}
	defer s.inFlight.Done()
	if !paths[r.URL.Path] {
		s.failed(r, fmt.Sprintf("nrdp: a request for %q, not an NRDP path (/, /nrdp/, /nrdp/server/): point the client's URL there", r.URL.Path))
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, POST, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	req := &request{w: w, r: r}
	req.peer, _ = netip.ParseAddrPort(r.RemoteAddr)
	req.peer = netip.AddrPortFrom(req.peer.Addr().Unmap(), req.peer.Port())
	f, err := readForm(w, r, int64(s.cfg.MaxRequestSize))
	req.f, req.as = f, answerFormOf(f)
	switch {
	case errors.Is(err, errTooLarge):
		fail(http.StatusRequestEntityTooLarge, msgTooLarge, "the body is over nrdp_max_request_size").write(w, req.as)
		return
	case err != nil:
		fail(http.StatusBadRequest, msgBadRequest, err.Error()).write(w, req.as)
		return
	}
	resp := s.route(req)
	if resp.status != 0 && resp.message != msgBusy {
		why := "nrdp: " + resp.message
		if resp.info != "" {
			why += ": " + resp.info
		}
		s.failed(r, why)
	}
	resp.write(w, req.as)
}

// failed records in /clients a request that failed for why.
func (s *Server) failed(r *http.Request, why string) {
	if s.cfg.Clients == nil {
		return
	}
	if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		s.cfg.Clients.Failed(peer.Addr().Unmap(), why)
	}
}

// answerFormOf is how to answer: in JSON when output_type says so (NRDP's
// TYPE_JSON, or json) or, without output_type, JSON data came and no XML;
// indented when pretty is set, as PHP's JSON_PRETTY_PRINT indents.
func answerFormOf(f form) answerForm {
	asJSON := xmlData(f) == "" && jsonData(f) != ""
	if t := strings.ToLower(f.get("output_type")); t != "" {
		asJSON = t == "json" || t == "type_json"
	}
	switch p := f.get("pretty"); {
	case !asJSON:
		return answerXML
	case p != "" && p != "0":
		return answerPrettyJSON
	}
	return answerJSON
}

// xmlData and jsonData are the submitcheck data in NRDP's aliases, the
// later alias winning.
func xmlData(f form) string  { return f.last("XMLDATA", "xmldata", "xml") }
func jsonData(f form) string { return f.last("JSONDATA", "jsondata", "json") }

// route runs the request's command, after its token unless it is hello.
func (s *Server) route(req *request) *response {
	cmd := strings.ToLower(req.f.get("cmd"))
	switch cmd {
	case "":
		return &response{code: http.StatusOK, status: 0, message: "nsca_fast serves NRDP here: POST cmd=submitcheck, token and XMLDATA"}
	case "hello":
		return &response{code: http.StatusOK, hello: true, status: 0, message: msgOK}
	}
	src, bad := s.authenticate(req)
	if bad != nil {
		return bad
	}
	switch cmd {
	case "submitcheck":
		return s.submitChecks(req, src)
	case "submitcmd", "submitrawcmd":
		return s.submitCommand(req, src)
	}
	return fail(http.StatusBadRequest, msgNoHandler, "cmd is hello, submitcheck, submitcmd or submitrawcmd")
}

// authenticate finds whom the request's token names, from where it may
// be used, and makes the request's source; or answers NO TOKEN or BAD
// TOKEN, as NRDP does, with 200 so that its clients show the message.
func (s *Server) authenticate(req *request) (*intake.Source, *response) {
	token := req.f.get("token")
	if token == "" {
		return nil, fail(http.StatusOK, msgNoToken, "")
	}
	var id *identities.Identity
	if s.cfg.Identities != nil {
		id = s.cfg.Identities.ByToken(token)
	}
	who := "nrdp_tokens"
	switch {
	case id != nil:
		who = id.Name
		if id.Specificity(req.peer.Addr()) < 0 {
			s.warnf(req.peer.Addr().String(), "nrdp: %s: refused the token of identity %q: %s is outside its networks",
				req.peer, id.Name, req.peer.Addr())
			return nil, fail(http.StatusOK, msgBadToken, "")
		}
	case s.anyTokens.ByToken(token) == nil:
		s.warnf(req.peer.Addr().String(), "nrdp: %s: refused an unknown token", req.peer)
		return nil, fail(http.StatusOK, msgBadToken, "")
	}
	return &intake.Source{
		ID:        s.nextID.Add(1),
		Answers:   true,
		LogPrefix: "nrdp: ",
		Front:     Front,
		Peer:      req.peer,
		Identity:  id,
		Who:       who + "@" + req.peer.String() + " (nrdp)",
	}, nil
}
