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

	rights []*regexp.Regexp // every pattern, as a whole-command expression
}

// Allows says whether the identity may submit the external command cmd,
// written without its bracketed timestamp and without a trailing newline
// (PROCESS_SERVICE_CHECK_RESULT;host;service;0;output), as nsca-ng
// decides: any of its hosts, services or commands patterns matches it.
func (id *Identity) Allows(cmd string) bool {
	for _, re := range id.rights {
		if re.MatchString(cmd) {
			return true
		}
	}
	return false
}

// AllowsResult says whether the identity may submit a check result: a
// service's when service is not empty, else a host's, with output written
// as the command file holds it.
func (id *Identity) AllowsResult(host, service string, code int16, output string) bool {
	return id.Allows(ResultCommand(host, service, code, output))
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

// compileRights turns hosts, services and commands into whole-command
// expressions, as nsca-ng does: a host pattern H matches
// PROCESS_HOST_CHECK_RESULT;H;code;output, a service pattern S or S@H
// matches PROCESS_SERVICE_CHECK_RESULT;H;S;code;output (any host without
// @H; the last @ splits), and a command pattern matches the command.
func (id *Identity) compileRights() error {
	compile := func(key, pattern, expr string) error {
		re, err := regexp.CompilePOSIX("^" + expr + "$")
		if err != nil {
			return badValue(id.Where, key, pattern, err)
		}
		id.rights = append(id.rights, re)
		return nil
	}
	for _, h := range id.Hosts {
		if err := checkPattern(h); err != nil {
			return badValue(id.Where, "hosts", h, err)
		}
		if err := compile("hosts", h, "PROCESS_HOST_CHECK_RESULT;("+h+");.+;.+"); err != nil {
			return err
		}
	}
	for _, s := range id.Services {
		svc, host := s, "[^;]+"
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			svc, host = s[:at], s[at+1:]
		}
		for _, p := range []string{svc, host} {
			if err := checkPattern(p); err != nil {
				return badValue(id.Where, "services", s, err)
			}
		}
		if err := compile("services", s, "PROCESS_SERVICE_CHECK_RESULT;("+host+");("+svc+");.+;.+"); err != nil {
			return err
		}
	}
	for _, c := range id.Commands {
		if err := checkPattern(c); err != nil {
			return badValue(id.Where, "commands", c, err)
		}
		if err := compile("commands", c, "("+c+")"); err != nil {
			return err
		}
	}
	return nil
}

// checkPattern refuses what would change the meaning of the expression it
// is put into: a pattern must compile on its own, so that "a)|(b" cannot
// break out of its group.
func checkPattern(p string) error {
	_, err := regexp.CompilePOSIX(p)
	return err
}
