// Package identities reads client identities in nsca-ng's authorize
// syntax (libConfuse's format, as nsca-ng.cfg is written):
//
//	authorize "web01" {
//		password = "s3cret"
//		hosts = "web01"
//		services = { "disk.*", "load@web0[12]" }
//		commands = "ENABLE_SVC_NOTIFICATIONS;web01;.*"
//		networks = { "10.1.0.0/16" }   # ours: where it may connect from
//		decryption_method = 14         # ours: its NSCA method
//	}
//	authorize "*" { ... }              # for every client without a block
//	include("/etc/nsca.d")             # a file, or a directory's *.cfg and *.conf
//
// It knows nothing of sockets or ciphers: the daemon turns each Identity
// into a secret to try and a set of rights to check results against, and
// the nsca-ng listener looks identities up by name.
//
// Patterns are POSIX extended regular expressions anchored at both ends,
// as nsca-ng's are, compiled with Go's regexp in POSIX mode
// (regexp.CompilePOSIX: Perl's \d, \w, (?:...), non-greedy operators and
// flags are refused). It differs from the C library's regcomp in that
// back-references (\1, which glibc accepts in EREs), equivalence classes
// ([=a=]) and collating elements ([.x.]) are refused, a backslash inside a
// bracket expression escapes (POSIX takes it literally, so write [\\] for
// a backslash and [.] for a dot), and the whole pattern is anchored even
// when it is an alternation: nsca-ng writes ^a|b$, which anchors only a
// at the start and b at the end, where we match ^(a|b)$.
package identities

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Errors, each wrapped with file, line and reason.
var (
	ErrSyntax   = errors.New("identities: syntax error")
	ErrBadValue = errors.New("identities: bad value")
	ErrInclude  = errors.New("identities: cannot include")
)

// Fallback is the name of the block that serves every client without a
// block of its own.
const Fallback = "*"

// File is an identities file with what it includes.
type File struct {
	// Identities are the authorize blocks, in file order; the fallback
	// "*", if any, among them.
	Identities []*Identity
	// Ignored are the settings outside authorize blocks (nsca-ng.cfg's
	// command_file, listen, ...), each as "file:line: key", for the
	// caller to mention once: they are nsca-ng's, not ours.
	Ignored []string
}

// Lookup returns the identity named name, or the fallback "*" when there
// is no block for name, or nil.
func (f *File) Lookup(name string) *Identity {
	var fallback *Identity
	for _, id := range f.Identities {
		switch id.Name {
		case name:
			return id
		case Fallback:
			fallback = id
		}
	}
	return fallback
}

// Identity is one authorize block.
type Identity struct {
	Name string
	// Password is the block's password; HasPassword says whether it has
	// one (only the fallback, which then only lends its rights, and a
	// block with Tokens may lack it).
	Password    string
	HasPassword bool
	// Tokens are the NRDP tokens that name it (see tokens.go).
	Tokens []string
	// Hosts, Services and Commands are the patterns as written.
	Hosts, Services, Commands []string
	// Networks are where its clients may connect from; nil: anywhere.
	Networks []netip.Prefix
	// Method is its decryption_method as written (a number or a name);
	// "": the server's.
	Method string
	// Where is the file and line of the block, for messages.
	Where string

	// The patterns, compiled: hosts and services match one name each,
	// commands a whole command.
	hostRights    []*regexp.Regexp
	serviceRights []serviceRight
	commandRights []*regexp.Regexp
}

// AllowsResult says whether the identity may submit a check result: a
// service's when service is not empty, else a host's. Its hosts patterns
// are matched against the host name alone, its services patterns against
// the service name (and, for service@host, the host name), each anchored
// at both ends; its commands patterns against the whole command, with
// output written as the command file holds it, as nsca-ng matches them.
// The names must be ones a core can hold (no ';', no control character:
// validation refuses the others first), so that no field can stand in for
// another under a commands pattern.
func (id *Identity) AllowsResult(host, service string, code int16, output string) bool {
	if UnsafeByte(host) >= 0 || UnsafeByte(service) >= 0 {
		return false
	}
	if service == "" {
		for _, re := range id.hostRights {
			if re.MatchString(host) {
				return true
			}
		}
	} else {
		for _, r := range id.serviceRights {
			if r.service.MatchString(service) && (r.host == nil || r.host.MatchString(host)) {
				return true
			}
		}
	}
	return len(id.commandRights) > 0 && id.AllowsCommand(ResultCommand(host, service, code, output))
}

