package conf

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/cipher"
)

// ErrSecrets wraps what keeps the secrets from being read: password_file
// or identities_file cannot be read or holds a bad entry.
var ErrSecrets = errors.New("conf: secrets")

// methodsKind is decryption_method: one method, or several separated by
// commas, each a number or a name. The first is DecryptionMethod, the one
// reports name; the others are MoreMethods.
type methodsKind struct{}

func (methodsKind) Set(c *Config, s string) error {
	s = strings.Trim(strings.TrimSuffix(s, "\r"), " \t")
	entries := strings.Split(s, ",")
	var ms []int
	for _, e := range entries {
		e = strings.Trim(e, " \t")
		if e == "" && len(entries) > 1 {
			return errors.New("has an empty entry; write methods separated by commas, e.g. 1,14")
		}
		n, err := parseMethod(e)
		if err == nil {
			err = validMethod(n)
		}
		switch {
		case err != nil && len(entries) > 1:
			return fmt.Errorf("has a bad entry %s: %v", show(e), err)
		case err != nil:
			return err
		case slices.Contains(ms, n):
			return fmt.Errorf("lists %s twice", show(e))
		}
		ms = append(ms, n)
	}
	c.DecryptionMethod, c.MoreMethods = ms[0], nil
	if len(ms) > 1 {
		c.MoreMethods = ms[1:]
	}
	return nil
}

func (methodsKind) Check(c *Config) error {
	for _, m := range c.Methods() {
		if err := validMethod(m.Number); err != nil {
			return err
		}
	}
	return nil
}

func (methodsKind) Text(c *Config) string {
	parts := []string{}
	for _, m := range c.Methods() {
		parts = append(parts, formatMethod(m.Number))
	}
	return strings.Join(parts, ",")
}

func (methodsKind) Numeric() bool { return true }

// Methods returns every method decryption_method lists, the first being
// Method.
func (c *Config) Methods() []Method {
	out := []Method{c.Method()}
	for _, n := range c.MoreMethods {
		m, ok := MethodByNumber(n)
		if !ok {
			m = Method{Number: n, Name: "invalid", Why: "not a decryption method"}
		}
		out = append(out, m)
	}
	return out
}

// Secret is one password with one method that clients may encrypt with:
// the server's own (password, password_file, for each decryption_method)
// or an identity's.
type Secret struct {
	// Name names the secret in metrics and logs, never showing the
	// password: "password/1", "password_file:3/14" (line 3, method 14).
	Name     string
	Password []byte
	Method   Method
	// Choice is what decrypts, chosen once per method and password.
	Choice cipher.Choice
	// Networks are where clients may connect from with it; nil: anywhere.
	Networks []netip.Prefix
	// Rights is the identity whose rights its results need: the
	// identity's own, or for the server's secrets the "*" block; nil:
	// every result is allowed.
	Rights *identities.Identity
}

// prepared is a Config's secrets, read and chosen at the first call of
// Secrets.
type prepared struct {
	once       sync.Once
	secrets    []Secret
	identities *identities.File // identities_file as read, nil without it
	err        error
}

// Secrets returns every secret clients may use, in the order they are
// tried among those that serve one network: the identities of
// identities_file in file order, then for each method of
// decryption_method password (unless password_file is set and no password
// line is) and each password of password_file. With identities_file the
// server's own secrets are only included when password or password_file
// is set. Files are read and engines chosen (cipher.Choose, a self-test
// each) at the first call; the result is kept with this Config, so a
// reload reads them again.
func (c *Config) Secrets() ([]Secret, error) {
	p := &c.cipher.secrets
	p.once.Do(func() { p.secrets, p.err = c.readSecrets() })
	return p.secrets, p.err
}

// Identities returns identities_file as Secrets read it (nil without the
// option), for what looks identities up by name, as the nsca-ng listener
// looks up a PSK identity: one read serves both.
func (c *Config) Identities() (*identities.File, error) {
	_, err := c.Secrets()
	return c.cipher.secrets.identities, err
}

// passwordSource is one password and where it came from.
type passwordSource struct {
	name     string
	password []byte
}

