package identities

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// maxIncludeDepth bounds nested includes, which also ends an include loop.
const maxIncludeDepth = 16

// Opener reads a file for Parse: os.ReadFile for Load, a map in tests.
// It also lists a directory's entries, for include of a directory; a
// path that is no directory gives ok false.
type Opener interface {
	ReadFile(path string) ([]byte, error)
	ReadDir(path string) (names []string, ok bool, err error)
}

// Load reads the identities file at path and what it includes.
func Load(path string) (*File, error) { return Parse(path, nil, osOpener{}) }

// osOpener is the file system.
type osOpener struct{}

func (osOpener) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (osOpener) ReadDir(path string) ([]string, bool, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return nil, false, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, true, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, true, nil
}

// Parse reads the identities file named path, whose text is data (nil:
// read it with open), and the files it includes with open. Relative
// include paths are taken from the including file's directory. A
// directory includes its files ending in .cfg or .conf, in name order,
// hidden ones skipped.
func Parse(path string, data []byte, open Opener) (*File, error) {
	p := &parser{open: open, f: &File{}, names: map[string]string{}}
	if err := p.file(path, data, 0); err != nil {
		return nil, err
	}
	for _, id := range p.f.Identities {
		if !id.HasPassword && id.Tokens == nil && id.Name != Fallback {
			return nil, fmt.Errorf("%w: %s: authorize %q has no password and no token", ErrBadValue, id.Where, id.Name)
		}
		if err := id.compileRights(); err != nil {
			return nil, err
		}
	}
	if err := checkTokens(p.f); err != nil {
		return nil, err
	}
	return p.f, nil
}

type parser struct {
	open  Opener
	f     *File
	names map[string]string // identity name → where it was defined
	name  string
	lx    *lexer
	tok   token // the current token
}

func (p *parser) where(line int) string { return p.name + ":" + strconv.Itoa(line) }

func (p *parser) advance() {
	p.tok = p.lx.next()
}

// expect consumes the punctuation s or fails.
func (p *parser) expect(s string) error {
	if p.tok.kind != tokPunct || p.tok.text != s {
		return p.syntax("expected %q, found %s", s, p.tok)
	}
	p.advance()
	return nil
}

func (p *parser) syntax(format string, args ...any) error {
	if p.lx.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSyntax, p.name, p.lx.err)
	}
	return fmt.Errorf("%w: %s: %s", ErrSyntax, p.where(p.tok.line), fmt.Sprintf(format, args...))
}

func (p *parser) file(path string, data []byte, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("%w: %s: includes nested more than %d deep (an include loop?)", ErrInclude, path, maxIncludeDepth)
	}
	if data == nil {
		var err error
		if data, err = p.open.ReadFile(path); err != nil {
			return fmt.Errorf("%w: %w", ErrInclude, err)
		}
	}
	saved, savedLx, savedTok := p.name, p.lx, p.tok
	defer func() { p.name, p.lx, p.tok = saved, savedLx, savedTok }()
	p.name, p.lx = path, newLexer(string(data))
	p.advance()
	for p.tok.kind != tokEOF {
		if err := p.statement(depth); err != nil {
			return err
		}
	}
	if p.lx.err != nil {
		return p.syntax("")
	}
	return nil
}

// statement is one top-level item: include(...), authorize "id" {...}, or
// another nsca-ng setting, which is skipped and noted.
func (p *parser) statement(depth int) error {
	t := p.tok
	switch {
	case t.kind == tokPunct && t.text == ";":
		p.advance()
		return nil
	case t.kind != tokWord:
		return p.syntax("expected a setting, authorize or include, found %s", t)
	case t.text == "include":
		return p.include(depth)
	case t.text == "authorize":
		return p.authorize()
	}
	p.advance()
	if err := p.assignOp(); err != nil {
		return err
	}
	if _, err := p.values(t.text); err != nil {
		return err
	}
	p.f.Ignored = append(p.f.Ignored, p.where(t.line)+": "+t.text)
	return nil
}

func (p *parser) assignOp() error {
	if p.tok.kind == tokPunct && (p.tok.text == "=" || p.tok.text == "+=") {
		p.advance()
		return nil
	}
	return p.syntax("expected = after the key, found %s", p.tok)
}

func (p *parser) include(depth int) error {
	line := p.tok.line
	p.advance()
	if err := p.expect("("); err != nil {
		return err
	}
	if p.tok.kind != tokString && p.tok.kind != tokWord {
		return p.syntax("include needs a file name, found %s", p.tok)
	}
	target := p.tok.text
	p.advance()
	if err := p.expect(")"); err != nil {
		return err
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p.name), target)
	}
	names, isDir, err := p.open.ReadDir(target)
	if err != nil {
		return fmt.Errorf("%w: %s: include(%q): %w", ErrInclude, p.where(line), target, err)
	}
	if !isDir {
		if err := p.file(target, nil, depth+1); err != nil {
			return fmt.Errorf("%s: included from %s: %w", target, p.where(line), err)
		}
		return nil
	}
	slices.Sort(names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".cfg") || strings.HasSuffix(n, ".conf")) {
			continue
		}
		if err := p.file(filepath.Join(target, n), nil, depth+1); err != nil {
			return fmt.Errorf("included from %s: %w", p.where(line), err)
		}
	}
	return nil
}