// UnsafeByte is the index of the first byte in name that no core can
// hold inside a name, or -1: the field separator ';' or a control
// character (NUL ends a C string, a newline ends the command, and the
// rest are never part of a host or service name). Authorization and the
// validate stage's name rule both ask it.
func UnsafeByte(name string) int {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == ';' || isControl(c) {
			return i
		}
	}
	return -1
}

// ControlByte is the index of the first control character in cmd, or
// -1: what no external command may hold, whose fields are ';'-separated.
func ControlByte(cmd string) int {
	for i := 0; i < len(cmd); i++ {
		if isControl(cmd[i]) {
			return i
		}
	}
	return -1
}

func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// AllowsCommand says whether the identity may submit the external command
// cmd, written without its bracketed timestamp and without a trailing
// newline (ENABLE_SVC_NOTIFICATIONS;web01;disk): one of its commands
// patterns matches it whole.
func (id *Identity) AllowsCommand(cmd string) bool {
	for _, re := range id.commandRights {
		if re.MatchString(cmd) {
			return true
		}
	}
	return false
}

// ResultCommand is the external command of a check result, without its
// timestamp.
func ResultCommand(host, service string, code int16, output string) string {
	var b strings.Builder
	if service == "" {
		b.WriteString("PROCESS_HOST_CHECK_RESULT;")
		b.WriteString(host)
	} else {
		b.WriteString("PROCESS_SERVICE_CHECK_RESULT;")
		b.WriteString(host)
		b.WriteByte(';')
		b.WriteString(service)
	}
	b.WriteByte(';')
	b.WriteString(strconv.Itoa(int(code)))
	b.WriteByte(';')
	b.WriteString(output)
	return b.String()
}

// Specificity is the length of the longest of id's networks that holds
// addr, 0 for an identity that may connect from anywhere, and -1 when
// none holds it.
func (id *Identity) Specificity(addr netip.Addr) int { return Specificity(id.Networks, addr) }

// Specificity is the length of the longest of networks that holds addr, 0
// when networks is nil (anywhere), and -1 when none holds it: the order in
// which the secrets that may serve a client are tried.
func Specificity(networks []netip.Prefix, addr netip.Addr) int {
	if networks == nil {
		return 0
	}
	addr = addr.Unmap()
	best := -1
	for _, n := range networks {
		if n.Contains(addr) && n.Bits() > best {
			best = n.Bits()
		}
	}
	return best
}

// compileRights compiles the patterns, each anchored at both ends: a
// host pattern H for host names, a service pattern S or S@H for service
// names and, after the last @, host names (any host without @H), and a
// command pattern for whole commands. A pattern matches one field, never
// the command text it is written into, so a separator inside a name
// cannot move the fields under it (nsca-ng matches every pattern over
// the whole command, where "a;2;x.dmz" satisfies hosts = ".*\.dmz").
func (id *Identity) compileRights() error {
	compile := func(key, whole, pattern string) (*regexp.Regexp, error) {
		if err := checkPattern(pattern); err != nil {
			return nil, badValue(id.Where, key, whole, err)
		}
		re, err := regexp.CompilePOSIX("^(" + pattern + ")$")
		if err != nil {
			return nil, badValue(id.Where, key, whole, err)
		}
		return re, nil
	}
	for _, h := range id.Hosts {
		re, err := compile("hosts", h, h)
		if err != nil {
			return err
		}
		id.hostRights = append(id.hostRights, re)
	}
	for _, s := range id.Services {
		var r serviceRight
		svc, host, scoped := s, "", false
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			svc, host, scoped = s[:at], s[at+1:], true
		}
		var err error
		if r.service, err = compile("services", s, svc); err != nil {
			return err
		}
		if scoped {
			if r.host, err = compile("services", s, host); err != nil {
				return err
			}
		}
		id.serviceRights = append(id.serviceRights, r)
	}
	for _, c := range id.Commands {
		re, err := compile("commands", c, c)
		if err != nil {
			return err
		}
		id.commandRights = append(id.commandRights, re)
	}
	return nil
}

// serviceRight is one services pattern: the service's, and the host's
// after an @ (nil: any host).
type serviceRight struct{ service, host *regexp.Regexp }

// checkPattern refuses what would change the meaning of the expression it
// is put into: a pattern must compile on its own, so that "a)|(b" cannot
// break out of its group.
func checkPattern(p string) error {
	_, err := regexp.CompilePOSIX(p)
	return err
}
