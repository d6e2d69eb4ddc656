package identities

import (
	"errors"
	"testing"
)

func TestTokens(t *testing.T) {
	f, err := Parse("ids.cfg", []byte(`
authorize "a" { token = "ta"; hosts = "a" }
authorize "b" { password = "pw"; token = { "tb1", "tb2" }; token += "tb3" }
authorize "c" { password = "pc" }`), mapFS{})
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"ta": "a", "tb1": "b", "tb3": "b", "pw": "", "pc": "", "": "", "t": ""} {
		got := ""
		if id := f.ByToken(tok); id != nil {
			got = id.Name
		}
		if got != want {
			t.Errorf("ByToken(%q) = %q, want %q", tok, got, want)
		}
	}
	if !f.HasTokens() {
		t.Error("HasTokens is false")
	}
	for name, text := range map[string]string{
		"shared":    `authorize "a" { token = "t" } authorize "b" { token = "t" }`,
		"empty":     `authorize "a" { token = "" }`,
		"fallback":  `authorize "*" { token = "t" }`,
		"no secret": `authorize "a" { hosts = "a" }`,
	} {
		if _, err := Parse("ids.cfg", []byte(text), mapFS{}); !errors.Is(err, ErrBadValue) {
			t.Errorf("%s: %v, want ErrBadValue", name, err)
		}
	}
}