func (c *Config) readSecrets() ([]Secret, error) {
	choices := choiceCache{engine: c.DecryptionEngine}
	if ch, err := c.Cipher(); err == nil {
		// The start-up check has made this choice already.
		choices.keep(c.Method(), []byte(c.Password), ch)
	}
	out, fallback, err := c.identitySecrets(&choices)
	if err != nil {
		return nil, err
	}
	if c.IdentitiesFile != "" && c.PasswordFile == "" && c.Lines["password"] == 0 {
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: %s: identities_file=%s has no identity with a password, and neither password nor password_file is set: no client could connect",
				ErrSecrets, c.where("identities_file"), show(c.IdentitiesFile))
		}
		return out, nil
	}
	var pws []passwordSource
	if c.PasswordFile == "" || c.Lines["password"] > 0 {
		pws = append(pws, passwordSource{"password", []byte(c.Password)})
	}
	file, err := c.readPasswordFile()
	if err != nil {
		return nil, err
	}
	pws = append(pws, file...)
	for _, m := range c.Methods() {
		for _, pw := range pws {
			ch, err := choices.choose(m, pw.password)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %s with decryption_method=%s: %w", ErrSecrets, c.where("decryption_method"), pw.name, NameOf(m), err)
			}
			out = append(out, Secret{Name: pw.name + "/" + NameOf(m), Password: pw.password, Method: m, Choice: ch, Rights: fallback})
		}
	}
	return out, nil
}

// identitySecrets reads identities_file: a secret for each identity with
// a password, with its method or each of the server's, and the "*" block,
// whose rights the server's own secrets get.
func (c *Config) identitySecrets(choices *choiceCache) (out []Secret, fallback *identities.Identity, err error) {
	if c.IdentitiesFile == "" {
		return nil, nil, nil
	}
	f, err := identities.Load(c.IdentitiesFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: identities_file=%s: %w", ErrSecrets, c.where("identities_file"), show(c.IdentitiesFile), err)
	}
	c.cipher.secrets.identities = f
	for _, ig := range f.Ignored {
		// An nsca-ng.cfg serves as it is: its own settings are nsca-ng's.
		c.warnf(c.Lines["identities_file"], "identities_file: %s is not an identities setting (nsca-ng's own?): ignored", ig)
	}
	for _, id := range f.Identities {
		if id.Name == identities.Fallback {
			fallback = id
		}
		if !id.HasPassword {
			continue
		}
		methods := c.Methods()
		if id.Method != "" {
			n, err := parseMethod(id.Method)
			if err == nil {
				err = validMethod(n)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: authorize %q: decryption_method=%s %v", ErrSecrets, id.Where, id.Name, show(id.Method), err)
			}
			m, _ := MethodByNumber(n)
			methods = []Method{m}
		}
		for _, m := range methods {
			ch, err := choices.choose(m, []byte(id.Password))
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: authorize %q with decryption_method=%s: %w", ErrSecrets, id.Where, id.Name, NameOf(m), err)
			}
			name := id.Name
			if len(methods) > 1 {
				name += "/" + NameOf(m)
			}
			out = append(out, Secret{Name: name, Password: []byte(id.Password), Method: m, Choice: ch, Networks: id.Networks, Rights: id})
		}
	}
	return out, fallback, nil
}

// readPasswordFile reads password_file: one password per line, verbatim
// but for a trailing carriage return; empty lines and lines starting with
// '#' are skipped, as in nsca.cfg.
func (c *Config) readPasswordFile() ([]passwordSource, error) {
	if c.PasswordFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: password_file=%s: %w", ErrSecrets, c.where("password_file"), show(c.PasswordFile), err)
	}
	var out []passwordSource
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		where := c.PasswordFile + ":" + strconv.Itoa(i+1)
		if len(line) > MaxPasswordLen {
			return nil, fmt.Errorf("%w: %s: the password is too long: %d bytes, at most %d", ErrSecrets, where, len(line), MaxPasswordLen)
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return nil, fmt.Errorf("%w: %s: the password contains a NUL byte", ErrSecrets, where)
		}
		out = append(out, passwordSource{"password_file:" + strconv.Itoa(i+1), line})
	}
	if len(out) == 0 && c.Lines["password"] == 0 {
		return nil, fmt.Errorf("%w: %s: password_file=%s holds no password and no password line is set", ErrSecrets, c.where("password_file"), show(c.PasswordFile))
	}
	return out, nil
}

// choiceCache chooses once per method and password, since each choice
// costs a key schedule and a self-test.
type choiceCache struct {
	engine string
	seen   map[string]cipher.Choice
}

func (cc *choiceCache) choose(m Method, password []byte) (cipher.Choice, error) {
	if ch, ok := cc.seen[choiceKey(m, password)]; ok {
		return ch, nil
	}
	ch, err := cipher.Choose(m.Number, m.Name, password, cc.engine)
	if err != nil {
		return ch, err
	}
	cc.keep(m, password, ch)
	return ch, nil
}

func (cc *choiceCache) keep(m Method, password []byte, ch cipher.Choice) {
	if cc.seen == nil {
		cc.seen = map[string]cipher.Choice{}
	}
	cc.seen[choiceKey(m, password)] = ch
}

func choiceKey(m Method, password []byte) string {
	return strconv.Itoa(m.Number) + "\x00" + string(password)
}