// authorize reads one block.
func (p *parser) authorize() error {
	line := p.tok.line
	p.advance()
	if p.tok.kind != tokString && p.tok.kind != tokWord {
		return p.syntax("authorize needs an identity name, found %s", p.tok)
	}
	id := &Identity{Name: p.tok.text, Where: p.where(line)}
	if id.Name == "" {
		return p.syntax("authorize has an empty identity name")
	}
	if prev, dup := p.names[id.Name]; dup {
		return fmt.Errorf("%w: %s: authorize %q again (first at %s)", ErrBadValue, id.Where, id.Name, prev)
	}
	p.names[id.Name] = id.Where
	p.advance()
	if err := p.expect("{"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for !(p.tok.kind == tokPunct && p.tok.text == "}") {
		if p.tok.kind == tokPunct && (p.tok.text == ";" || p.tok.text == ",") {
			p.advance()
			continue
		}
		if p.tok.kind != tokWord {
			return p.syntax("expected a key of authorize %q or }, found %s", id.Name, p.tok)
		}
		key, kline := p.tok.text, p.tok.line
		p.advance()
		appending := p.tok.kind == tokPunct && p.tok.text == "+="
		if err := p.assignOp(); err != nil {
			return err
		}
		vals, err := p.values(key)
		if err != nil {
			return err
		}
		if err := p.set(id, key, vals, appending || !seen[key], kline); err != nil {
			return err
		}
		seen[key] = true
	}
	p.advance()
	p.f.Identities = append(p.f.Identities, id)
	return nil
}

// values reads one value or a { list }.
func (p *parser) values(key string) ([]string, error) {
	if p.tok.kind == tokString || p.tok.kind == tokWord {
		v := p.tok.text
		p.advance()
		return []string{v}, nil
	}
	if p.tok.kind != tokPunct || p.tok.text != "{" {
		return nil, p.syntax("expected a value for %s, found %s", key, p.tok)
	}
	p.advance()
	var out []string
	for {
		switch {
		case p.tok.kind == tokPunct && p.tok.text == "}":
			p.advance()
			return out, nil
		case p.tok.kind == tokString || p.tok.kind == tokWord:
			out = append(out, p.tok.text)
			p.advance()
			if p.tok.kind == tokPunct && p.tok.text == "," {
				p.advance()
			} else if !(p.tok.kind == tokPunct && p.tok.text == "}") {
				return nil, p.syntax("expected , or } in the list of %s, found %s", key, p.tok)
			}
		default:
			return nil, p.syntax("expected a value or } in the list of %s, found %s", key, p.tok)
		}
	}
}

// set stores key's values in id; add says whether they add to what the
// block set before (+=, or the first time) or replace it.
func (p *parser) set(id *Identity, key string, vals []string, add bool, line int) error {
	where := p.where(line)
	one := func() (string, error) {
		if len(vals) != 1 {
			return "", fmt.Errorf("%w: %s: %s takes one value, not a list", ErrBadValue, where, key)
		}
		return vals[0], nil
	}
	list := func(dst *[]string) {
		if !add {
			*dst = nil
		}
		*dst = append(*dst, vals...)
	}
	switch key {
	case "password":
		v, err := one()
		if err != nil {
			return err
		}
		id.Password, id.HasPassword = v, true
	case "hosts":
		list(&id.Hosts)
	case "services":
		list(&id.Services)
	case "commands":
		list(&id.Commands)
	case "token":
		list(&id.Tokens)
	case "decryption_method":
		v, err := one()
		if err != nil {
			return err
		}
		id.Method = v
	case "networks":
		if !add {
			id.Networks = nil
		}
		for _, v := range vals {
			n, err := parseNetwork(v)
			if err != nil {
				return fmt.Errorf("%w: %s: networks: %q: %v", ErrBadValue, where, v, err)
			}
			id.Networks = append(id.Networks, n)
		}
		if id.Networks == nil {
			id.Networks = []netip.Prefix{} // an empty list: from nowhere
		}
	default:
		return fmt.Errorf("%w: %s: authorize %q: unknown key %s (known: password, token, hosts, services, commands, networks, decryption_method)", ErrBadValue, where, id.Name, key)
	}
	return nil
}

// parseNetwork reads an address or CIDR; a CIDR naming a host inside the
// network means the network.
func parseNetwork(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		if a := p.Addr(); a.Is4In6() {
			if p.Bits() < 96 {
				return p, fmt.Errorf("an IPv4-mapped prefix shorter than /96")
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zoned addresses are not supported")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func badValue(where, key, pattern string, err error) error {
	return fmt.Errorf("%w: %s: %s pattern %q: %v", ErrBadValue, where, key, pattern, err)
}
