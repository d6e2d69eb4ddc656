package nrdp

import (
	"errors"
	"strings"
	"testing"

	"nsca_fast/conf/option"
)

func TestRows(t *testing.T) {
	var o Options
	rows := Rows()
	byName := map[string]option.Row[Options]{}
	for _, r := range rows {
		if r.Doc == "" {
			t.Errorf("%s has no Doc", r.Name)
		}
		if err := r.Kind.Set(&o, r.Default); err != nil && r.Default != "" {
			t.Errorf("%s default %q: %v", r.Name, r.Default, err)
		}
		byName[r.Name] = r
	}
	if o.MaxConnections != DefaultMaxConnections || o.MaxRequestSize != DefaultMaxRequestSize || o.Timeout != DefaultTimeout {
		t.Errorf("defaults %+v", o)
	}
	tok := byName["nrdp_tokens"]
	if !tok.Secret {
		t.Error("nrdp_tokens is not secret")
	}
	if err := tok.Kind.Set(&o, " a, b "); err != nil || strings.Join(o.Tokens, "|") != "a|b" || tok.Kind.Text(&o) != "a,b" {
		t.Errorf("tokens %q %v", o.Tokens, err)
	}
	for _, bad := range []string{"a,,b", "a,", ","} {
		if err := tok.Kind.Set(&o, bad); err == nil {
			t.Errorf("nrdp_tokens=%q accepted", bad)
		}
	}
	if err := byName["nrdp_listen"].Kind.Set(&o, "127.0.0.1"); err == nil {
		t.Error("nrdp_listen without port accepted")
	}
}

func TestValidate(t *testing.T) {
	o := Options{Listen: "127.0.0.1:5668", CertFile: "c.pem"}
	var oe *option.Error
	if err := o.Validate(); !errors.As(err, &oe) || oe.Option != "nrdp_tls_cert" {
		t.Errorf("cert without key: %v", err)
	}
	o.KeyFile = "k.pem"
	if err := o.Validate(); err != nil {
		t.Errorf("cert and key: %v", err)
	}
	if err := (&Options{}).Validate(); err != nil {
		t.Errorf("off: %v", err)
	}
}

func TestNewNeedsAToken(t *testing.T) {
	_, err := New(Config{Options: Options{Listen: "127.0.0.1:5668"}})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("New without queue or token: %v", err)
	}
}
